#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""fake_guest.py - a stand-in for vmnap.ko on the guest link, for API tests.

Speaks the vmnap wire protocol (uapi/vmnap.h) over a unix stream socket
(vmnapd's per-VM "link_socket"): sends HELLO, answers HANDOFF_REQ with
HANDOFF_ACK (READY with a timer budget, or BUSY for the first --busy
requests) and RESUMED with RESUME_ACK.  One line per message on stdout.
This is not the real module (the e2e tests use that); it lets the API and
coordinator be tested end to end through vmnapd without a VM.

Hostile options: --module-version (a Python bytes literal, e.g. with
"\\n" and invalid UTF-8), --bad-messages N (N PINGs of a wrong payload
length after HELLO_ACK; vmnapd answers each with ERROR), --reconnects N
(connect and hang up N times as fast as possible first).
"""
import ast
import argparse, os, socket, struct, sys, time

MAGIC = 0x50414E56
HDR = struct.Struct("<IHHII")
HELLO, HELLO_ACK, HANDOFF_REQ, HANDOFF_ACK, HANDOFF_ABORT, RESUMED, RESUME_ACK = range(1, 8)
PING, PONG, ERROR = 10, 11, 12
READY, BUSY = 1, 2
BUSY_RUNNABLE = 1
EV_TIMER_KNOWN = 1
UNKNOWN = (1 << 64) - 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("socket")
    ap.add_argument("--budget-ms", type=int, default=10000, help="-1: unknown")
    ap.add_argument("--busy", type=int, default=0, help="answer BUSY this many times first")
    ap.add_argument("--exit-after-resumes", type=int, default=0)
    ap.add_argument("--module-version", default="b'fake-guest'")
    ap.add_argument("--bad-messages", type=int, default=0)
    ap.add_argument("--reconnects", type=int, default=0)
    ap.add_argument("--exit-after-errors", type=int, default=0)
    ap.add_argument("--resume-ack-gate", metavar="FILE",
                    help="answer RESUMED only once FILE exists (at most 60 s)")
    a = ap.parse_args()

    for _ in range(a.reconnects):
        r = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            r.connect(a.socket)
        except OSError:
            pass
        r.close()
    print("RECONNECTED %d" % a.reconnects, flush=True)

    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    for _ in range(100):
        try:
            s.connect(a.socket)
            break
        except OSError:
            time.sleep(0.05)
    seq = 0

    def send(t, payload):
        nonlocal seq
        seq += 1
        s.sendall(HDR.pack(MAGIC, 1, t, len(payload), seq) + payload)

    ver = ast.literal_eval(a.module_version)[:31].ljust(32, b"\0")
    send(HELLO, struct.pack("<HHIIIII", 1, 1, 0x7, 1, 4096, 1, 0) + ver +
         struct.pack("<QQ", 0, 512 << 20))
    buf = b""
    busy_left, resumes, errors = a.busy, 0, 0
    while True:
        try:
            d = s.recv(65536)
        except OSError:
            break
        if not d:
            break
        buf += d
        while len(buf) >= HDR.size:
            magic, ver_, t, ln, _ = HDR.unpack_from(buf)
            if len(buf) < HDR.size + ln:
                break
            p, buf = buf[HDR.size:HDR.size + ln], buf[HDR.size + ln:]
            if t == HELLO_ACK:
                print("HELLO_ACK", flush=True)
                for _ in range(a.bad_messages):
                    send(PING, b"\0" * 4)     # PING carries 8 bytes
            elif t == HANDOFF_REQ:
                req, flags, dl = struct.unpack("<QII", p)
                if busy_left > 0:
                    busy_left -= 1
                    verdict, reasons, flags_ev, budget = BUSY, BUSY_RUNNABLE, 0, UNKNOWN
                else:
                    verdict, reasons = READY, 0
                    if a.budget_ms < 0:
                        flags_ev, budget = 0, UNKNOWN
                    else:
                        flags_ev, budget = EV_TIMER_KNOWN, a.budget_ms * 1000000
                ev = struct.pack("<QQQQIIIIII", 1000000, budget, 0, 0, 1000, 0, 0, reasons,
                                 1, flags_ev)
                send(HANDOFF_ACK, struct.pack("<QII", req, verdict, 0) + ev)
                print("HANDOFF_REQ %d flags %d -> %s" % (req, flags,
                      "READY" if verdict == READY else "BUSY"), flush=True)
            elif t == HANDOFF_ABORT:
                print("HANDOFF_ABORT %d" % struct.unpack("<Q", p), flush=True)
            elif t == RESUMED:
                req, paused, reason, flags = struct.unpack("<QQII", p)
                if a.resume_ack_gate:
                    print("RESUMED %d: RESUME_ACK held" % req, flush=True)
                    end = time.monotonic() + 60
                    while not os.path.exists(a.resume_ack_gate) and time.monotonic() < end:
                        time.sleep(0.02)
                send(RESUME_ACK, struct.pack("<QQ", req, 1000))
                resumes += 1
                print("RESUMED %d reason %d flags %d" % (req, reason, flags), flush=True)
                if a.exit_after_resumes and resumes >= a.exit_after_resumes:
                    return 0
            elif t == PING:
                send(PONG, p)
            elif t == ERROR:
                print("ERROR %d" % struct.unpack_from("<I", p), flush=True)
                errors += 1
                if a.exit_after_errors and errors >= a.exit_after_errors:
                    return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
