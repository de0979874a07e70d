#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Host side of tests/e2e/guest_time.sh: the guest's clocks against the
host's across vmnapd pauses, with one pause backend.

    guest_time_host.py CTL_SOCKET API_SOCKET VM BACKEND_JSON OUT_JSON

CTL_SOCKET is the guest's /dev/ttyS1, where tests/selftests/guest_time
answers.  The pause backend BACKEND_JSON (the API's "pause" object) is set
and the VM managed; then:

  drift   3 model waits of WAIT_S each (the coordinator pauses the VM),
          the guest's CLOCK_REALTIME minus the host's measured before and
          after (the query with the shortest round trip of QUERIES, whose
          half bounds the error)
  timer   a 300 ms periodic CLOCK_MONOTONIC timer in the guest through a
          model wait of TICK_WAIT_S; each expiry's arrival on the host
          against its grid (the grid's origin is the earliest-arriving
          tick, so serial latency does not count): the lateness of the
          latest tick, and the longest gap between two ticks

Everything measured goes to OUT_JSON; the shell test asserts on it.
"""
import http.client
import json
import socket
import sys
import time

QUERIES = 7
WAIT_S = 3.0
WAITS = 3
PERIOD_MS = 300
TICK_WAIT_S = 6.0
STATE_WAIT_S = 60


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("vmnapd", timeout=30)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(30)
        self.sock.connect(self.path)


def api(sock, method, path, body=None):
    c = UnixHTTP(sock)
    try:
        c.request(method, path, body=None if body is None else json.dumps(body),
                  headers={"Content-Type": "application/json"} if body is not None else {})
        r = c.getresponse()
        text = r.read().decode(errors="replace")
    finally:
        c.close()
    return r.status, (json.loads(text) if text.strip() else {})


class Ctl:
    """The line channel to guest_time; tick lines are kept apart."""

    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.connect(path)
        self.buf = b""
        self.lines = []		# other lines, in order
        self.ticks = []		# (host monotonic ns at arrival, n)

    def _line(self, deadline):
        while not self.lines:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no line from the guest")
            self.s.settimeout(left)
            d = self.s.recv(4096)
            if not d:
                raise EOFError("control channel closed")
            now = time.monotonic_ns()	# stamps the lines these bytes ended
            self.buf += d
            while b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                text = line.decode(errors="replace").strip()
                if text.startswith("K "):
                    self.ticks.append((now, int(text.split()[1])))
                else:
                    self.lines.append(text)
        return self.lines.pop(0)

    def expect(self, prefix, timeout=30):
        deadline = time.monotonic() + timeout
        while True:
            line = self._line(deadline)
            if line.startswith(prefix):
                return line

    def send(self, line):
        self.s.sendall(line.encode() + b"\n")

    def pump(self, seconds):
        """Collect tick lines for @seconds."""
        deadline = time.monotonic() + seconds
        try:
            while True:
                self._line(deadline)
        except TimeoutError:
            pass

    def offset(self):
        """Guest CLOCK_REALTIME minus host's, ns, and its error bound."""
        best = None
        for _ in range(QUERIES):
            t0 = time.time_ns()
            self.send("Q")
            g = int(self.expect("T ").split()[1])
            t1 = time.time_ns()
            cand = (t1 - t0, g - (t0 + t1) // 2)
            if best is None or cand[0] < best[0]:
                best = cand
        return best[1], best[0] // 2


def counters(sock, vm):
    _, j = api(sock, "GET", "/vms/" + vm)
    return j.get("counters", {})


def wait_state(sock, vm, want):
    deadline = time.monotonic() + STATE_WAIT_S
    while time.monotonic() < deadline:
        _, j = api(sock, "GET", "/vms/" + vm)
        if j.get("state") == want:
            return True
        time.sleep(0.1)
    return False


def model_wait(sock, vm, wid, seconds, during=None):
    st, _ = api(sock, "POST", "/vms/%s/waits" % vm, {"id": wid, "kind": "model"})
    if st >= 300:
        raise RuntimeError("wait %s: HTTP %d" % (wid, st))
    if during:
        during(seconds)
    else:
        time.sleep(seconds)
    api(sock, "POST", "/vms/%s/waits/%s/ready" % (vm, wid))
    if not wait_state(sock, vm, "RUNNING"):
        raise RuntimeError("VM not RUNNING after wait %s" % wid)
    time.sleep(0.3)	# RESUME_ACK: the guest stepped its clock before it


def main():
    ctl_path, sock, vm, backend, out = sys.argv[1:6]
    res = {"backend": json.loads(backend)}
    ctl = Ctl(ctl_path)
    ctl.send("P 0")
    ctl.expect("OK")

    api(sock, "PATCH", "/vms/" + vm, {"managed": False})
    st, j = api(sock, "PATCH", "/vms/" + vm, {"pause": res["backend"]})
    res["set_pause_status"] = st
    res["pause_view"] = j.get("pause", {})
    st, j = api(sock, "PATCH", "/vms/" + vm, {"managed": True})
    res["manage_status"] = st
    if st >= 300:
        res["manage_error"] = j.get("error")
        json.dump(res, open(out, "w"), indent=1)
        return

    # ---- drift ----
    c0 = counters(sock, vm)
    off0, err0 = ctl.offset()
    for i in range(WAITS):
        model_wait(sock, vm, "d%d-%d" % (i, time.monotonic_ns()), WAIT_S)
    off1, err1 = ctl.offset()
    c1 = counters(sock, vm)
    res["drift_ms"] = (off1 - off0) / 1e6
    res["drift_err_ms"] = (err0 + err1) / 1e6
    res["offset_before_ms"] = off0 / 1e6
    res["drift_pauses"] = c1.get("pauses", 0) - c0.get("pauses", 0)
    res["drift_paused_ms"] = (c1.get("paused_ns_total", 0) - c0.get("paused_ns_total", 0)) / 1e6

    # ---- timer ----
    ctl.ticks = []
    ctl.send("P %d" % PERIOD_MS)
    ctl.expect("OK")
    ctl.pump(1.2)
    c0 = counters(sock, vm)
    model_wait(sock, vm, "t-%d" % time.monotonic_ns(), TICK_WAIT_S, ctl.pump)
    ctl.pump(1.0)
    c1 = counters(sock, vm)
    ctl.send("P 0")
    ctl.expect("OK")
    ticks = ctl.ticks
    period = PERIOD_MS * 1000000
    res["ticks"] = len(ticks)
    res["timer_pauses"] = c1.get("pauses", 0) - c0.get("pauses", 0)
    res["timer_resumes"] = c1.get("resumes_by_reason", {}).get("timer", 0) - \
        c0.get("resumes_by_reason", {}).get("timer", 0)
    if len(ticks) >= 2:
        origin = min(t - n * period for t, n in ticks)
        res["late_max_ms"] = max(t - n * period - origin for t, n in ticks) / 1e6
        res["gap_max_ms"] = max(b[0] - a[0] for a, b in zip(ticks, ticks[1:])) / 1e6
        res["overruns"] = sum(1 for a, b in zip(ticks, ticks[1:]) if b[1] - a[1] > 1)
    off2, err2 = ctl.offset()
    res["drift_after_timer_ms"] = (off2 - off0) / 1e6
    res["drift_after_timer_err_ms"] = (err0 + err2) / 1e6
    api(sock, "PATCH", "/vms/" + vm, {"managed": False})
    json.dump(res, open(out, "w"), indent=1)


if __name__ == "__main__":
    main()
