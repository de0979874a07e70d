#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""demo.py - the vmnap demo (`make demo`): one scripted agent session, twice.

Each run boots the Debian guest kernel in QEMU (TCG here) with vmnap.ko,
vmnapd (its vhost-user-vsock device carries the guest link, the preload
shim hands guest RAM to the pager, the cgroup freezer on QEMU's own cgroup
pauses: the guest's clock keeps running, so its time stays true; QMP stop
with "allow_clock_stop" only where no freezer cgroup can be made), then
plays the same session: a tool command run in the guest, then a model
request, six times with model think times from 10 ms to 5 s.  The agent
sends its model requests to vmnap-gateway, the VM's model API base URL, in
front of the gateway's fake model server: the gateway alone tells vmnapd
that a wait started (the request) and that its data is ready (the first
response byte); the demo makes no wait API call.  The first
run has the coordinator disabled (baseline: the VM is registered but
unmanaged), the second enabled.  Guest-RAM resident bytes (the memfd's
allocated blocks, as the pager counts them) are sampled through the API
every SAMPLE_SEC for the memory x time integral.

Prints a table per wait (states passed, paused/offloaded, resident before /
during (minimum) / after, delivery latency = data ready -> the guest's
RESUME_ACK, as vmnapd measures it) and totals, and writes
build/demo/summary.json.
"""
import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

from replay.common import percentile  # scripts/ is on sys.path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("BUILD", "build")
OUT = os.path.join(ROOT, BUILD, "demo")
GUEST_MIB = 512
FILL_MIB = 96
CID = 3
SAMPLE_SEC = 0.05
BOOT_TIMEOUT = 400
STEP_TIMEOUT = 180
GUEST_TIMEOUT = 900
GIB = float(1 << 30)

# The scripted session: (tool command, model think time in seconds).
SESSION = [
    ("uname -r", 0.010),
    ("ls /lib/modules", 0.100),
    ("sha256sum /tmp/fill | cut -c1-16", 0.500),
    ("wc -c </tmp/fill", 1.500),
    ("head -c 4000000 /tmp/fill | md5sum", 3.000),
    ("echo hello agent | tr a-z A-Z", 5.000),
]
FINAL_CHECK = "sha256sum /tmp/fill | cut -c1-16"
# Any trajectory: the fake model server answers each request after the
# think time the demo asks for (X-Fake-Wait-Ms).
TRAJECTORY = os.path.join(ROOT, "tests", "data", "replay-tiny.jsonl")

GUEST_CMD = r"""
yes 'vmnap demo: page cache the agent will want back' | head -c %(fill_bytes)d >/tmp/fill
insmod /lib/modules/vmnap.ko || echo INSMOD-FAILED
for i in $(seq 60); do vmnap-guest status 2>/dev/null | grep -q '^link=up' && break; sleep 1; done
echo DEMO-GUEST-UP
exec 3<>/dev/ttyS1
while read -r cmd <&3; do
	[ "$cmd" = quit ] && break
	out=$(eval "$cmd" 2>&1); rc=$?
	echo "RESULT $rc $(printf '%%s' "$out" | sha256sum | cut -c1-16) $(printf '%%s' "$out" | head -c 60 | tr '\n' ' ')" >&3
done
"""


class BootError(RuntimeError):
    pass


def log(msg):
    print("demo: " + msg, flush=True)


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("vmnapd", timeout=30)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(30)
        self.sock.connect(self.path)


def model_request(sock, think_s):
    """The agent's model request through the gateway; (status, seconds)."""
    body = json.dumps({"model": "demo", "messages": [{"role": "user", "content": "next?"}]})
    t0 = time.monotonic()
    c = UnixHTTP(sock)
    c.timeout = STEP_TIMEOUT
    c.request("POST", "/v1/chat/completions", body=body,
              headers={"Content-Type": "application/json",
                       "X-Fake-Wait-Ms": str(int(think_s * 1000))})
    r = c.getresponse()
    r.read()
    c.close()
    return r.status, time.monotonic() - t0


class Api:
    def __init__(self, sock):
        self.sock = sock
        self.lock = threading.Lock()

    def call(self, method, path, body=None):
        with self.lock:
            c = UnixHTTP(self.sock)
            c.request(method, path, body=json.dumps(body) if body is not None else None,
                      headers={"Content-Type": "application/json"})
            r = c.getresponse()
            data = r.read()
            c.close()
        if r.status >= 400:
            raise RuntimeError("%s %s -> %d %s" % (method, path, r.status, data[:200]))
        return json.loads(data) if data and r.getheader("Content-Type", "").startswith("application/json") else None


