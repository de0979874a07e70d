#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""qmp.py - send commands to a QEMU QMP unix socket and print the replies.

usage: scripts/qmp.py [--timeout SEC] [--events] SOCKET COMMAND...

COMMAND is a JSON object ('{"execute": "stop"}') or a bare command name
('query-status', same as {"execute": "query-status"}).  The capabilities
negotiation is done first.  Each reply's "return" value is printed as one
JSON line (asynchronous events only with --events).  Exit status: 0 when
every command succeeded, 1 when QEMU answered one with an error (printed on
stderr; later commands are not sent), 2 on usage, connection or protocol
errors.
"""
import argparse
import json
import socket
import sys

DEFAULT_TIMEOUT_SEC = 30
EXIT_OK, EXIT_QMP_ERROR, EXIT_FAILURE = 0, 1, 2


class QmpError(Exception):
    pass


class Qmp:
    """One QMP connection: JSON objects, one per line, in both directions."""

    def __init__(self, path, timeout, print_events):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.buf = b""
        self.print_events = print_events
        greeting = self._read_object()
        if "QMP" not in greeting:
            raise QmpError(f"not a QMP greeting: {greeting}")

    def _read_object(self):
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise QmpError("QEMU closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        try:
            obj = json.loads(line)
        except ValueError as e:
            raise QmpError(f"bad JSON from QEMU: {e}: {line[:200]!r}")
        if not isinstance(obj, dict):
            raise QmpError(f"unexpected JSON from QEMU: {line[:200]!r}")
        return obj

    def execute(self, cmd):
        """Send one command, return its reply (events are skipped)."""
        self.sock.sendall(json.dumps(cmd).encode() + b"\n")
        while True:
            obj = self._read_object()
            if "event" in obj:
                if self.print_events:
                    print(json.dumps(obj), flush=True)
                continue
            if "return" in obj or "error" in obj:
                return obj


def parse_command(text):
    text = text.strip()
    if not text.startswith("{"):
        return {"execute": text}
    cmd = json.loads(text)
    if not isinstance(cmd, dict) or "execute" not in cmd:
        raise ValueError(f"not a QMP command (needs \"execute\"): {text}")
    return cmd


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_SEC,
                    help="seconds to wait for any reply (default %(default)s)")
    ap.add_argument("--events", action="store_true", help="print events too")
    ap.add_argument("socket")
    ap.add_argument("commands", nargs="+", metavar="COMMAND")
    args = ap.parse_args()
    try:
        cmds = [parse_command(c) for c in args.commands]
    except ValueError as e:
        print(f"qmp: {e}", file=sys.stderr)
        return EXIT_FAILURE
    try:
        qmp = Qmp(args.socket, args.timeout, args.events)
        reply = qmp.execute({"execute": "qmp_capabilities"})
        if "error" in reply:
            raise QmpError(f"capabilities negotiation failed: {reply['error']}")
        for cmd in cmds:
            reply = qmp.execute(cmd)
            if "error" in reply:
                err = reply["error"]
                print(f"qmp: {cmd['execute']}: {err.get('class')}: {err.get('desc')}",
                      file=sys.stderr)
                return EXIT_QMP_ERROR
            print(json.dumps(reply["return"]), flush=True)
    except (OSError, QmpError) as e:
        print(f"qmp: {args.socket}: {e}", file=sys.stderr)
        return EXIT_FAILURE
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
