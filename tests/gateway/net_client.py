#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""net_client.py - a guest's download client for vmnap-gateway's proxy tests.

  net_client.py PORT tunnel TARGET echo N   CONNECT TARGET, then the ECHO
        exchange of tests/gateway/net_upstream.py; prints the proxy's status,
        "up-exact" when the upstream's digest of our N bytes is ours and
        "down-exact" when its N bytes are the expected ones
  net_client.py PORT tunnel TARGET slow MS  CONNECT, SLOW MS; prints status, answer
  net_client.py PORT raw PYBYTES [HOLD_S]   sends the bytes (a Python bytes
        literal), then waits HOLD_S (default 0) before reading; prints the
        status code of the answer, or "closed" when none came
"""
import ast
import hashlib
import random
import socket
import sys
import time


def connect(port):
    s = socket.create_connection(("127.0.0.1", int(port)), timeout=30)
    return s


def read_head(s):
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(4096)
        if not d:
            break
        buf += d
    head, _, rest = buf.partition(b"\r\n\r\n")
    parts = head.split(b" ")
    return (parts[1].decode() if head.startswith(b"HTTP/") and len(parts) > 1 else "closed"), rest


def read_all(s, have):
    while True:
        d = s.recv(65536)
        if not d:
            return have
        have += d


def main():
    port, mode = sys.argv[1], sys.argv[2]
    s = connect(port)
    if mode == "raw":
        s.sendall(ast.literal_eval(sys.argv[3]))
        time.sleep(float(sys.argv[4]) if len(sys.argv) > 4 else 0)
        try:
            status, _ = read_head(s)
        except OSError:
            status = "closed"
        print(status)
        return 0
    target, op, arg = sys.argv[3], sys.argv[4], int(sys.argv[5])
    s.sendall(b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target.encode(), target.encode()))
    status, rest = read_head(s)
    out = [status]
    if status == "200" and op == "echo":
        data = random.Random(arg + 1).randbytes(arg)
        s.sendall(b"ECHO %d\n" % arg + data)
        got = read_all(s, rest)
        digest, _, back = got.partition(b"\n")
        out.append("up-exact" if digest.decode() == hashlib.sha256(data).hexdigest() else "up-differs")
        out.append("down-exact" if back == random.Random(arg).randbytes(arg) else
                   "down-differs(%d bytes)" % len(back))
    elif status == "200" and op == "slow":
        s.sendall(b"SLOW %d\n" % arg)
        out.append(read_all(s, rest).decode(errors="replace").strip())
    print(" ".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
