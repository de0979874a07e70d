#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""net_upstream.py - the far end of vmnap-gateway's proxy mode in tests.

Listens on 127.0.0.1 (an ephemeral port, printed on stdout) and serves, by
the first line a connection sends:
  ECHO N          reads N bytes, answers the hex SHA-256 of them, a newline,
                  then N bytes of its own (random.Random(N).randbytes(N))
  SLOW MS         answers "late\\n" after MS ms, then closes
  GET /bytes/N    HTTP/1.1: N bytes of random.Random(N); X-Seen-Request and
  GET /slow/MS    X-Seen-Headers (lower-case names) tell what it received;
                  /slow answers "late\\n" after MS ms
"""
import hashlib
import random
import socket
import sys
import threading
import time


def read_line(f):
    line = f.readline(65536)
    return line.decode("latin-1").rstrip("\r\n")


def serve(conn):
    f = conn.makefile("rb")
    try:
        first = read_line(f)
        if first.startswith("ECHO "):
            n = int(first[5:])
            data = f.read(n)
            conn.sendall(hashlib.sha256(data).hexdigest().encode() + b"\n" +
                         random.Random(n).randbytes(n))
        elif first.startswith("SLOW "):
            time.sleep(int(first[5:]) / 1000)
            conn.sendall(b"late\n")
        elif first.startswith(("GET ", "HEAD ", "POST ")):
            names = []
            while True:
                h = read_line(f)
                if not h:
                    break
                names.append(h.split(":", 1)[0].lower())
            path = first.split(" ")[1]
            if path.startswith("/slow/"):
                time.sleep(int(path[6:]) / 1000)
                body = b"late\n"
            elif path.startswith("/bytes/"):
                n = int(path[7:])
                body = random.Random(n).randbytes(n)
            else:
                body = b"?\n"
            conn.sendall(("HTTP/1.1 200 OK\r\nContent-Length: %d\r\nX-Seen-Request: %s\r\n"
                          "X-Seen-Headers: %s\r\nConnection: close\r\n\r\n"
                          % (len(body), first, ",".join(names))).encode("latin-1") + body)
    except (OSError, ValueError):
        pass
    finally:
        try:
            conn.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        conn.close()


def main():
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    s.listen(64)
    print(s.getsockname()[1], flush=True)
    while True:
        c, _ = s.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
