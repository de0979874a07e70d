#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""wedged_vmm.py - a wedged VMM never stalls vmnapd's event loop (TAP).

A real vmnapd with two VMs.  "good" has a fake cgroup v1 freezer as pause
backend and tests/api/fake_guest.py as its guest link peer.  The other VM's
QMP socket is wedged, as a hung QEMU's is:
  silent   accepts the connection and never says a word
  backlog  listens, never accepts, and its backlog is full (connect waits)
For each wedge: a manual pause of the wedged VM puts its backend call in
flight (pause timeout 30 s, far beyond every bound below); then
  - DELETE of the wedged VM is answered
  - meanwhile and afterwards "good"'s API is answered, and its guest link
    answers a handoff (manual pause to PAUSED, resume to RUNNING)
Then, with a 1 s backend timeout, a pause against a full backlog fails by
itself (connect has a deadline) and the VM leaves HANDOFF; and vmnapd stops
on SIGTERM while a wedged call is in flight.
"Answered" means within ANSWER_S; the issue's target is 100 ms, printed as
the measured value, not asserted (a loaded 2-core machine).
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

ANSWER_S = 2.0		# DELETE / GET counted as answered within this
STATE_S = 10.0		# a state change must show within this
WEDGE_TIMEOUT_MS = 30000

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import proc  # noqa: E402
import tap  # noqa: E402
from tap import ok  # noqa: E402


class Api:
    def __init__(self, path):
        self.path = path

    def req(self, method, url, body=None, timeout=ANSWER_S * 2):
        """(status, json or None, seconds); status None when not answered."""
        t0 = time.monotonic()
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        data = json.dumps(body).encode() if body is not None else b""
        try:
            s.connect(self.path)
            s.sendall(f"{method} {url} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                      f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
            buf = b""
            while True:
                b = s.recv(65536)
                if not b:
                    break
                buf += b
        except OSError:
            return None, None, time.monotonic() - t0
        finally:
            s.close()
        dt = time.monotonic() - t0
        head, _, payload = buf.partition(b"\r\n\r\n")
        try:
            status = int(head.split(b" ", 2)[1])
        except (IndexError, ValueError):
            return None, None, dt
        try:
            j = json.loads(payload) if payload.strip() else None
        except ValueError:
            j = None
        return status, j, dt

    def state(self, vm):
        st, j, _ = self.req("GET", f"/vms/{vm}")
        return j.get("state") if st == 200 and j else None

    def wait_state(self, vm, want, limit=STATE_S):
        t_end = time.monotonic() + limit
        while time.monotonic() < t_end:
            if self.state(vm) == want:
                return True
            time.sleep(0.05)
        return False


def wedge_silent(path, stop):
    """Accept and hold every connection, never answer."""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(8)
    srv.settimeout(0.2)
    held = []

    def run():
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                pass
        for c in held:
            c.close()
        srv.close()
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def wedge_backlog(path, stop):
    """Listen, never accept, fill the backlog."""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(0)
    fillers = []
    for _ in range(64):
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_NONBLOCK)
        try:
            c.connect(path)
            fillers.append(c)
        except BlockingIOError:
            c.close()
            break

    def run():
        stop.wait()
        for c in fillers:
            c.close()
        srv.close()
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def start_vmnapd(vmnapd, tmp, name, log):
    run = os.path.join(tmp, name)
    p = subprocess.Popen([vmnapd, "-r", run, "-s", os.path.join(tmp, name + "-store"),
                          "-e", os.path.join(tmp, name + "-events.jsonl"), "-l", "debug"],
                         stdout=log, stderr=subprocess.STDOUT)
    sock = os.path.join(run, "api.sock")
    for _ in range(200):
        if os.path.exists(sock):
            break
        time.sleep(0.05)
    return p, Api(sock)


