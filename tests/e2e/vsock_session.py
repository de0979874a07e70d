#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""vsock_session.py - one long-lived host -> guest stream through a
vhost-user-vsock device's hybrid socket, exercised on demand.

    vsock_session.py UDS PORT < commands

Connects to UDS, sends "CONNECT PORT", expects "OK <host port>", prints
"SESSION UP <host port>".  Then for each line NAME on stdin it sends 64 KiB
of pseudo-random bytes (seeded by NAME) to the guest's echo server and
checks every byte that comes back: "ROUND NAME OK" or "ROUND NAME BAD why".
Each round waits up to 600 s.  EOF on stdin ends it (exit 0 if every round
passed).
"""
import random
import socket
import sys

ROUND_BYTES = 64 << 10
TIMEOUT_S = 600


def say(line):
    print(line, flush=True)


def main():
    uds, port = sys.argv[1], int(sys.argv[2])
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(TIMEOUT_S)
    s.connect(uds)
    s.sendall(b"CONNECT %d\n" % port)
    line = b""
    while not line.endswith(b"\n"):
        b = s.recv(1)
        if not b:
            say("SESSION REFUSED")
            return 1
        line += b
    if not line.startswith(b"OK "):
        say("SESSION REFUSED %r" % line)
        return 1
    say("SESSION UP %s" % line[3:].decode().strip())
    bad = 0
    for cmd in sys.stdin:
        name = cmd.strip()
        if not name:
            continue
        data = random.Random(name).randbytes(ROUND_BYTES)
        try:
            s.sendall(data)
            got = bytearray()
            while len(got) < len(data):
                b = s.recv(len(data) - len(got))
                if not b:
                    raise ConnectionError("closed after %d bytes" % len(got))
                got += b
            if bytes(got) != data:
                raise ValueError("echoed bytes differ")
            say("ROUND %s OK" % name)
        except (OSError, ValueError) as e:
            bad += 1
            say("ROUND %s BAD %s" % (name, e))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
