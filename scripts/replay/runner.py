#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""replay.py - the vmnap trajectory replay benchmark (DESIGN §9, issue 7).

Replays a recorded agent trajectory (tests/data/*.jsonl: fixed model waits,
tool commands, expected exit codes and output digests) in real QEMU guests
and measures what each wait costs in memory, cohort by cohort:

  baseline  the VM stays as it is while the agent waits
  pause     vmnapd pauses the VM during waits (offload disabled)
  offload   vmnapd pauses and offloads guest RAM to its store
  swap      kernel swap, the peer a user would pick: at each wait start the
            VM cgroup's memory is reclaimed to a swap file on the same
            filesystem (memory.reclaim, v1 memory.force_empty, or
            process_madvise(MADV_PAGEOUT)); the guest faults it back

Cohort runs are interleaved and repeated; every run boots N VMs (each in its
own cgroup with a CPU quota), releases them together, and replays the
trajectory in each.  Commands reach the in-guest exec agent
(tests/replay/exec_agent.c) over vsock: a host-initiated "CONNECT <port>\\n"
on the VM's vsock unix socket (vmnapd's vhost-user-vsock bridge).  Without
the bridge, the agent is reached over the launcher's control line
(--transport tty), which serves baseline and swap.

Subcommands:
  run     replay cohorts; outputs under OUT/<run-id>/ and OUT/latest
  record  run a trajectory once in a baseline guest and write its expected
          exit codes and digests (how tests/data/*.jsonl got them)
  probe   print what this host offers (cgroups, swap, vmnapd API, bridge)
  table   print a run's cohorts as a Markdown table (README figures)

Exit status of run: 0 when every functional check passed, 1 when one
failed, 77 when nothing could run here (reason on the last line).
"""
import argparse
import ctypes
import hashlib
import http.client
import json
import os
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import tempfile
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("BUILD", "build")
VMNAP_CACHE = os.environ.get("VMNAP_CACHE", "/var/cache/vmnap")

TRAJECTORY_FORMAT = "vmnap-trajectory"
TRAJECTORY_VERSION = 1
COHORTS = ("baseline", "pause", "offload", "swap")
VMNAP_COHORTS = ("pause", "offload")

AGENT_PORT = 1234
REQ_MAGIC, ACK_MAGIC, RSP_MAGIC = b"VXRQ", b"VXAK", b"VXRS"
RSP_HEADER_MAX = 64 * 1024
STEP_TIMEOUT_MS = 120000
SHELL_ARGV = ["/bin/bash", "-o", "pipefail", "-c"]
WORKSPACE = "/srv/project"
FINAL_DIFF_CMD = "git diff HEAD"  # staged and unstaged changes
READY_LINE = "VMNAP-REPLAY-READY"
GUEST_INIT_CMD = "/usr/local/sbin/vmnap-replay-init"
GUEST_STOP_ARGV = [GUEST_INIT_CMD, "stop"]
VMNAP_LINK_PORT = 5151          # the guest link's vsock port (uapi/vmnap.h)
GUEST_CID = 3                   # scripts/run-guest.sh gives every guest CID 3

GIB = 1024 ** 3
MIB = 1024 ** 2
PAGE = os.sysconf("SC_PAGE_SIZE")
NS = 1_000_000_000
CG_NAME = "vmnap-replay"
CPU_PERIOD_US = 100000
SAMPLE_GAP_LIMIT_FACTOR = 2.0	# max gap allowed: this × interval
BOOT_TIMEOUT_S = 300
AGENT_PING_TIMEOUT_S = 30
GUEST_STOP_TIMEOUT_S = 30
SAMPLER_RT_PRIO = 10
SWAPFILE_MARGIN_MIB = 256
MADV_PAGEOUT = 21
SYS_PIDFD_OPEN = 434
SYS_PROCESS_MADVISE = 440
SYS_CACHESTAT = 451


def log(msg):
    print(f"replay: {msg}", file=sys.stderr, flush=True)


def now_ns():
    return time.monotonic_ns()


def sha256_hex(data):
    return hashlib.sha256(data).hexdigest()


# --------------------------------------------------------------------------
# Trajectory files
# --------------------------------------------------------------------------

class TrajectoryError(Exception):
    pass


def load_trajectory(path, need_expectations=True):
    """Header dict and list of step dicts, checked field by field."""
    with open(path) as f:
        lines = [ln for ln in f if ln.strip()]
    if not lines:
        raise TrajectoryError(f"{path}: empty")
    header = json.loads(lines[0])
    if header.get("format") != TRAJECTORY_FORMAT or header.get("version") != TRAJECTORY_VERSION:
        raise TrajectoryError(f"{path}: not a {TRAJECTORY_FORMAT} v{TRAJECTORY_VERSION} file")
    steps = []
    for i, ln in enumerate(lines[1:], 1):
        st = json.loads(ln)
        if st.get("step") != i:
            raise TrajectoryError(f"{path}: step {i} numbered {st.get('step')}")
        if not isinstance(st.get("wait_ms"), (int, float)) or st["wait_ms"] < 0:
            raise TrajectoryError(f"{path}: step {i}: bad wait_ms")
        if not isinstance(st.get("cmd"), str) or not st["cmd"]:
            raise TrajectoryError(f"{path}: step {i}: bad cmd")
        if need_expectations and ("exit_code" not in st or "stdout_sha256" not in st):
            raise TrajectoryError(f"{path}: step {i} has no recorded expectation; run 'replay.py record'")
        steps.append(st)
    if need_expectations and "final_diff_sha256" not in header:
        raise TrajectoryError(f"{path}: no final_diff_sha256; run 'replay.py record'")
    return header, steps


# --------------------------------------------------------------------------
# Exec agent client (wire format: tests/replay/exec_agent.c)
# --------------------------------------------------------------------------

class AgentError(Exception):
    pass


def _recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise AgentError("agent closed the stream")
        buf += chunk
    return bytes(buf)


def agent_request(sock, argv, cwd=WORKSPACE, timeout_ms=STEP_TIMEOUT_MS, on_ack=None):
    """Send one request on a connected stream; return (result, t_ack_ns).

    result: the agent's JSON header plus "stdout"/"stderr" bytes.  on_ack()
    is called as soon as the agent acknowledged the request (the guest has
    the data), before the command has run."""
    body = json.dumps({"argv": argv, "cwd": cwd, "timeout_ms": timeout_ms}).encode()
    sock.sendall(REQ_MAGIC + struct.pack(">I", len(body)) + body)
    magic = _recv_exact(sock, 4)
    t_ack = None
    if magic == ACK_MAGIC:
        t_ack = now_ns()
        if on_ack:
            on_ack()
        magic = _recv_exact(sock, 4)
    if magic != RSP_MAGIC:
        raise AgentError(f"bad response magic {magic!r}")
    (hlen,) = struct.unpack(">I", _recv_exact(sock, 4))
    if hlen == 0 or hlen > RSP_HEADER_MAX:
        raise AgentError(f"response header length {hlen} out of range")
    hdr = json.loads(_recv_exact(sock, hlen))
    if not isinstance(hdr, dict):
        raise AgentError("response header is not an object")
    if not hdr.get("ok"):
        raise AgentError(f"agent refused: {hdr.get('error')}")
    for k in ("stdout_len", "stderr_len", "exit_code", "stdout_sha256"):
        if k not in hdr:
            raise AgentError(f"response lacks {k}")
    for k in ("stdout_len", "stderr_len"):
        if not isinstance(hdr[k], int) or not 0 <= hdr[k] <= 16 * MIB:
            raise AgentError(f"response {k} out of range")
    hdr["stdout"] = _recv_exact(sock, hdr["stdout_len"])
    hdr["stderr"] = _recv_exact(sock, hdr["stderr_len"])
    return hdr, t_ack


class VsockChannel:
    """A VM's vsock unix socket: one host-initiated connection per command."""

    def __init__(self, uds, port=AGENT_PORT):
        self.uds, self.port = uds, port

    def exec(self, argv, timeout_ms=STEP_TIMEOUT_MS, on_ack=None):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout_ms / 1000 + 30)
        try:
            s.connect(self.uds)
            s.sendall(f"CONNECT {self.port}\n".encode())
            line = b""
            while not line.endswith(b"\n"):
                c = s.recv(1)
                if not c or len(line) > 64:
                    raise AgentError(f"vsock bridge: no OK for port {self.port}: {line!r}")
                line += c
            if not line.startswith(b"OK "):
                raise AgentError(f"vsock bridge refused port {self.port}: {line!r}")
            return agent_request(s, argv, timeout_ms=timeout_ms, on_ack=on_ack)
        finally:
            s.close()

    def close(self):
        pass


class TtyChannel:
    """The launcher's control line (/dev/ttyS1 <-> unix socket): frames in turn."""

    def __init__(self, uds):
        self.uds = uds
        self.sock = None

    def exec(self, argv, timeout_ms=STEP_TIMEOUT_MS, on_ack=None):
        if self.sock is None:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.connect(self.uds)
        self.sock.settimeout(timeout_ms / 1000 + 30)
        try:
            return agent_request(self.sock, argv, timeout_ms=timeout_ms, on_ack=on_ack)
        except (OSError, AgentError):
            self.close()  # the stream is out of step: start over next time
            raise

    def close(self):
        if self.sock:
            self.sock.close()
            self.sock = None


# --------------------------------------------------------------------------
# Host facilities: cgroups, swap, vmnapd
# --------------------------------------------------------------------------

class Cgroups:
    """Per-VM memory + CPU cgroups: v2 where its controllers are enabled,
    else the v1 memory and cpu hierarchies (what this machine has)."""

    def __init__(self):
        self.v2 = None
        self.mem = self.cpu = None
        for root in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
            try:
                ctrls = open(os.path.join(root, "cgroup.controllers")).read().split()
            except OSError:
                continue
            if "memory" in ctrls and "cpu" in ctrls:
                self.v2 = root
                break
        if not self.v2:
            for c in ("memory", "cpu"):
                d = f"/sys/fs/cgroup/{c}"
                if os.path.exists(os.path.join(d, "tasks")):
                    setattr(self, "mem" if c == "memory" else "cpu", d)

    def usable(self):
        return bool(self.v2 or (self.mem and self.cpu))

    def describe(self):
        if self.v2:
            return f"cgroup v2 at {self.v2} (memory.current, memory.reclaim, cpu.max)"
        if self.mem and self.cpu:
            return ("cgroup v1 memory+cpu (memory.usage_in_bytes, memory.force_empty, "
                    "cpu.cfs_quota_us); v2 has no memory/cpu controller here")
        return "no usable memory+cpu cgroup"

    def create(self, rel, cpu_quota):
        """Make the cgroup(s) for one VM; return a dict of its directories."""
        dirs = {}
        if self.v2:
            parent = os.path.join(self.v2, CG_NAME)
            os.makedirs(parent, exist_ok=True)
            try:
                with open(os.path.join(self.v2, "cgroup.subtree_control"), "w") as f:
                    f.write("+memory +cpu")
                with open(os.path.join(parent, "cgroup.subtree_control"), "w") as f:
                    f.write("+memory +cpu")
            except OSError:
                pass
            d = os.path.join(parent, rel)
            os.makedirs(d, exist_ok=True)
            if cpu_quota:
                with open(os.path.join(d, "cpu.max"), "w") as f:
                    f.write(f"{int(cpu_quota * CPU_PERIOD_US)} {CPU_PERIOD_US}")
            dirs = {"mem": d, "cpu": d}
        else:
            for key, base in (("mem", self.mem), ("cpu", self.cpu)):
                d = os.path.join(base, CG_NAME, rel)
                os.makedirs(d, exist_ok=True)
                dirs[key] = d
            if cpu_quota:
                with open(os.path.join(dirs["cpu"], "cpu.cfs_period_us"), "w") as f:
                    f.write(str(CPU_PERIOD_US))
                with open(os.path.join(dirs["cpu"], "cpu.cfs_quota_us"), "w") as f:
                    f.write(str(int(cpu_quota * CPU_PERIOD_US)))
        return dirs

    def procs_files(self, dirs):
        return sorted({os.path.join(d, "cgroup.procs") for d in dirs.values()})

    def memory_bytes(self, dirs):
        name = "memory.current" if self.v2 else "memory.usage_in_bytes"
        try:
            return int(open(os.path.join(dirs["mem"], name)).read())
        except (OSError, ValueError):
            return -1

    def memory_stat(self, dirs):
        st = {}
        try:
            for ln in open(os.path.join(dirs["mem"], "memory.stat")):
                k, v = ln.split()
                st[k] = int(v)
        except (OSError, ValueError):
            pass
        return st

    def reclaim(self, dirs, nbytes):
        """Push the cgroup's memory out (to swap).  Returns the method used."""
        if self.v2:
            try:
                with open(os.path.join(dirs["mem"], "memory.reclaim"), "w") as f:
                    f.write(str(nbytes))
            except OSError as e:
                if e.errno != 11:  # EAGAIN: reclaimed less than asked
                    raise
            return "memory.reclaim"
        with open(os.path.join(dirs["mem"], "memory.force_empty"), "w") as f:
            f.write("0")
        return "memory.force_empty"

    def remove_run(self, run_id):
        """Remove a run's parent cgroup(s) once its VMs' are gone."""
        for base in {self.v2, self.mem, self.cpu} - {None}:
            try:
                os.rmdir(os.path.join(base, CG_NAME, run_id))
            except OSError:
                pass

    def remove(self, dirs):
        for d in sorted(set(dirs.values()), key=len, reverse=True):
            for _ in range(50):
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.1)


def process_pageout(pid, addr, length):
    """MADV_PAGEOUT a range of another process (the guest RAM mapping)."""
    libc = ctypes.CDLL(None, use_errno=True)
    pidfd = libc.syscall(SYS_PIDFD_OPEN, pid, 0)
    if pidfd < 0:
        raise OSError(ctypes.get_errno(), "pidfd_open")

    class Iovec(ctypes.Structure):
        _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
    try:
        iov = Iovec(addr, length)
        r = libc.syscall(SYS_PROCESS_MADVISE, pidfd, ctypes.byref(iov), 1, MADV_PAGEOUT, 0)
        if r < 0:
            raise OSError(ctypes.get_errno(), "process_madvise")
        return r
    finally:
        os.close(pidfd)


class SwapFile:
    """A swap file on the same filesystem as vmnapd's store, on only while a
    swap cohort run is going (the host's other work is not swapped)."""

    def __init__(self, path, size_mib):
        self.path, self.size_mib, self.active = path, size_mib, False

    def on(self):
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        if not os.path.exists(self.path) or os.path.getsize(self.path) != self.size_mib * MIB:
            with open(self.path, "wb") as f:
                os.posix_fallocate(f.fileno(), 0, self.size_mib * MIB)
            os.chmod(self.path, 0o600)
            subprocess.run(["mkswap", self.path], check=True, capture_output=True)
        subprocess.run(["swapon", self.path], check=True, capture_output=True)
        self.active = True

    def off(self):
        if self.active:
            subprocess.run(["swapoff", self.path], capture_output=True)
            self.active = False

    def remove(self):
        self.off()
        try:
            os.unlink(self.path)
        except OSError:
            pass


def vmstat():
    out = {}
    for ln in open("/proc/vmstat"):
        k, v = ln.split()
        out[k] = int(v)
    return out


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
    host-pager/src/api.h).  In-process HTTP rather than a curl per call: the
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

    def register(self, name, qmp, link_socket, offload):
        """Managed VM, paused over QMP; model waits may offload or not."""
        return self.call("PUT", f"/vms/{name}", {
            "pause": {"backend": "qmp", "path": qmp},
            "link_socket": link_socket,
            "managed": True,
            "policy": {"kinds": {"model": {"pause": True, "offload": offload}}}})

    def wait_start(self, vm, wait_id):
        return self.call("POST", f"/vms/{vm}/waits",
                         {"id": wait_id, "kind": "model", "confirm": True})

    def wait_ready(self, vm, wait_id):
        return self.call("POST", f"/vms/{vm}/waits/{wait_id}/ready")

    def wait_delivered(self, vm, wait_id):
        return self.call("POST", f"/vms/{vm}/waits/{wait_id}/delivered")

    def vm(self, vm):
        return self.call("GET", f"/vms/{vm}")


def vmnapd_event_figures(path):
    """Per-run figures from vmnapd's event log: pauses, offloads, bytes
    offloaded (resident at PAUSED minus at OFFLOADED) and vmnapd's own
    delivery latencies."""
    out = {"pauses": 0, "offloads": 0, "offloaded_bytes": 0, "delivered_ms": []}
    paused_resident = {}
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for ln in f:
            try:
                ev = json.loads(ln)
            except ValueError:
                continue
            vm = ev.get("vm")
            if ev.get("type") == "transition":
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
    return out


class Vmnapd:
    """One vmnapd for one cohort run: the VMs' vsock bridge (--vsock) and,
    for the vmnap cohorts, the pager and coordinator behind the API."""

    def __init__(self, exe, run_dir, store_dir, log_dir, vsock_specs):
        os.makedirs(run_dir, exist_ok=True)
        os.makedirs(store_dir, mode=0o700, exist_ok=True)
        self.run_dir = run_dir
        self.events_path = os.path.join(log_dir, "vmnapd-events.jsonl")
        self.log = open(os.path.join(log_dir, "vmnapd.log"), "w")
        cmd = [exe, "-r", run_dir, "-s", store_dir,
               "-e", self.events_path]
        for spec in vsock_specs:
            cmd += ["--vsock", spec]
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
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
    need = [("control API", "host-pager/src/api.c"),
            ("preload shim", "host-pager/preload")]
    missing = [f"{what} ({path})" for what, path in need
               if not os.path.exists(os.path.join(ROOT, path))]
    if not vmnapd_bridges():
        missing.append(f"vsock bridge ({BUILD}/vmnapd --vsock)")
    return ", ".join(missing) + " not in this tree yet" if missing else None


# --------------------------------------------------------------------------
# Guests
# --------------------------------------------------------------------------

def find_qemu(marker, timeout_s=60):
    """PID of the qemu-system process whose command line holds marker."""
    deadline = time.monotonic() + timeout_s
    while True:
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                cmd = open(f"/proc/{d}/cmdline", "rb").read().split(b"\0")
            except OSError:
                continue
            if cmd and b"qemu-system" in os.path.basename(cmd[0]) and \
                    any(marker.encode() in a for a in cmd):
                return int(d)
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.2)


def find_guest_ram(pid):
    """(fd path, mapping start, mapping length) of the guest RAM memfd."""
    fdpath = None
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("/memfd:"):
            cand = f"/proc/{pid}/fd/{fd}"
            if fdpath is None or os.stat(cand).st_size > os.stat(fdpath).st_size:
                fdpath = cand
    start = length = None
    for ln in open(f"/proc/{pid}/maps"):
        parts = ln.split()
        if len(parts) >= 6 and parts[5].startswith("/memfd:"):
            a, b = (int(x, 16) for x in parts[0].split("-"))
            if length is None or b - a > length:
                start, length = a, b - a
    return fdpath, start, length


class Guest:
    """One QEMU guest booted from the replay rootfs image."""

    def __init__(self, bench, name, cohort, workdir, sockdir, cg_dirs):
        self.bench, self.name, self.cohort = bench, name, cohort
        self.workdir = workdir
        self.cg_dirs = cg_dirs
        self.log = os.path.join(workdir, "console.log")
        # unix socket paths are short (108 bytes): they live in sockdir
        os.makedirs(sockdir, exist_ok=True)
        self.qmp = os.path.join(sockdir, "qmp")
        self.ctl = os.path.join(sockdir, "ctl")
        self.vhost_user = os.path.join(sockdir, "vu")   # QEMU <-> vmnapd
        self.vsock = os.path.join(sockdir, "vsock")     # hybrid vsock (CONNECT)
        self.proc = None
        self.qemu_pid = None
        self.memfd = None
        self.ram_map = None
        self.ram_gauge = None
        self.channel = None
        self.vmnapd_run_dir = None

    def start(self):
        a = self.bench.args
        cmd = [os.path.join(ROOT, "scripts/run-guest.sh"), "--name", self.name,
               "--mem", str(a.mem), "--cpus", "1", "--timeout", str(a.guest_timeout),
               "--log", self.log, "--qmp", self.qmp,
               "--rootfs", self.bench.rootfs,  # the launcher snapshots it: writes are per guest
               "--initrd", self.bench.initrd,
               # TCG on a busy host can miss the kernel's IO-APIC timer check
               # ("IO-APIC + timer doesn't work" panic): skip that check.
               "--append", "no_timer_check"]
        if a.transport == "tty":
            cmd += ["--ctl", self.ctl]
        else:
            # The device as QEMU 7.2 takes it (the CID comes from the backend's
            # config space); spelled out so as not to depend on the launcher's.
            cmd += ["--qemu-arg", "-chardev",
                    "--qemu-arg", f"socket,id=replayvsock,path={self.vhost_user}",
                    "--qemu-arg", "-device",
                    "--qemu-arg", "vhost-user-vsock-pci,chardev=replayvsock"]
        guest_cmd = GUEST_INIT_CMD
        if self.cohort in VMNAP_COHORTS:
            cmd += ["--env", f"LD_PRELOAD={self.bench.preload}",
                    "--env", f"VMNAP_VM={self.name}",
                    "--env", f"VMNAP_SOCKET={os.path.join(self.vmnapd_run_dir, 'mem.sock')}"]
            guest_cmd = f"VMNAP_LOAD_MODULE=1 {GUEST_INIT_CMD}"  # the guest link
        cmd += ["--", guest_cmd]
        for stale in (self.log, self.qmp, self.ctl):  # a last run's READY line misleads
            if os.path.lexists(stale):
                os.unlink(stale)
        procs = self.bench.cgroups.procs_files(self.cg_dirs) if self.cg_dirs else []

        def enter_cgroups():
            os.setsid()
            for pf in procs:
                with open(pf, "w") as f:
                    f.write(str(os.getpid()))
        self.out = open(os.path.join(self.workdir, "run-guest.out"), "w")
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=self.out, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, preexec_fn=enter_cgroups)

    def wait_ready(self, timeout_s=BOOT_TIMEOUT_S):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.qemu_pid is None:
                self.qemu_pid = find_qemu(self.qmp, timeout_s=0.5)
            try:
                with open(self.log, errors="replace") as f:
                    if READY_LINE in f.read():
                        break
            except OSError:
                pass
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name}: launcher exited {self.proc.returncode} "
                                   f"before the agent was ready (see {self.log})")
            time.sleep(0.2)
        else:
            raise RuntimeError(f"{self.name}: agent not ready after {timeout_s}s (see {self.log})")
        if self.qemu_pid is None:
            self.qemu_pid = find_qemu(self.qmp)
        if self.qemu_pid is None:
            raise RuntimeError(f"{self.name}: QEMU process not found")
        self.memfd, start, length = find_guest_ram(self.qemu_pid)
        if self.memfd is None or start is None:
            raise RuntimeError(f"{self.name}: no guest RAM memfd in QEMU {self.qemu_pid}")
        self.ram_map = (start, length)
        self.ram_gauge = GuestRamGauge(self.memfd, self.qemu_pid, start)
        if self.bench.args.transport == "tty":
            self.channel = TtyChannel(self.ctl)
        else:
            self.channel = VsockChannel(self.vsock)
        # READY is printed as the agents start: they may not listen yet.
        deadline = time.monotonic() + AGENT_PING_TIMEOUT_S
        while True:
            try:
                res, _ = self.channel.exec(["/bin/true"], timeout_ms=5000)
                if res["exit_code"] == 0:
                    break
                err = f"exit {res['exit_code']}"
            except (OSError, AgentError) as e:
                err = str(e)
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name}: agent does not answer: {err}")
            time.sleep(0.5)

    def vsock_spec(self):
        return f"{self.name}:{self.vhost_user}:{GUEST_CID}:{self.vsock}"

    def exec_shell(self, cmd, on_ack=None):
        return self.channel.exec(SHELL_ARGV + [cmd], on_ack=on_ack)

    def stop(self):
        if self.proc is None:
            return
        try:
            if self.channel and self.proc.poll() is None:
                self.channel.exec(GUEST_STOP_ARGV, timeout_ms=5000)
        except (OSError, AgentError):
            pass
        if self.channel:
            self.channel.close()
        if self.ram_gauge:
            self.ram_gauge.close()
            self.ram_gauge = None
        try:
            self.proc.wait(timeout=GUEST_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            # The launcher's trap ends QEMU on SIGTERM; QEMU runs under
            # timeout(1) in a process group of its own, so end it by pid too.
            self.proc.terminate()
            try:
                self.proc.wait(timeout=GUEST_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        if self.qemu_pid and find_qemu(self.qmp, timeout_s=0) == self.qemu_pid:
            os.kill(self.qemu_pid, signal.SIGKILL)  # still ours: no pid reuse
        self.out.close()


# --------------------------------------------------------------------------
# Sampler
# --------------------------------------------------------------------------

class CacheStat(ctypes.Structure):
    _fields_ = [("nr_cache", ctypes.c_uint64), ("nr_dirty", ctypes.c_uint64),
                ("nr_writeback", ctypes.c_uint64), ("nr_evicted", ctypes.c_uint64),
                ("nr_recently_evicted", ctypes.c_uint64)]


class CacheStatRange(ctypes.Structure):
    _fields_ = [("off", ctypes.c_uint64), ("len", ctypes.c_uint64)]


class GuestRamGauge:
    """Resident bytes of a guest's RAM memfd.

    cachestat(2) counts the file's pages in memory (swapped-out and punched
    pages are not) without the VMM's mmap lock, so a VM under reclaim or
    faults cannot stall the sampler.  Where it is missing (kernel < 6.5) the
    allocated blocks (st_blocks) minus the mapping's swapped bytes are used."""

    _libc = ctypes.CDLL(None, use_errno=True)

    def __init__(self, fdpath, pid, map_start):
        self.pid, self.map_start = pid, map_start
        self.fd = os.open(fdpath, os.O_RDONLY | os.O_CLOEXEC)
        self.use_cachestat = self._cachestat() is not None

    def _cachestat(self):
        rng, cs = CacheStatRange(0, 0), CacheStat()
        r = self._libc.syscall(SYS_CACHESTAT, self.fd, ctypes.byref(rng), ctypes.byref(cs), 0)
        return None if r < 0 else cs.nr_cache * PAGE

    def read(self, count_swap=False):
        if self.use_cachestat:
            v = self._cachestat()
            return -1 if v is None else v
        try:
            v = os.fstat(self.fd).st_blocks * 512
        except OSError:
            return -1
        return v - shmem_swapped_bytes(self.pid, self.map_start) if count_swap else v

    def close(self):
        os.close(self.fd)


def shmem_swapped_bytes(pid, map_start):
    """Swapped-out bytes of the guest RAM mapping (smaps "Swap:" of a shmem
    mapping counts its file's swapped pages): st_blocks still counts those."""
    head = f"{map_start:x}-"
    try:
        with open(f"/proc/{pid}/smaps") as f:
            inside = False
            for ln in f:
                if ln[0] in "0123456789abcdef" and "-" in ln.split()[0]:
                    inside = ln.startswith(head)
                elif inside and ln.startswith("Swap:"):
                    return int(ln.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def pss_bytes(pid):
    try:
        for ln in open(f"/proc/{pid}/smaps_rollup"):
            if ln.startswith("Pss:"):
                return int(ln.split()[1]) * 1024
    except (OSError, TypeError):
        pass
    return -1


class PssReader(threading.Thread):
    """Reads a VMM's PSS in a loop of its own: smaps_rollup takes the VMM's
    mmap lock, which swap-in and reclaim hold for long stretches (850 ms
    seen), so it must not hold up the sampler's ticks.  The sampler records
    the latest value and how old it is."""

    def __init__(self, pid, interval_s):
        super().__init__(daemon=True)
        self.pid, self.interval = pid, interval_s
        self.value, self.t_ns = -1, None
        self.stop_evt = threading.Event()

    def run(self):
        while not self.stop_evt.is_set():
            v = pss_bytes(self.pid)
            self.value, self.t_ns = v, now_ns()
            self.stop_evt.wait(self.interval)

    def stop(self):
        self.stop_evt.set()
        self.join()


class Sampler(threading.Thread):
    """Fixed-interval sampling of every guest; each tick's gap is recorded.

    Per tick: guest-RAM resident bytes (cachestat, lock-free) and the VM
    cgroup's memory, read now; VMM PSS as last read by its PssReader, with
    its age kept (max_pss_age_ms)."""

    def __init__(self, bench, guests, interval_s, t0_ns, count_swap=False):
        super().__init__(daemon=True)
        self.count_swap = count_swap
        self.bench, self.guests, self.interval = bench, guests, interval_s
        self.t0 = t0_ns
        self.rows = []
        self.gaps_ms = []
        self.read_max_ms = {}  # slowest read of each metric
        self.pss_age_max_ms = 0.0
        self.pss = {g.name: PssReader(g.qemu_pid, interval_s) for g in guests}
        self.stop_evt = threading.Event()

    def run(self):
        # The host is shared (2 cores, TCG guests, reclaim): a real-time
        # priority keeps the ticks on time; it only ever runs briefly.
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(SAMPLER_RT_PRIO))
            self.priority = f"SCHED_FIFO {SAMPLER_RT_PRIO}"
        except OSError:
            self.priority = "normal"
        for r in self.pss.values():
            r.start()
        next_t = time.monotonic()
        last = None
        while not self.stop_evt.is_set():
            t = now_ns()
            gap = (t - last) / 1e6 if last is not None else 0.0
            if last is not None:
                self.gaps_ms.append(gap)
            last = t
            for g in self.guests:
                t1 = now_ns()
                ram = g.ram_gauge.read(self.count_swap)
                t2 = now_ns()
                cg = self.bench.cgroups.memory_bytes(g.cg_dirs) if g.cg_dirs else -1
                t3 = now_ns()
                for k, dt in (("guest_ram", t2 - t1), ("cgroup", t3 - t2)):
                    self.read_max_ms[k] = max(self.read_max_ms.get(k, 0), round(dt / 1e6, 3))
                reader = self.pss[g.name]
                pss = reader.value
                if reader.t_ns is not None and last is not None and gap:
                    self.pss_age_max_ms = max(self.pss_age_max_ms, (t - reader.t_ns) / 1e6)
                self.rows.append(((t - self.t0) / NS, g.name, ram, pss, cg, round(gap, 3)))
            next_t += self.interval
            delay = next_t - time.monotonic()
            if delay < 0:  # late: keep the grid, do not burst
                next_t = time.monotonic()
                delay = 0
            self.stop_evt.wait(delay)

    def stop(self):
        self.stop_evt.set()
        self.join()
        for r in self.pss.values():
            r.stop()


# --------------------------------------------------------------------------
# Events
# --------------------------------------------------------------------------

class EventLog:
    """events.jsonl: one JSON object a line, sequence-numbered."""

    def __init__(self, path):
        self.f = open(path, "w")
        self.seq = 0
        self.lock = threading.Lock()

    def emit(self, kind, **fields):
        with self.lock:
            self.seq += 1
            ev = {"seq": self.seq, "t_ns": now_ns(), "type": kind}
            ev.update(fields)
            self.f.write(json.dumps(ev, sort_keys=True) + "\n")
            self.f.flush()
            return ev

    def close(self):
        self.f.close()


def event_seq_gaps(path, key="seq"):
    last, lost = 0, 0
    with open(path) as f:
        for ln in f:
            s = json.loads(ln)[key]
            if s != last + 1:
                lost += max(0, s - last - 1)
            last = s
    return lost


# --------------------------------------------------------------------------
# One cohort run
# --------------------------------------------------------------------------

def percentile(vals, p):
    if not vals:
        return None
    s = sorted(vals)
    k = (len(s) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


class CohortRun:
    def __init__(self, bench, cohort, rep):
        self.bench, self.cohort, self.rep = bench, cohort, rep
        self.key = f"{cohort}-r{rep}"
        self.guests = []
        self.checks = []
        self.delivery_ms = []
        self.result = {"cohort": cohort, "rep": rep, "vms": bench.args.vms}
        self.reclaims = []
        self.reclaim_errors = 0
        self.swapped_out_bytes = 0
        self.vmnapd = None
        self.api = None
        self.vmnapd_lost = 0

    def check(self, name, passed, **detail):
        c = {"run": self.key, "name": name, "passed": bool(passed)}
        c.update(detail)
        self.checks.append(c)
        if not passed:
            log(f"{self.key}: FAILED check {name}: {detail}")
        return passed

    # -- per-wait behaviour of each cohort --------------------------------
    def wait_begin(self, g, step):
        ev = self.bench.events
        if self.cohort == "swap":
            if any(t.is_alive() and t.name == g.name for t in self.reclaims):
                ev.emit("swap_out_skipped", run=self.key, vm=g.name, step=step["step"],
                        why="previous reclaim still running")
            else:
                t = threading.Thread(target=self.swap_out, args=(g, step["step"]),
                                     name=g.name, daemon=True)
                t.start()
                self.reclaims.append(t)
        elif self.cohort in VMNAP_COHORTS:
            self.api.wait_start(g.name, f"s{step['step']}")
        ev.emit("wait_start", run=self.key, vm=g.name, step=step["step"])

    def wait_end(self, g, step):
        ev = self.bench.events.emit("data_ready", run=self.key, vm=g.name, step=step["step"])
        if self.cohort in VMNAP_COHORTS:
            self.api.wait_ready(g.name, f"s{step['step']}")
        return ev["t_ns"]

    def delivered(self, g, step):
        if self.cohort in VMNAP_COHORTS:
            self.api.wait_delivered(g.name, f"s{step['step']}")

    def swap_out(self, g, stepno):
        t0 = now_ns()
        cg = self.bench.cgroups
        ram0 = g.ram_gauge.read(count_swap=True)
        try:
            if cg.usable() and g.cg_dirs:
                method = cg.reclaim(g.cg_dirs, self.bench.args.mem * MIB * 2)
            else:
                process_pageout(g.qemu_pid, *g.ram_map)
                method = "process_madvise"
        except OSError as e:
            self.reclaim_errors += 1
            method = f"error: {e}"
        # Guest RAM pushed out by this reclaim: the drop of its resident
        # bytes, as vmnap's offloaded bytes (resident at PAUSED - at OFFLOADED).
        out = max(0, ram0 - g.ram_gauge.read(count_swap=True))
        self.swapped_out_bytes += out
        self.bench.events.emit("swap_out", run=self.key, vm=g.name, step=stepno,
                               method=method, dur_ms=round((now_ns() - t0) / 1e6, 3),
                               guest_ram_out_bytes=out)

    # -- the replay of one VM -------------------------------------------------
    def replay_vm(self, g, release_evt, out):
        steps = self.bench.steps
        release_evt.wait()
        ev = self.bench.events
        try:
            for st in steps:
                t_start = now_ns()
                self.wait_begin(g, st)
                target = t_start + int(st["wait_ms"] * 1e6)
                while True:
                    left = target - now_ns()
                    if left <= 0:
                        break
                    time.sleep(left / NS)
                t_ready = self.wait_end(g, st)
                res, t_ack = g.exec_shell(st["cmd"], on_ack=lambda: self.delivered(g, st))
                if t_ack is not None:
                    self.delivery_ms.append((t_ack - t_ready) / 1e6)
                ok_rc = res["exit_code"] == st["exit_code"]
                ok_dig = res["stdout_sha256"] == st["stdout_sha256"]
                self.check(f"{g.name}/step{st['step']}", ok_rc and ok_dig,
                           exit_code=res["exit_code"], expected_exit_code=st["exit_code"],
                           digest_ok=ok_dig)
                ev.emit("step_done", run=self.key, vm=g.name, step=st["step"],
                        exit_code=res["exit_code"], digest_ok=ok_dig,
                        delivery_ms=None if t_ack is None else round((t_ack - t_ready) / 1e6, 3),
                        exec_ms=round(res.get("duration_ns", 0) / 1e6, 3))
            res, _ = g.exec_shell(FINAL_DIFF_CMD)
            self.check(f"{g.name}/final-git-diff",
                       res["stdout_sha256"] == self.bench.header["final_diff_sha256"],
                       sha256=res["stdout_sha256"])
        except Exception as e:  # noqa: BLE001 - reported as a failed check
            self.check(f"{g.name}/replay", False, error=str(e))
        out[g.name] = now_ns()
        ev.emit("vm_complete", run=self.key, vm=g.name)

    def run(self):
        b, a = self.bench, self.bench.args
        workroot = os.path.join(b.outdir, "vms", self.key)
        os.makedirs(workroot, exist_ok=True)
        swap_before = vmstat()
        if self.cohort == "swap":
            b.swapfile.on()
        b.events.emit("run_start", run=self.key, cohort=self.cohort, rep=self.rep)
        try:
            for i in range(a.vms):
                name = f"r{os.getpid()}-{self.key}-vm{i}"
                wd = os.path.join(workroot, f"vm{i}")
                os.makedirs(wd, exist_ok=True)
                cg = (b.cgroups.create(f"{b.run_id}/{self.key}-vm{i}", a.cpu_quota)
                      if b.cgroups.usable() else None)
                self.guests.append(Guest(b, name, self.cohort, wd,
                                         os.path.join(b.sockdir, self.key, f"vm{i}"), cg))
            if a.transport == "vsock" or self.cohort in VMNAP_COHORTS:
                for g in self.guests:
                    g.vmnapd_run_dir = os.path.join(b.sockdir, self.key, "vmnapd")
                self.vmnapd = Vmnapd(b.vmnapd_exe, os.path.join(b.sockdir, self.key, "vmnapd"),
                                     os.path.join(a.store_dir, f"replay-{b.run_id}", self.key),
                                     workroot, [g.vsock_spec() for g in self.guests])
                self.vmnapd.wait_for([g.vhost_user for g in self.guests])
                self.api = self.vmnapd.api
            for g in self.guests:
                g.start()
            for g in self.guests:
                g.wait_ready()
                if self.cohort in VMNAP_COHORTS:
                    self.api.register(g.name, g.qmp, f"{g.vsock}_{VMNAP_LINK_PORT}",
                                      offload=self.cohort == "offload")
            t0 = now_ns()
            sampler = Sampler(b, self.guests, a.sample_ms / 1000, t0,
                              count_swap=self.cohort == "swap")
            stat0 = {g.name: b.cgroups.memory_stat(g.cg_dirs) if g.cg_dirs else {}
                     for g in self.guests}
            sampler.start()
            release = threading.Event()
            done = {}
            threads = [threading.Thread(target=self.replay_vm, args=(g, release, done))
                       for g in self.guests]
            for t in threads:
                t.start()
            t_release = b.events.emit("release", run=self.key, vms=len(self.guests))["t_ns"]
            release.set()
            for t in threads:
                t.join()
            for t in self.reclaims:
                t.join()
            t_end = max(done.values())
            sampler.stop()
            stat1 = {g.name: b.cgroups.memory_stat(g.cg_dirs) if g.cg_dirs else {}
                     for g in self.guests}
            self.summarise(sampler, t0, t_release, t_end, swap_before, stat0, stat1)
        finally:
            for g in self.guests:
                g.stop()
                if g.cg_dirs:
                    b.cgroups.remove(g.cg_dirs)
            if self.vmnapd:
                rc = self.vmnapd.stop()
                self.check("vmnapd-exit", rc in (0, -signal.SIGTERM), exit_status=rc)
                self.vmnapd_lost = (event_seq_gaps(self.vmnapd.events_path)
                                    if os.path.exists(self.vmnapd.events_path) else 0)
                if self.cohort in VMNAP_COHORTS:
                    fig = vmnapd_event_figures(self.vmnapd.events_path)
                    self.result.update(pauses=fig["pauses"], offloads=fig["offloads"],
                                       offloaded_bytes=fig["offloaded_bytes"])
                    for p in (50, 99):
                        v = percentile(fig["delivered_ms"], p)
                        self.result[f"vmnapd_delivery_p{p}_ms"] = None if v is None else round(v, 3)
                shutil.rmtree(os.path.join(a.store_dir, f"replay-{b.run_id}", self.key),
                              ignore_errors=True)
            if self.cohort == "swap":
                b.swapfile.off()
            b.events.emit("run_end", run=self.key)
        return self.result

    def summarise(self, sampler, t0, t_release, t_end, swap_before, stat0, stat1):
        rel_s, end_s = (t_release - t0) / NS, (t_end - t0) / NS
        window = end_s - rel_s
        series = {}  # vm -> list of (t, ram, pss, cg)
        for t, vm, ram, pss, cg, _gap in sampler.rows:
            series.setdefault(vm, []).append((t, ram, pss, cg))
        self.samples = [(self.cohort, self.rep) + r for r in sampler.rows]

        def integral(col):
            total = 0.0
            for pts in series.values():
                pts = [p for p in pts if rel_s <= p[0] <= end_s and p[col] >= 0]
                for p, q in zip(pts, pts[1:]):
                    total += (p[col] + q[col]) / 2 * (q[0] - p[0])
            return total / GIB

        def totals(col):
            ticks = {}
            for pts in series.values():
                for p in pts:
                    if rel_s <= p[0] <= end_s and p[col] >= 0:
                        ticks.setdefault(round(p[0], 3), 0)
                        ticks[round(p[0], 3)] += p[col]
            return list(ticks.values())

        r = self.result
        for col, name in ((1, "guest_ram"), (2, "vmm_pss"), (3, "cgroup")):
            r[f"{name}_memxtime_gib_s"] = round(integral(col), 6)
            tot = totals(col)
            r[f"{name}_mean_mib"] = round(statistics.mean(tot) / MIB, 3) if tot else None
            r[f"{name}_peak_mib"] = round(max(tot) / MIB, 3) if tot else None
        r["completion_window_s"] = round(window, 3)
        r["throughput_per_min"] = round(len(self.guests) / (window / 60), 4) if window > 0 else None
        for p in (50, 95, 99):
            v = percentile(self.delivery_ms, p)
            r[f"delivery_p{p}_ms"] = None if v is None else round(v, 3)
        r["delivery_samples"] = len(self.delivery_ms)
        r["_delivery_ms"] = list(self.delivery_ms)  # for the plot, not the summary
        gaps = sampler.gaps_ms
        r["max_sample_gap_ms"] = round(max(gaps), 3) if gaps else None
        r["samples"] = len(sampler.rows)
        r["sample_read_max_ms"] = sampler.read_max_ms
        r["vmm_pss_max_age_ms"] = round(sampler.pss_age_max_ms, 3)
        r["sampler_priority"] = sampler.priority
        faults = sum(stat1[v].get("pgmajfault", 0) - stat0[v].get("pgmajfault", 0) for v in stat1)
        r["major_faults"] = faults
        if self.cohort == "swap":
            vs = vmstat()
            r["offloaded_bytes"] = self.swapped_out_bytes
            r["host_pswpout_bytes"] = (vs["pswpout"] - swap_before["pswpout"]) * PAGE
            r["host_pswpin_bytes"] = (vs["pswpin"] - swap_before["pswpin"]) * PAGE
            r["reclaim_errors"] = self.reclaim_errors
        elif self.cohort in VMNAP_COHORTS:
            vms = {}
            for g in self.guests:
                try:
                    vms[g.name] = self.api.vm(g.name)
                except (OSError, RuntimeError) as e:
                    vms[g.name] = {"error": str(e)}
            r["vmnapd_vms"] = vms
            r["major_faults"] = sum(v.get("pager", {}).get("faults", 0) for v in vms.values())
        else:
            r["offloaded_bytes"] = 0


# --------------------------------------------------------------------------
# The benchmark
# --------------------------------------------------------------------------

class Bench:
    def __init__(self, args):
        self.args = args
        self.header, self.steps = load_trajectory(args.trajectory)
        self.cgroups = Cgroups()
        self.rootfs = None
        self.run_id = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + f"-{os.getpid()}"
        self.outdir = os.path.join(ROOT, args.out, self.run_id)
        self.swapfile = SwapFile(os.path.join(args.store_dir, f"replay-swapfile-{self.run_id}"),
                                 args.vms * args.mem + SWAPFILE_MARGIN_MIB)

    def build_rootfs(self):
        p = subprocess.run([os.path.join(ROOT, "scripts/guest-rootfs.sh")], cwd=ROOT,
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"guest-rootfs.sh failed: {p.stderr.strip()}")
        self.rootfs = self.pin(p.stdout.strip().splitlines()[-1], "rootfs.img")
        p = subprocess.run([os.path.join(ROOT, "scripts/mkinitramfs.sh")], cwd=ROOT,
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"mkinitramfs.sh failed: {p.stderr.strip()}")
        self.initrd = self.pin(os.path.join(ROOT, p.stdout.strip().splitlines()[-1]),
                               "initramfs.cpio.gz")
        # The daemon and the shim as built now: the tree is shared and
        # rebuilt under a long run.
        self.vmnapd_exe = self.preload = None
        for name, attr in (("vmnapd", "vmnapd_exe"), ("libvmnap-preload.so", "preload")):
            built = os.path.join(ROOT, BUILD, name)
            if os.path.exists(built):
                dst = os.path.join(self.outdir, name)
                shutil.copy2(built, dst)
                setattr(self, attr, dst)

    def pin(self, image, name):
        """A hard link pins this run's image: a rebuild (the tree is shared)
        replaces the path, never the inode this run's guests boot from."""
        dst = os.path.join(self.outdir, name)
        if os.path.lexists(dst):
            os.unlink(dst)
        try:
            os.link(image, dst)
            return dst
        except OSError:
            shutil.copyfile(image, dst)
            return dst

    def plan(self):
        """Cohort runs in interleaved order: each repetition rotates the order."""
        cohorts = list(self.args.cohorts)
        order = []
        for rep in range(self.args.repeats):
            k = rep % len(cohorts)
            order += [(c, rep) for c in cohorts[k:] + cohorts[:k]]
        return order

    def run(self):
        os.makedirs(self.outdir, exist_ok=True)
        for link in ("latest", f"latest-{self.args.vms}vm"):
            latest = os.path.join(os.path.dirname(self.outdir), link)
            if os.path.islink(latest) or os.path.exists(latest):
                os.unlink(latest)
            os.symlink(self.run_id, latest)
        self.events = EventLog(os.path.join(self.outdir, "events.jsonl"))
        self.build_rootfs()
        cohorts = list(self.args.cohorts)
        skipped = {}
        why = vmnap_missing()
        if why:
            for c in VMNAP_COHORTS:
                if c in cohorts:
                    skipped[c] = why
        for c in COHORTS:
            if c not in cohorts:
                skipped[c] = "not in --cohorts"
        if self.args.transport == "vsock" and not vmnapd_bridges():
            for c in cohorts:
                skipped.setdefault(c, f"the vsock transport needs vmnapd's bridge "
                                      f"({BUILD}/vmnapd --vsock), not built yet")
        self.args.cohorts = [c for c in cohorts if c not in skipped]
        self.sockdir = tempfile.mkdtemp(prefix="vmnap-replay.")
        runs, checks, samples = [], [], []
        self.vmnapd_lost = 0
        try:
            for cohort, rep in self.plan():
                log(f"run {cohort} rep {rep} ({self.args.vms} VM)")
                cr = CohortRun(self, cohort, rep)
                try:
                    runs.append(cr.run())
                except Exception as e:  # noqa: BLE001 - recorded, the rest goes on
                    cr.check("run", False, error=str(e))
                    runs.append(dict(cr.result, error=str(e)))
                checks += cr.checks
                samples += getattr(cr, "samples", [])
                self.vmnapd_lost += cr.vmnapd_lost
        finally:
            shutil.rmtree(self.sockdir, ignore_errors=True)
            self.swapfile.remove()
            self.cgroups.remove_run(self.run_id)
            shutil.rmtree(os.path.join(self.args.store_dir, f"replay-{self.run_id}"),
                          ignore_errors=True)
            self.events.close()
        return self.write_outputs(runs, checks, samples, skipped)

    def write_outputs(self, runs, checks, samples, skipped):
        a = self.args
        with open(os.path.join(self.outdir, "samples.csv"), "w") as f:
            f.write("cohort,rep,t_s,vm,guest_ram_bytes,vmm_pss_bytes,cgroup_bytes,tick_gap_ms\n")
            for row in samples:
                f.write(",".join(str(x) for x in row) + "\n")
        cohorts = {}
        fields = ("guest_ram_memxtime_gib_s", "vmm_pss_memxtime_gib_s", "cgroup_memxtime_gib_s",
                  "guest_ram_mean_mib", "guest_ram_peak_mib", "vmm_pss_mean_mib",
                  "vmm_pss_peak_mib", "cgroup_mean_mib", "cgroup_peak_mib",
                  "completion_window_s", "throughput_per_min", "delivery_p50_ms",
                  "delivery_p95_ms", "delivery_p99_ms", "major_faults", "offloaded_bytes")
        for c in COHORTS:
            rs = [r for r in runs if r["cohort"] == c and "error" not in r]
            if c in skipped or not rs:
                cohorts[c] = {"runs": 0, "skipped": skipped.get(c, "no completed run")}
                continue
            agg = {"runs": len(rs)}
            for k in fields:
                vals = [r[k] for r in rs if r.get(k) is not None]
                agg[k] = round(statistics.median(vals), 6) if vals else None
            cohorts[c] = agg
        base = cohorts.get("baseline", {})
        for c, agg in cohorts.items():
            if c == "baseline" or not agg.get("runs") or not base.get("runs"):
                continue
            agg["ratio_to_baseline"] = {
                k: round(agg[k] / base[k], 4) for k in
                ("guest_ram_memxtime_gib_s", "vmm_pss_memxtime_gib_s", "cgroup_memxtime_gib_s",
                 "completion_window_s", "throughput_per_min")
                if agg.get(k) is not None and base.get(k)}
        max_gap = max((r.get("max_sample_gap_ms") or 0 for r in runs), default=0)
        gap_limit = a.sample_ms * SAMPLE_GAP_LIMIT_FACTOR
        lost = event_seq_gaps(os.path.join(self.outdir, "events.jsonl"))
        functional = all(c["passed"] for c in checks) and bool(checks)
        validation = {
            "functional_checks": checks,
            "functional_checks_passed": functional,
            "checks_total": len(checks),
            "checks_failed": sum(not c["passed"] for c in checks),
            "sample_interval_ms": a.sample_ms,
            "max_sampling_gap_ms": max_gap,
            "max_sampling_gap_limit_ms": gap_limit,
            "vmm_pss_max_age_ms": max((r.get("vmm_pss_max_age_ms") or 0 for r in runs), default=0),
            "lost_events": lost,
            "lost_events_vmnapd": self.vmnapd_lost,
            "skipped_cohorts": skipped,
            "measurement_integrity_passed": functional and max_gap <= gap_limit and lost == 0
            and self.vmnapd_lost == 0 and all("error" not in r for r in runs),
        }
        summary = {
            "run_id": self.run_id,
            "trajectory": os.path.relpath(a.trajectory, ROOT),
            "trajectory_steps": len(self.steps),
            "trajectory_wait_s": round(sum(s["wait_ms"] for s in self.steps) / 1000, 3),
            "vms": a.vms, "repeats": a.repeats, "mem_mib": a.mem, "cpu_quota": a.cpu_quota,
            "transport": a.transport, "sample_ms": a.sample_ms,
            "host": {"accel": "tcg" if not os.path.exists("/dev/kvm") else "kvm",
                     "cpus": os.cpu_count(), "cgroups": self.cgroups.describe(),
                     "kernel": os.uname().release},
            "command": " ".join(sys.argv),
            "cohorts": cohorts,
            "runs": [{k: v for k, v in r.items() if not k.startswith("_")} for r in runs],
            "measurement_integrity_passed": validation["measurement_integrity_passed"],
        }
        with open(os.path.join(self.outdir, "summary.json"), "w") as f:
            json.dump(summary, f, indent=1, sort_keys=True)
        with open(os.path.join(self.outdir, "validation.json"), "w") as f:
            json.dump(validation, f, indent=1, sort_keys=True)
        plot(self.outdir, samples, runs)
        log(f"outputs in {self.outdir}")
        return summary, validation


def plot(outdir, samples, runs):
    """memory-over-time.png and delivery-cdf.png with gnuplot (if present)."""
    if not shutil.which("gnuplot") or not samples:
        return
    pdir = os.path.join(outdir, "plot-data")
    os.makedirs(pdir, exist_ok=True)
    mem_series = []
    for c in COHORTS:
        rows = [s for s in samples if s[0] == c and s[1] == min(
            (x[1] for x in samples if x[0] == c), default=0)]
        if not rows:
            continue
        ticks = {}
        for (_c, _r, t, _vm, ram, _pss, _cg, _gap) in rows:
            if ram >= 0:
                ticks[round(t, 2)] = ticks.get(round(t, 2), 0) + ram
        path = os.path.join(pdir, f"mem-{c}.dat")
        with open(path, "w") as f:
            for t in sorted(ticks):
                f.write(f"{t} {ticks[t] / MIB}\n")
        mem_series.append((c, path))
    cdf_series = []
    for c in COHORTS:
        vals = []
        for r in runs:
            if r.get("cohort") == c:
                vals += r.get("_delivery_ms", [])
        if not vals:
            continue
        vals.sort()
        path = os.path.join(pdir, f"cdf-{c}.dat")
        with open(path, "w") as f:
            for i, v in enumerate(vals):
                f.write(f"{v} {(i + 1) / len(vals)}\n")
        cdf_series.append((c, path))
    script = ["set terminal png size 1000,600", "set key outside right", "set grid"]
    if mem_series:
        script += [f"set output '{os.path.join(outdir, 'memory-over-time.png')}'",
                   "set title 'Guest RAM resident (all VMs, first run of each cohort)'",
                   "set xlabel 'seconds since start of sampling'", "set ylabel 'MiB'",
                   "plot " + ", ".join(f"'{p}' using 1:2 with lines lw 2 title '{c}'"
                                       for c, p in mem_series)]
    if cdf_series:
        script += [f"set output '{os.path.join(outdir, 'delivery-cdf.png')}'",
                   "set title 'Response delivery latency (data ready -> agent has the command)'",
                   "set xlabel 'ms'", "set ylabel 'fraction'", "set logscale x",
                   "set yrange [0:1]",
                   "plot " + ", ".join(f"'{p}' using 1:2 with steps lw 2 title '{c}'"
                                       for c, p in cdf_series)]
    subprocess.run(["gnuplot"], input="\n".join(script) + "\n", text=True,
                   capture_output=True)


# --------------------------------------------------------------------------
# record: fill in a trajectory's expectations from one guest run
# --------------------------------------------------------------------------

def cmd_record(args):
    header, steps = load_trajectory(args.trajectory, need_expectations=False)
    args.vms, args.cpu_quota = 1, None
    bench = Bench.__new__(Bench)
    bench.args = args
    bench.cgroups = Cgroups()
    bench.header, bench.steps = header, steps
    wd = os.path.join(ROOT, BUILD, "replay", "record")
    os.makedirs(wd, exist_ok=True)
    bench.outdir = wd
    bench.build_rootfs()
    bench.sockdir = tempfile.mkdtemp(prefix="vmnap-replay.")
    g = Guest(bench, "replay-record", "baseline", wd, os.path.join(bench.sockdir, "vm"), None)
    vmnapd = None
    if args.transport == "vsock":
        vmnapd = Vmnapd(bench.vmnapd_exe, os.path.join(bench.sockdir, "vmnapd"),
                        os.path.join(args.store_dir, "replay-record"), wd, [g.vsock_spec()])
        vmnapd.wait_for([g.vhost_user])
    g.start()
    try:
        g.wait_ready()
        for st in steps:
            res, _ = g.exec_shell(st["cmd"])
            st["exit_code"] = res["exit_code"]
            st["stdout_sha256"] = res["stdout_sha256"]
            log(f"step {st['step']}: exit {res['exit_code']} "
                f"{res['stdout_total']} bytes {res['stdout_sha256'][:12]}")
            if args.verbose:
                sys.stderr.write(res["stdout"].decode(errors="replace"))
                sys.stderr.write(res["stderr"].decode(errors="replace"))
        res, _ = g.exec_shell(FINAL_DIFF_CMD)
        header["final_diff_sha256"] = res["stdout_sha256"]
        header["recorded"] = {"how": "scripts/replay.py record (one baseline guest, "
                              "transport " + args.transport + ")",
                              "date": time.strftime("%Y-%m-%d", time.gmtime())}
        if args.verbose:
            sys.stderr.write(res["stdout"].decode(errors="replace"))
    finally:
        g.stop()
        if vmnapd:
            vmnapd.stop()
        shutil.rmtree(bench.sockdir, ignore_errors=True)
    with open(args.trajectory, "w") as f:
        f.write(json.dumps(header) + "\n")
        for st in steps:
            f.write(json.dumps(st) + "\n")
    log(f"recorded {len(steps)} steps into {args.trajectory}")
    return 0


def cmd_table(args):
    """A Markdown table of a run's cohorts (for the README)."""
    if not os.path.isfile(os.path.join(args.run_dir, "summary.json")):
        print(f"replay: {args.run_dir} has no summary.json: the run is not "
              "finished, or it failed (see its log)", file=sys.stderr)
        return 1
    with open(os.path.join(args.run_dir, "summary.json")) as f:
        s = json.load(f)
    with open(os.path.join(args.run_dir, "validation.json")) as f:
        v = json.load(f)
    cols = [("runs", "runs", "{}"), ("guest_ram_memxtime_gib_s", "guest RAM GiB·s", "{:.2f}"),
            ("vmm_pss_memxtime_gib_s", "VMM PSS GiB·s", "{:.2f}"),
            ("cgroup_memxtime_gib_s", "cgroup GiB·s", "{:.2f}"),
            ("guest_ram_mean_mib", "guest RAM mean MiB", "{:.0f}"),
            ("completion_window_s", "window s", "{:.1f}"),
            ("throughput_per_min", "VMs/min", "{:.3f}"),
            ("delivery_p50_ms", "deliv. p50 ms", "{:.1f}"),
            ("delivery_p99_ms", "deliv. p99 ms", "{:.1f}"),
            ("offloaded_bytes", "offloaded MiB", "{:.0f}")]
    print(f"{s['vms']} VM(s), {s['repeats']} runs per cohort, trajectory "
          f"{s['trajectory']} ({s['trajectory_steps']} steps, {s['trajectory_wait_s']} s of waits), "
          f"medians; run {s['run_id']}, measurement_integrity_passed: "
          f"{v['measurement_integrity_passed']} (max sampling gap {v['max_sampling_gap_ms']} ms, "
          f"lost events {v['lost_events']} + vmnapd {v['lost_events_vmnapd']}, "
          f"checks {v['checks_total'] - v['checks_failed']}/{v['checks_total']})\n")
    print("| cohort | " + " | ".join(c[1] for c in cols) + " | guest RAM vs baseline |")
    print("|---" * (len(cols) + 2) + "|")
    for c, agg in s["cohorts"].items():
        if not agg.get("runs"):
            print(f"| {c} | skipped: {agg.get('skipped', '')} |")
            continue
        cells = []
        for key, _title, fmt in cols:
            val = agg.get(key)
            if key == "offloaded_bytes" and val is not None:
                val = val / MIB
            cells.append("-" if val is None else fmt.format(val))
        ratio = agg.get("ratio_to_baseline", {}).get("guest_ram_memxtime_gib_s")
        print(f"| {c} | " + " | ".join(cells) + f" | {'-' if ratio is None else f'{ratio:.2f}x'} |")
    return 0


def cmd_probe(_args):
    cg = Cgroups()
    print(f"cgroups: {cg.describe()}")
    print(f"swap: {'swapon' if shutil.which('swapon') else 'no swapon'}")
    print(f"vmnap cohorts: {vmnap_missing() or 'available'}")
    print(f"launcher: {'present' if os.path.exists(os.path.join(ROOT, 'scripts/run-guest.sh')) else 'missing'}")
    return 0


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)

    def common(p):
        p.add_argument("--trajectory", default=os.path.join(ROOT, "tests/data/replay-full.jsonl"))
        p.add_argument("--mem", type=int, default=512, help="guest RAM in MiB")
        p.add_argument("--transport", choices=("auto", "vsock", "tty"), default="auto",
                       help="vsock: vmnapd's bridge; tty: the launcher's control line "
                            "(before the bridge exists); auto: vsock when vmnapd has it")
        p.add_argument("--guest-timeout", type=int, default=1800)
        p.add_argument("--store-dir", default=os.environ.get("VMNAP_STORE_DIR", "/var/lib/vmnap"))
        p.add_argument("-v", "--verbose", action="store_true")

    r = sub.add_parser("run", help="replay cohorts")
    common(r)
    r.add_argument("--cohorts", default=",".join(COHORTS))
    r.add_argument("--repeats", type=int, default=3)
    r.add_argument("--vms", type=int, default=1)
    r.add_argument("--cpu-quota", type=float, default=0.5,
                   help="CPUs per VM (cgroup cpu.max / cfs_quota_us); 0: none")
    r.add_argument("--sample-ms", type=int, default=100)
    r.add_argument("--out", default=os.path.join(BUILD, "bench/replay"))
    r.add_argument("--tap", action="store_true", help="TAP lines per cohort (make check)")
    rec = sub.add_parser("record", help="write a trajectory's expected results")
    common(rec)
    sub.add_parser("probe", help="what this host offers")
    tb = sub.add_parser("table", help="Markdown table of a run (README figures)")
    tb.add_argument("run_dir")
    args = ap.parse_args(argv)
    if getattr(args, "transport", None) == "auto":
        args.transport = "vsock" if vmnapd_bridges() else "tty"
    if args.cmd == "run":
        args.cohorts = [c for c in args.cohorts.split(",") if c]
        bad = [c for c in args.cohorts if c not in COHORTS]
        if bad:
            ap.error(f"unknown cohort(s) {bad}")
        if args.vms < 1 or args.repeats < 1 or args.sample_ms < 1:
            ap.error("--vms, --repeats and --sample-ms must be positive")
    return args


def cmd_run(args):
    if not os.path.exists(os.path.join(ROOT, "scripts/run-guest.sh")):
        print("replay: SKIP: scripts/run-guest.sh (guest launcher) is not in the tree yet")
        return 77
    requested = list(args.cohorts)
    bench = Bench(args)
    summary, validation = bench.run()
    if args.tap:
        print(f"1..{len(requested)}")
        for i, c in enumerate(requested, 1):
            agg = summary["cohorts"][c]
            if c in validation["skipped_cohorts"]:
                print(f"ok {i} - replay {c} # SKIP {validation['skipped_cohorts'][c]}")
                continue
            fails = [x for x in validation["functional_checks"]
                     if x["run"].startswith(c + "-") and not x["passed"]]
            print(f"{'not ok' if fails or not agg['runs'] else 'ok'} {i} - replay {c}: "
                  f"{agg['runs']} run(s), "
                  f"{len(fails)} failed check(s)")
    print(json.dumps({c: {k: v for k, v in s.items() if k in
                          ("runs", "skipped", "guest_ram_memxtime_gib_s",
                           "completion_window_s", "delivery_p99_ms")}
                      for c, s in summary["cohorts"].items()}, indent=1))
    print(f"measurement_integrity_passed: {validation['measurement_integrity_passed']}")
    if not any(s.get("runs") for s in summary["cohorts"].values()):
        print("replay: SKIP: no cohort could run here: " +
              "; ".join(f"{c}: {w}" for c, w in validation["skipped_cohorts"].items()))
        return 77
    return 0 if validation["functional_checks_passed"] else 1


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if os.geteuid() != 0:
        print("replay: SKIP: needs root (cgroups, swap, QEMU)")
        return 77
    return {"run": cmd_run, "record": cmd_record, "probe": cmd_probe,
            "table": cmd_table}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