class Sampler(threading.Thread):
    """Polls the VM's resident bytes; keeps (t, bytes, state) samples."""

    def __init__(self, api, vm):
        super().__init__(daemon=True)
        self.api, self.vm = api, vm
        self.samples = []
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            try:
                j = self.api.call("GET", "/vms/" + self.vm)
                rb = j.get("pager", {}).get("resident_bytes")
                if rb is not None:
                    self.samples.append((time.monotonic(), rb, j["state"]))
            except Exception:
                pass
            self.stop.wait(SAMPLE_SEC)

    def between(self, t0, t1):
        return [s for s in self.samples if t0 <= s[0] <= t1]

    def integral_gib_s(self):
        tot = 0.0
        for (t0, b0, _), (t1, _, _) in zip(self.samples, self.samples[1:]):
            tot += b0 * (t1 - t0)
        return tot / GIB

    def max_gap(self):
        return max((b[0] - a[0] for a, b in zip(self.samples, self.samples[1:])), default=0.0)


def wait_for(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    raise RuntimeError("timed out waiting for " + what)


def read_events(path):
    out = []
    try:
        with open(path) as f:
            for line in f:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
    except OSError:
        pass
    return out


def freezer_cgroup(name):
    """A fresh freezer cgroup for QEMU: the v1 freezer hierarchy, else v2
    (cgroup.freeze).  None when neither can be made here."""
    for root, probe in (("/sys/fs/cgroup/freezer", "freezer.state"),
                        ("/sys/fs/cgroup/unified", "cgroup.freeze"),
                        ("/sys/fs/cgroup", "cgroup.freeze")):
        if not os.path.exists(os.path.join(root, "cgroup.procs")):
            continue
        d = os.path.join(root, name)
        try:
            os.makedirs(d, exist_ok=True)
        except OSError:
            continue
        if os.path.exists(os.path.join(d, probe)):
            return d
        try:
            os.rmdir(d)
        except OSError:
            pass
    return None


def freezer_remove(d):
    """Thaw and remove a freezer cgroup once QEMU is gone."""
    for name, val in (("freezer.state", "THAWED"), ("cgroup.freeze", "0")):
        try:
            with open(os.path.join(d, name), "w") as f:
                f.write(val)
        except OSError:
            pass
    for _ in range(50):
        try:
            os.rmdir(d)
            return
        except OSError:
            time.sleep(0.1)


def run_session(mode, work):
    """One boot, one session. Returns a dict with per-wait rows and totals."""
    managed = mode == "vmnap"
    run = os.path.join(work, mode)
    os.makedirs(run, exist_ok=True)
    rundir = os.path.join(run, "run")
    events = os.path.join(OUT, "events-%s.jsonl" % mode)
    if os.path.exists(events):
        os.unlink(events)
    vmnapd_log = open(os.path.join(OUT, "vmnapd-%s.log" % mode), "w")
    vmnapd = subprocess.Popen([os.path.join(ROOT, BUILD, "vmnapd"), "-r", rundir, "-s",
                               os.path.join(run, "store"), "-e", events, "-l", "info"],
                              stdout=vmnapd_log, stderr=subprocess.STDOUT)
    gateway_log = open(os.path.join(OUT, "gateway-%s.log" % mode), "w")
    model_sock, agent_sock = os.path.join(run, "model.sock"), os.path.join(run, "agent.sock")
    gw = os.path.join(ROOT, BUILD, "vmnap-gateway")
    model = subprocess.Popen([gw, "--fake-upstream", TRAJECTORY, "--listen", "model=unix:" + model_sock],
                             stdout=gateway_log, stderr=subprocess.STDOUT)
    gateway = subprocess.Popen([gw, "--api", os.path.join(rundir, "api.sock"), "--listen",
                                "demo=unix:" + agent_sock, "--upstream", "http://model",
                                "--upstream-unix", model_sock],
                               stdout=gateway_log, stderr=subprocess.STDOUT)
    guest = None
    ctl = None
    sampler = None
    cg = freezer_cgroup("vmnap-demo-%s-%d" % (mode, os.getpid()))
    try:
        sock = os.path.join(rundir, "api.sock")
        wait_for(lambda: os.path.exists(sock), 10, "vmnapd's API socket")
        api = Api(sock)
        vm = "demo"
        vu, uds = os.path.join(run, "vu.sock"), os.path.join(run, "v.sock")
        api.call("PUT", "/vms/" + vm, {"vsock": {"vhost_user": vu, "cid": CID, "uds": uds},
                                       "managed": False})
        qmp, ctlp = os.path.join(run, "qmp.sock"), os.path.join(run, "ctl.sock")
        console = os.path.join(OUT, "console-%s.log" % mode)
        if os.path.exists(console):
            os.unlink(console)	# a previous run's lines must not count
        preload = os.path.join(ROOT, BUILD, "libvmnap-preload.so")
        guest = subprocess.Popen(
            [os.path.join(ROOT, "scripts", "run-guest.sh"), "--name", "demo-" + mode,
             "--mem", str(GUEST_MIB), "--timeout", str(GUEST_TIMEOUT), "--qmp", qmp,
             "--ctl", ctlp, "--log", console, "--vsock-user", vu,
             "--env", "LD_PRELOAD=" + preload, "--env", "VMNAP_SOCKET=" + os.path.join(rundir, "mem.sock"),
             "--env", "VMNAP_VM=" + vm, "--", GUEST_CMD % {"fill_bytes": FILL_MIB << 20}],
            stdout=open(os.path.join(OUT, "guest-%s.out" % mode), "w"), stderr=subprocess.STDOUT,
            preexec_fn=(lambda: open(os.path.join(cg, "cgroup.procs"), "w").write(str(os.getpid())))
            if cg else None)
        log("%s: booting the guest (console %s)" % (mode, os.path.relpath(console, ROOT)))

        def console_has(s):
            try:
                with open(console, errors="replace") as f:
                    return s in f.read()
            except OSError:
                return False
        t_boot = time.monotonic()
        wait_for(lambda: console_has("DEMO-GUEST-UP") or guest.poll() is not None, BOOT_TIMEOUT,
                 "the guest to boot")
        if guest.poll() is not None:
            why = "see " + console
            try:
                with open(os.path.join(OUT, "guest-%s.out" % mode)) as f:
                    errs = [line.strip() for line in f if "ERROR" in line or "unable" in line]
                if errs:
                    why = errs[0]
            except OSError:
                pass
            raise BootError("the guest exited during boot: " + why)
        log("%s: guest up in %.1f s; vmnap.ko %s" % (
            mode, time.monotonic() - t_boot,
            "linked" if api.call("GET", "/vms/" + vm).get("link", {}).get("state") == "up" else "NOT linked"))
        wait_for(lambda: os.path.exists(qmp), 30, "QEMU's QMP socket")
        if cg:	# QEMU alone in its cgroup: freezing it keeps the guest clock running
            pause = {"backend": "freezer", "path": cg}
        else:	# QMP stop stops the guest clock: its monotonic timers run late
            log("%s: no freezer cgroup here: pausing with QMP (guest clock stops)" % mode)
            pause = {"backend": "qmp", "path": qmp, "allow_clock_stop": True}
        api.call("PATCH", "/vms/" + vm, {"pause": pause, "managed": managed})
        ctl = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        ctl.connect(ctlp)
        ctl.settimeout(STEP_TIMEOUT)
        ctl_buf = [b""]

        def tool(cmd):
            ctl.sendall(cmd.encode() + b"\n")
            while b"\n" not in ctl_buf[0]:
                d = ctl.recv(4096)
                if not d:
                    raise RuntimeError("control channel closed")
                ctl_buf[0] += d
            line, ctl_buf[0] = ctl_buf[0].split(b"\n", 1)
            parts = line.decode(errors="replace").split(" ", 3)
            return int(parts[1]), parts[2], (parts[3] if len(parts) > 3 else "").strip()

        sampler = Sampler(api, vm)
        sampler.start()
        time.sleep(0.3)
        rows = []
        t_start = time.monotonic()
        for i, (cmd, think) in enumerate(SESSION):
            t_tool = time.monotonic()
            rc, digest, text = tool(cmd)
            tool_s = time.monotonic() - t_tool
            ev_before = len(read_events(events))
            t0 = time.monotonic()
            status, response_s = model_request(agent_sock, think)
            if status != 200:
                raise RuntimeError("model request %d through the gateway: HTTP %d" % (i + 1, status))

            def wait_started():
                for e in read_events(events)[ev_before:]:
                    if e["type"] == "wait_start":
                        return e
                return None
            wid = wait_for(wait_started, STEP_TIMEOUT, "the gateway's wait %d" % (i + 1))["wait"]

            def delivered():
                for e in read_events(events)[ev_before:]:
                    if e["type"] == "delivered" and e.get("wait") == wid:
                        return e
                return None
            d = wait_for(delivered, STEP_TIMEOUT, "delivery of " + wid)
            t1 = time.monotonic()
            time.sleep(0.1)	# one more sample after delivery
            evs = read_events(events)[ev_before:]
            states = []
            for e in evs:
                if e["type"] == "transition":
                    states.append(e["to"])
                if e is d:
                    break
            win = sampler.between(t0, t1)
            before = sampler.between(t0 - 0.5, t0)
            after = sampler.between(t1, t1 + 0.3)
            rows.append({
                "wait": "w%d" % (i + 1), "wait_id": wid, "think_s": think, "tool": cmd, "tool_rc": rc, "tool_digest": digest,
                "tool_output": text, "tool_s": round(tool_s, 3),
                "states": states, "paused": "PAUSED" in states, "offloaded": "OFFLOADED" in states,
                "resident_before": before[-1][1] if before else (win[0][1] if win else None),
                "resident_during_min": min((s[1] for s in win), default=None),
                "resident_after": after[-1][1] if after else (win[-1][1] if win else None),
                "delivery_ms": d["latency_ns"] / 1e6,
                "response_ms": round(response_s * 1e3, 1),
            })
        rc, final_digest, _ = tool(FINAL_CHECK)
        t_end = time.monotonic()
        sampler.stop.set()
        sampler.join()
        vmj = api.call("GET", "/vms/" + vm)
        try:
            ctl.sendall(b"quit\n")
        except OSError:
            pass
        guest_rc = guest.wait(timeout=120)
        samples = [s for s in sampler.samples if t_start <= s[0] <= t_end]
        integ = 0.0
        for (a, b) in zip(samples, samples[1:]):
            integ += a[1] * (b[0] - a[0])
        return {
            "mode": mode, "rows": rows, "final_digest": final_digest, "final_rc": rc,
            "session_s": t_end - t_start, "memxtime_gib_s": integ / GIB,
            "samples": len(samples), "max_sample_gap_s": sampler.max_gap(),
            "counters": vmj.get("counters", {}), "guest_rc": guest_rc,
            "events": len(read_events(events)),
            "accel": accel_of(os.path.join(OUT, "guest-%s.out" % mode)),
            "pause_backend": pause["backend"],
            "events_seq_ok": [e["seq"] for e in read_events(events)] ==
                             list(range(1, len(read_events(events)) + 1)),
        }
    finally:
        if sampler:
            sampler.stop.set()
        if ctl:
            ctl.close()
        if guest and guest.poll() is None:
            guest.terminate()
            try:
                guest.wait(timeout=30)
            except subprocess.TimeoutExpired:
                guest.kill()
        for p in (gateway, model, vmnapd):
            p.terminate()
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        vmnapd_log.close()
        gateway_log.close()
        if cg:
            freezer_remove(cg)


def accel_of(path):
    """The accelerator run-guest.sh chose ("run-guest: NAME: tcg, ...")."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith("run-guest: ") and ", " in line:
                    return line.split(": ")[2].split(",")[0]
    except OSError:
        pass
    return "?"


def mib(b):
    return "-" if b is None else "%.0f" % (b / (1 << 20))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    work = tempfile.mkdtemp(prefix="vmnap-demo.", dir="/tmp")	# short socket paths
    res = {}
    for mode in ("baseline", "vmnap"):
        res[mode] = run_session(mode, work)
    base, nap = res["baseline"], res["vmnap"]

    print()
    print("vmnap demo: the same agent session, baseline (vmnap disabled) vs vmnap")
    print("resident = guest RAM held on the host (MiB); delivery = data ready -> guest RESUME_ACK")
    hdr = "%-4s %6s  %-38s %-6s %-8s %8s %8s %8s %9s  | %8s %9s" % (
        "wait", "think", "states passed (vmnap)", "paused", "offload", "before", "during",
        "after", "deliv ms", "base res", "base ms")
    print(hdr)
    print("-" * len(hdr))
    short = {"WAITING": "W", "HANDOFF": "H", "PAUSED": "P", "OFFLOADING": "Og",
             "OFFLOADED": "O", "RESUMING": "Rs", "RUNNING": "R"}
    for r, b in zip(nap["rows"], base["rows"]):
        st = ">".join(short.get(s, s) for s in r["states"])
        if len(st) > 38:
            st = st[:35] + "..."
        print("%-4s %5.2fs  %-38s %-6s %-8s %8s %8s %8s %9.2f  | %8s %9.2f" % (
            r["wait"], r["think_s"], st, "yes" if r["paused"] else "no",
            "yes" if r["offloaded"] else "no", mib(r["resident_before"]),
            mib(r["resident_during_min"]), mib(r["resident_after"]), r["delivery_ms"],
            mib(b["resident_during_min"]), b["delivery_ms"]))
    print("states: W waiting, H handoff, P paused, Og offloading, O offloaded, Rs resuming, R running")

    delivery = [r["delivery_ms"] for r in nap["rows"]]
    fill_ok = all(r["tool_output"] == str(FILL_MIB << 20) for r in nap["rows"] + base["rows"]
                  if r["tool"].startswith("wc -c"))
    functional_ok = (fill_ok and all(r["tool_rc"] == 0 for r in nap["rows"] + base["rows"]) and
                     [r["tool_digest"] for r in nap["rows"]] == [r["tool_digest"] for r in base["rows"]] and
                     nap["final_digest"] == base["final_digest"] and
                     nap["final_rc"] == 0 and base["final_rc"] == 0)
    ratio = nap["memxtime_gib_s"] / base["memxtime_gib_s"] if base["memxtime_gib_s"] else None
    summary = {
        "waits": len(nap["rows"]),
        "paused": sum(r["paused"] for r in nap["rows"]),
        "offloaded": sum(r["offloaded"] for r in nap["rows"]),
        "memxtime_vmnap_gib_s": round(nap["memxtime_gib_s"], 4),
        "memxtime_baseline_gib_s": round(base["memxtime_gib_s"], 4),
        "memxtime_ratio": round(ratio, 4) if ratio is not None else None,
        "delivery_p50_ms": round(percentile(delivery, 50), 3),
        "delivery_max_ms": round(max(delivery), 3),
        "functional_ok": functional_ok,
        "session_s": {"vmnap": round(nap["session_s"], 2), "baseline": round(base["session_s"], 2)},
        "max_sample_gap_s": round(max(nap["max_sample_gap_s"], base["max_sample_gap_s"]), 3),
        "events_seq_ok": nap["events_seq_ok"] and base["events_seq_ok"],
        "guest": {"kernel": "Debian " + (nap["rows"][0]["tool_output"] if nap["rows"] else "?"),
                  "mem_mib": GUEST_MIB, "page_cache_fill_mib": FILL_MIB,
                  "accelerator": nap.get("accel", "?"),
                  "pause_backend": nap.get("pause_backend", "?")},
        "definitions": {
            "resident": "guest RAM resident on the host: the memfd's allocated blocks (pager)",
            "memxtime": "integral of resident bytes over the session (tool commands and waits), "
                        "sampled every %.0f ms through the API" % (SAMPLE_SEC * 1e3),
            "delivery": "data ready (the first byte of the model's answer reached "
                        "vmnap-gateway) -> the guest's RESUME_ACK (devices unquiesced, "
                        "running); 0 when the VM was not paused",
            "waits": "raised by vmnap-gateway from the agent's model requests; "
                     "the demo makes no wait API call",
        },
        "per_wait": {"vmnap": nap["rows"], "baseline": base["rows"]},
        "counters": nap["counters"],
    }
    with open(os.path.join(OUT, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    print()
    print("totals: %d waits, %d paused, %d offloaded; memory x time %.3f GiB*s with vmnap vs "
          "%.3f GiB*s baseline (ratio %s); delivery p50 %.2f ms, max %.2f ms; functional %s" % (
              summary["waits"], summary["paused"], summary["offloaded"],
              summary["memxtime_vmnap_gib_s"], summary["memxtime_baseline_gib_s"],
              summary["memxtime_ratio"], summary["delivery_p50_ms"], summary["delivery_max_ms"],
              "OK" if functional_ok else "FAILED"))
    print("summary: %s" % os.path.relpath(os.path.join(OUT, "summary.json"), ROOT))
    subprocess.call(["rm", "-rf", work])
    return 0 if functional_ok else 1


if __name__ == "__main__":
    sys.exit(main())
