# SPDX-License-Identifier: GPL-2.0-only
"""vmnapd for a cohort run: the daemon process, its control API, the figures
of its event log, and whether this tree can run the vmnap cohorts.
"""
import http.client
import json
import os
import socket
import subprocess
import time

from .common import BUILD, RESUME_PHASES, ROOT


class UnixHTTPConnection(http.client.HTTPConnection):
    """http.client over a unix socket (what curl --unix-socket does)."""

    def __init__(self, path, timeout):
        super().__init__("vmnap", timeout=timeout)
        self.unix_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.unix_path)


class VmnapApi:
    """vmnapd's control API (HTTP/1.1 + JSON on <run_dir>/api.sock; routes in
    host-pager/src/api/api.h).  In-process HTTP rather than a curl per call: the
    "ready" call is inside the measured delivery latency."""

    TIMEOUT_S = 10

    def __init__(self, sock):
        self.sock = sock

    def call(self, method, path, body=None):
        conn = UnixHTTPConnection(self.sock, self.TIMEOUT_S)
        try:
            data = None if body is None else json.dumps(body)
            headers = {} if body is None else {"Content-Type": "application/json"}
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            text = resp.read().decode(errors="replace")
        finally:
            conn.close()
        if resp.status >= 300:
            raise RuntimeError(f"API {method} {path}: {resp.status} {text.strip()}")
        return json.loads(text) if text.strip() else {}

    def register(self, name, qmp, link_socket, policy, freezer=None, restore=None):
        """Managed VM, paused by freezing its cgroup (the guest clock keeps
        running), or over QMP when it has none (the guest clock stops: its
        monotonic timers run late by the time paused, accepted here so the
        run can go on), with the cohort's coordinator @policy and restore
        policy (None: vmnapd's default)."""
        pause = ({"backend": "freezer", "path": freezer} if freezer else
                 {"backend": "qmp", "path": qmp, "allow_clock_stop": True})
        body = {"pause": pause, "link_socket": link_socket, "managed": True,
                "policy": policy}
        if restore:
            body["restore"] = restore
        return self.call("PUT", f"/vms/{name}", body)

    def register_unmanaged(self, name):
        """A coordinator that never pauses: waits are taken and answered
        RUNNING at once (what vmnap-gateway sees for a VM it does not manage)."""
        return self.call("PUT", f"/vms/{name}", {"managed": False})

    def wait_start(self, vm, wait_id):
        return self.call("POST", f"/vms/{vm}/waits",
                         {"id": wait_id, "kind": "model", "confirm": True})

    def wait_ready(self, vm, wait_id):
        return self.call("POST", f"/vms/{vm}/waits/{wait_id}/ready")

    def wait_delivered(self, vm, wait_id):
        return self.call("POST", f"/vms/{vm}/waits/{wait_id}/delivered")

    def vm(self, vm):
        return self.call("GET", f"/vms/{vm}")

    def host(self):
        """GET /host: per-VM resident, reclaimable and expected-to-return
        memory and the admission headroom."""
        return self.call("GET", "/host")

    def delete(self, vm):
        return self.call("DELETE", f"/vms/{vm}")


