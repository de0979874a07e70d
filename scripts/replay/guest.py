# SPDX-License-Identifier: GPL-2.0-only
"""One QEMU guest booted from the replay rootfs image, and how to find its
QEMU process and guest RAM.
"""
import os
import signal
import subprocess
import time

from .agent import AgentError, TtyChannel, VsockChannel
from .common import (AGENT_PING_TIMEOUT_S, BOOT_TIMEOUT_S, GUEST_CID, GUEST_INIT_CMD,
                     GUEST_STOP_ARGV, GUEST_STOP_TIMEOUT_S, READY_LINE, ROOT, SHELL_ARGV,
                     STEP_TIMEOUT_MS,
                     VMNAP_COHORTS, launcher_accel)
from .sampler import GuestRamGauge


def launcher_env(args):
    """scripts/run-guest.sh's environment for this run's footprint choices
    (TCG translation cache, disk cache mode): the same for every guest."""
    env = dict(os.environ)
    if getattr(args, "tcg_tb_mib", None):
        env["VMNAP_TCG_TB_MIB"] = str(args.tcg_tb_mib)
    if getattr(args, "disk_cache", None):
        env["VMNAP_DISK_CACHE"] = args.disk_cache
    return env


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
        self.accel = None       # what run-guest.sh used (its output says)
        # A smaller CPU quota than the replay's usual 0.5 runs slower under
        # TCG: the boot wait and each command's time limit grow with it.
        q = bench.args.cpu_quota
        self.slow = max(1.0, 0.5 / q) if q else 1.0

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
            cmd += ["--env", f"LD_PRELOAD={self.bench.preload_for(self.cohort)}",
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
        self.out_path = os.path.join(self.workdir, "run-guest.out")
        self.out = open(self.out_path, "w")
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=self.out, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, preexec_fn=enter_cgroups,
                                     env=launcher_env(a))

    def wait_ready(self, timeout_s=None):
        if timeout_s is None:
            timeout_s = BOOT_TIMEOUT_S * self.slow
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
        self.read_accel()
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

    def read_accel(self):
        """Take the accelerator from the launcher's own output (it prints
        its verdict before QEMU starts and again when the command ran)."""
        try:
            with open(self.out_path, errors="replace") as f:
                acc = launcher_accel(f.read())
        except OSError:
            return self.accel
        if acc:
            self.accel = acc
        return self.accel

    def vsock_spec(self):
        return f"{self.name}:{self.vhost_user}:{GUEST_CID}:{self.vsock}"

    def exec_shell(self, cmd, on_ack=None):
        return self.channel.exec(SHELL_ARGV + [cmd], on_ack=on_ack,
                                 timeout_ms=int(STEP_TIMEOUT_MS * self.slow))

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
        self.read_accel()