def good_vm(api, tmp, procs):
    cg = os.path.join(tmp, "fake-cgroup")
    os.makedirs(cg, exist_ok=True)
    with open(os.path.join(cg, "freezer.state"), "w") as f:
        f.write("THAWED\n")
    link = os.path.join(tmp, "good.link")
    st, _, _ = api.req("PUT", "/vms/good", {"pause": {"backend": "freezer", "path": cg},
                                            "link_socket": link})
    g = subprocess.Popen([sys.executable, "tests/api/fake_guest.py", link,
                          "--budget-ms", "10000"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs.append(g)
    t_end = time.monotonic() + STATE_S
    up = False
    while time.monotonic() < t_end and not up:
        _, j, _ = api.req("GET", "/vms/good")
        up = bool(j and j.get("link", {}).get("state") == "up")
        time.sleep(0.05)
    return st in (200, 201) and up


def guest_link_answers(api):
    """A handoff through good's guest link: PAUSED, then RUNNING again."""
    t0 = time.monotonic()
    st, _, _ = api.req("POST", "/vms/good/actions/pause")
    paused = st == 202 and api.wait_state("good", "PAUSED")
    dt = time.monotonic() - t0
    st, _, _ = api.req("POST", "/vms/good/actions/resume")
    resumed = st == 202 and api.wait_state("good", "RUNNING")
    return paused and resumed, dt


def scenario(vmnapd, tmp, log, kind, procs):
    stop = threading.Event()
    d, api = start_vmnapd(vmnapd, tmp, "run-" + kind, log)
    try:
        ok(good_vm(api, tmp, procs), f"{kind}: VM good registered, its guest link up")
        qmp = os.path.join(tmp, f"qmp-{kind}.sock")
        wt = (wedge_silent if kind == "silent" else wedge_backlog)(qmp, stop)
        st, _, _ = api.req("PUT", "/vms/wedged", {"pause": {
            "backend": "qmp", "path": qmp, "timeout_ms": WEDGE_TIMEOUT_MS}})
        st2, _, _ = api.req("POST", "/vms/wedged/actions/pause")
        handoff = api.wait_state("wedged", "HANDOFF", 2.0)
        time.sleep(0.5)		# the call is in connect / read now
        ok(st == 201 and st2 == 202 and api.state("wedged") == "HANDOFF",
           f"{kind}: the wedged VM's pause call is in flight (HANDOFF)",
           f"register {st}, pause {st2}, saw HANDOFF: {handoff}")
        st, _, dt = api.req("GET", "/vms/good")
        ok(st == 200 and dt < ANSWER_S, f"{kind}: good's API answered during the wedge",
           f"GET /vms/good {st} in {dt * 1000:.1f} ms")

        # DELETE and a GET of good at the same time
        res = {}

        def other():
            time.sleep(0.02)
            res["get"] = api.req("GET", "/vms/good")
        t = threading.Thread(target=other)
        t.start()
        st, _, dt = api.req("DELETE", "/vms/wedged")
        t.join()
        ok(st == 204 and dt < ANSWER_S, f"{kind}: DELETE of the wedged VM answered",
           f"DELETE {st} in {dt * 1000:.1f} ms (target 100 ms)")
        gst, _, gdt = res["get"]
        ok(gst == 200 and gdt < ANSWER_S, f"{kind}: good's API answered during the DELETE",
           f"GET /vms/good {gst} in {gdt * 1000:.1f} ms (target 100 ms)")
        answered, hdt = guest_link_answers(api)
        ok(answered, f"{kind}: good's guest link answers a handoff after the DELETE",
           f"RUNNING -> PAUSED in {hdt * 1000:.1f} ms")
        st, j, _ = api.req("GET", "/")
        ok(st == 200 and j and j.get("vms") == 1, f"{kind}: the wedged VM is gone")
    finally:
        proc.stop(d)
        stop.set()
        wt.join(timeout=5) if "wt" in locals() else None


def connect_deadline(vmnapd, tmp, log):
    stop = threading.Event()
    d, api = start_vmnapd(vmnapd, tmp, "run-deadline", log)
    qmp = os.path.join(tmp, "qmp-deadline.sock")
    wt = wedge_backlog(qmp, stop)
    try:
        api.req("PUT", "/vms/late", {"pause": {"backend": "qmp", "path": qmp,
                                               "timeout_ms": 1000}})
        t0 = time.monotonic()
        st, _, _ = api.req("POST", "/vms/late/actions/pause")
        left = False
        while time.monotonic() - t0 < STATE_S and not left:
            time.sleep(0.05)
            left = api.state("late") not in ("HANDOFF", None)
        dt = time.monotonic() - t0
        _, j, _ = api.req("GET", "/vms/late")
        errs = (j or {}).get("pause", {}).get("errors")
        ok(st == 202 and left and errs == 1,
           "a pause against a full QMP backlog fails by its 1 s timeout",
           f"left HANDOFF after {dt * 1000:.0f} ms, state {(j or {}).get('state')}, "
           f"pause errors {errs}")

        # shutdown with a wedged call in flight
        api.req("PATCH", "/vms/late", {"pause": {"backend": "qmp", "path": qmp,
                                                 "timeout_ms": WEDGE_TIMEOUT_MS}})
        api.req("POST", "/vms/late/actions/pause")
        time.sleep(0.3)
        t0 = time.monotonic()
        d.send_signal(signal.SIGTERM)
        try:
            rc = d.wait(timeout=10)
        except subprocess.TimeoutExpired:
            rc = None
        dt = time.monotonic() - t0
        ok(rc == 0, "vmnapd stops on SIGTERM with a wedged VMM call in flight",
           f"exit {rc} after {dt * 1000:.0f} ms")
    finally:
        if d.poll() is None:
            d.kill()
            d.wait()
        stop.set()
        wt.join(timeout=5)


def main():
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    vmnapd = os.path.join(os.environ.get("BUILD", "build"), "vmnapd")
    if not os.access(vmnapd, os.X_OK):
        print(f"1..0 # SKIP {vmnapd} not built")
        return 0
    tmp = tempfile.mkdtemp(prefix="vmnap-wedged.")
    logp = os.path.join(tmp, "vmnapd.log")
    log = open(logp, "w")
    procs = []
    try:
        for kind in ("silent", "backlog"):
            scenario(vmnapd, tmp, log, kind, procs)
        connect_deadline(vmnapd, tmp, log)
    finally:
        for p in procs:
            p.kill()
            p.wait()
        log.close()
        if tap.failed:
            with open(logp) as f:
                for line in f.read().splitlines()[-40:]:
                    print(f"# vmnapd: {line}")
        shutil.rmtree(tmp, ignore_errors=True)
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