def vmnapd_event_figures(path):
    """Per-run figures from vmnapd's event log: pauses, offloads, bytes
    offloaded (resident at PAUSED minus at OFFLOADED), vmnapd's own
    delivery latencies, offload decisions by reason, every resume's
    phases (ms) and faults, by phase, and the faults served while the VM
    ran a command (RUNNING: no wait outstanding) - count, service time and
    its store-read part (s) - from the pager's cumulative counters that
    transitions into a resting state carry - and where each wait's data
    found its VM ("data_found", by (vm, wait id)): "offloaded" (OFFLOADING,
    OFFLOADED, or resuming from them), "paused" (PAUSED, or resuming from
    it) or "running" (any other state: the guest takes the data in); and
    for each VM the ms from its registration to its guest link's first
    "up" ("link_up_ms": what the module's reconnect made the VM wait)."""
    out = {"pauses": 0, "offloads": 0, "offloaded_bytes": 0, "delivered_ms": [],
           "decisions": {}, "resumes": 0, "resumes_lazy": 0, "resumes_probe": 0,
           "resume_ms": {p: [] for p in RESUME_PHASES}, "resume_faults": [],
           "data_delivery_faults": [], "data_delivery_fault_ms": [],
           "command_faults": 0, "command_fault_s": 0.0, "command_fault_read_s": 0.0,
           "command_faults_sequential": 0, "data_found": {}, "link_up_ms": []}
    # the parts of their service time, and one kind's (absent from an older
    # vmnapd's events: then None)
    parts = ("fault_lock_ns", "fault_in_flight_ns", "fault_sequential_ns")
    for k in parts:
        out[f"command_{k[:-3]}_s"] = None
    paused_resident = {}
    registered = {}     # vm -> when it registered, until its link is up
    state, resuming_from = {}, {}   # vm -> its state; the one it resumes from
    last_counted = {}   # vm -> (state, faults, fault_ns, fault_read_ns, sequential, parts)
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for ln in f:
            try:
                ev = json.loads(ln)
            except ValueError:
                continue
            vm = ev.get("vm")
            if ev.get("type") == "vm_register" and isinstance(ev.get("t_ns"), int):
                registered[vm] = ev["t_ns"]
            elif ev.get("type") == "link" and ev.get("state") == "up" and vm in registered \
                    and isinstance(ev.get("t_ns"), int):
                out["link_up_ms"].append((ev["t_ns"] - registered.pop(vm)) / 1e6)
            elif ev.get("type") == "transition":
                if ev.get("to") == "RESUMING":
                    resuming_from[vm] = ev.get("from")
                state[vm] = ev.get("to")
                counters = tuple(ev.get(k) for k in ("faults", "fault_ns", "fault_read_ns"))
                if all(isinstance(c, int) for c in counters):
                    seq = ev.get("faults_sequential")
                    seq = seq if isinstance(seq, int) else 0
                    extra = tuple(ev.get(k) for k in parts)
                    prev = last_counted.get(vm)
                    if prev and prev[0] == "RUNNING":
                        out["command_faults"] += counters[0] - prev[1]
                        out["command_fault_s"] += (counters[1] - prev[2]) / 1e9
                        out["command_fault_read_s"] += (counters[2] - prev[3]) / 1e9
                        out["command_faults_sequential"] += seq - prev[4]
                        for k, now, before in zip(parts, extra, prev[5]):
                            if isinstance(now, int) and isinstance(before, int):
                                key = f"command_{k[:-3]}_s"
                                out[key] = (out[key] or 0.0) + (now - before) / 1e9
                    last_counted[vm] = (ev.get("to"),) + counters + (seq, extra)
                if ev.get("to") == "PAUSED":
                    out["pauses"] += 1
                    paused_resident[vm] = ev.get("resident_bytes")
                elif ev.get("to") == "OFFLOADED":
                    out["offloads"] += 1
                    before, after = paused_resident.get(vm), ev.get("resident_bytes")
                    if isinstance(before, int) and isinstance(after, int) and before > after:
                        out["offloaded_bytes"] += before - after
            elif ev.get("type") == "delivered" and isinstance(ev.get("latency_ns"), int):
                out["delivered_ms"].append(ev["latency_ns"] / 1e6)
                # a delivery by a data resume: the faults from its request
                # (data taken in running counts from its arrival: left out)
                if isinstance(ev.get("resume_faults"), int) and \
                        isinstance(ev.get("resume_fault_ns"), int) and \
                        ev.get("faults_from", "resume") == "resume":
                    out["data_delivery_faults"].append(ev["resume_faults"])
                    out["data_delivery_fault_ms"].append(ev["resume_fault_ns"] / 1e6)
            elif ev.get("type") == "wait_ready" and isinstance(ev.get("wait"), str):
                st = state.get(vm)
                if st == "RESUMING":
                    st = resuming_from.get(vm)
                out["data_found"][(vm, ev["wait"])] = (
                    "offloaded" if st in ("OFFLOADING", "OFFLOADED") else
                    "paused" if st == "PAUSED" else "running")
            elif ev.get("type") == "offload_decision":
                key = ("offload" if ev.get("offload") else "no") + ":" + str(ev.get("reason"))
                out["decisions"][key] = out["decisions"].get(key, 0) + 1
            elif ev.get("type") == "resume":
                out["resumes"] += 1
                out["resumes_lazy"] += ev.get("restore") == "lazy"
                out["resumes_probe"] += ev.get("probe") is True
                for p in RESUME_PHASES:
                    if isinstance(ev.get(f"{p}_ns"), int):
                        out["resume_ms"][p].append(ev[f"{p}_ns"] / 1e6)
                if isinstance(ev.get("faults"), int):
                    out["resume_faults"].append(ev["faults"])
    return out


class Vmnapd:
    """One vmnapd for one cohort run: the VMs' vsock bridge (--vsock) and,
    for the vmnap cohorts, the pager and coordinator behind the API."""

    def __init__(self, exe, run_dir, store_dir, log_dir, vsock_specs, extra_args=(),
                 cgroup_procs=(), env=None):
        os.makedirs(run_dir, exist_ok=True)
        os.makedirs(store_dir, mode=0o700, exist_ok=True)
        self.run_dir = run_dir
        self.events_path = os.path.join(log_dir, "vmnapd-events.jsonl")
        self.log = open(os.path.join(log_dir, "vmnapd.log"), "w")
        cmd = [exe, "-r", run_dir, "-s", store_dir,
               "-e", self.events_path]
        for spec in vsock_specs:
            cmd += ["--vsock", spec]
        cmd += list(extra_args)

        def enter_cgroups():  # e.g. the memory budget it shares with its VMs
            for pf in cgroup_procs:
                with open(pf, "w") as f:
                    f.write(str(os.getpid()))
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True,
                                     env=dict(os.environ, **env) if env else None,
                                     preexec_fn=enter_cgroups if cgroup_procs else None)
        self.api = VmnapApi(os.path.join(run_dir, "api.sock"))

    def wait_for(self, paths, timeout_s=20):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"vmnapd exited {self.proc.returncode} (see {self.log.name})")
            if all(os.path.exists(p) for p in paths):
                return
            time.sleep(0.05)
        raise RuntimeError(f"vmnapd did not create {paths} (see {self.log.name})")

    def pid(self):
        return self.proc.pid

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


def vmnapd_bridges():
    """True when the built vmnapd offers the vsock bridge (--vsock)."""
    exe = os.path.join(ROOT, BUILD, "vmnapd")
    if not os.access(exe, os.X_OK):
        return False
    p = subprocess.run([exe, "--help"], capture_output=True, text=True)
    return "--vsock" in p.stdout + p.stderr


def vmnap_missing():
    """Why the vmnap cohorts cannot run here, or None."""
    need = [("control API", "host-pager/src/api/api.c"),
            ("preload shim", "host-pager/preload")]
    missing = [f"{what} ({path})" for what, path in need
               if not os.path.exists(os.path.join(ROOT, path))]
    if not vmnapd_bridges():
        missing.append(f"vsock bridge ({BUILD}/vmnapd --vsock)")
    return ", ".join(missing) + " not in this tree yet" if missing else None
