# SPDX-License-Identifier: GPL-2.0-only
"""Host facilities: per-VM cgroups, the swap cohort's reclaim and swap file,
/proc/vmstat.
"""
import ctypes
import os
import subprocess
import time

from .common import (CG_NAME, CPU_PERIOD_US, MADV_PAGEOUT, MIB, SYS_PIDFD_OPEN,
                     SYS_PROCESS_MADVISE)


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
        # The pause backend: QEMU alone in a freezer cgroup (v2 cgroup.freeze
        # in the VM's own directory, else the v1 freezer hierarchy) keeps
        # the guest's clock running while paused; QMP stop would stop it.
        self.freezer = None
        if not self.v2 and os.path.exists("/sys/fs/cgroup/freezer/tasks"):
            self.freezer = "/sys/fs/cgroup/freezer"

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
            up = os.path.dirname(d)  # nested (a budget parent): controllers on every level
            while len(up) > len(parent):
                try:
                    with open(os.path.join(up, "cgroup.subtree_control"), "w") as f:
                        f.write("+memory +cpu")
                except OSError:
                    pass
                up = os.path.dirname(up)
            if cpu_quota:
                with open(os.path.join(d, "cpu.max"), "w") as f:
                    f.write(f"{int(cpu_quota * CPU_PERIOD_US)} {CPU_PERIOD_US}")
            dirs = {"mem": d, "cpu": d}
        else:
            for key, base in (("mem", self.mem), ("cpu", self.cpu), ("freezer", self.freezer)):
                if not base:
                    continue
                d = os.path.join(base, CG_NAME, rel)
                os.makedirs(d, exist_ok=True)
                dirs[key] = d
            if cpu_quota:
                with open(os.path.join(dirs["cpu"], "cpu.cfs_period_us"), "w") as f:
                    f.write(str(CPU_PERIOD_US))
                with open(os.path.join(dirs["cpu"], "cpu.cfs_quota_us"), "w") as f:
                    f.write(str(int(cpu_quota * CPU_PERIOD_US)))
        return dirs

    @staticmethod
    def freezer_dir(dirs):
        """The VM's cgroup the freezer pause backend can freeze, or None."""
        for d in (dirs or {}).values():
            if any(os.path.exists(os.path.join(d, f)) for f in ("cgroup.freeze", "freezer.state")):
                return d
        return None

    @staticmethod
    def cpu_throttled(dirs):
        """How often and how long the kernel has throttled the VM's CPU
        cgroup (its cpu.max / cfs quota used up for the period) so far:
        (periods, microseconds), or None when cpu.stat cannot be read."""
        try:
            with open(os.path.join(dirs["cpu"], "cpu.stat")) as f:
                return parse_cpu_stat(f.read())
        except (OSError, KeyError):
            return None

    def procs_files(self, dirs):
        return sorted({os.path.join(d, "cgroup.procs") for d in dirs.values()})

    @staticmethod
    def _read_int(dirs, name, default):
        try:
            return int(open(os.path.join(dirs["mem"], name)).read())
        except (OSError, ValueError):
            return default

    def memory_bytes(self, dirs):
        return self._read_int(dirs, "memory.current" if self.v2 else "memory.usage_in_bytes", -1)

    def peak_bytes(self, dirs):
        """The cgroup's highest usage so far (v2 memory.peak, v1
        memory.max_usage_in_bytes); -1 without one."""
        return self._read_int(dirs, "memory.peak" if self.v2 else "memory.max_usage_in_bytes", -1)

    def swap_bytes(self, dirs):
        """The cgroup's memory in swap (v2 memory.swap.current, v1
        memory.stat total_swap); 0 without a reading."""
        if not self.v2:
            return max(0, self.memory_stat(dirs).get("total_swap", 0))
        return self._read_int(dirs, "memory.swap.current", 0)

    def footprint(self, dirs):
        """Where a (parent) cgroup's memory is, from its memory.stat:
        {anon, shmem, page_cache, swap} in bytes (page_cache: file pages but
        shmem; v1 the hierarchical total_* figures)."""
        st = self.memory_stat(dirs)
        p = "" if self.v2 else "total_"
        anon = st.get("anon" if self.v2 else "total_rss", 0)
        shmem = st.get(p + "shmem", 0)
        file = st.get("file" if self.v2 else "total_cache", 0)
        return {"anon": anon, "shmem": shmem, "page_cache": max(0, file - shmem),
                "swap": self.swap_bytes(dirs)}

    def memory_stat(self, dirs):
        st = {}
        try:
            for ln in open(os.path.join(dirs["mem"], "memory.stat")):
                k, v = ln.split()
                st[k] = int(v)
        except (OSError, ValueError):
            pass
        return st

    def set_limit(self, mem_dir, nbytes):
        """A hard memory limit on a (parent) memory cgroup: v2 memory.max,
        v1 memory.limit_in_bytes (hierarchical: use_hierarchy is 1)."""
        name = "memory.max" if self.v2 else "memory.limit_in_bytes"
        with open(os.path.join(mem_dir, name), "w") as f:
            f.write(str(nbytes))

    def limit_bytes(self, mem_dir):
        name = "memory.max" if self.v2 else "memory.limit_in_bytes"
        try:
            v = open(os.path.join(mem_dir, name)).read().strip()
            return None if v == "max" or int(v) >= 1 << 62 else int(v)
        except (OSError, ValueError):
            return None

    def oom_events(self, mem_dir):
        """(oom_kill, limit hits) of one memory cgroup.  v2: memory.events
        (oom_kill counts the whole subtree; "max" the times usage hit the
        limit).  v1: memory.oom_control's oom_kill, which counts only the
        victim's own cgroup (read every VM's before it is removed), and
        memory.failcnt."""
        ev = {}
        name = "memory.events" if self.v2 else "memory.oom_control"
        try:
            for ln in open(os.path.join(mem_dir, name)):
                k, v = ln.split()
                ev[k] = int(v)
        except (OSError, ValueError):
            return None, None
        if self.v2:
            return ev.get("oom_kill", 0), ev.get("max", 0)
        try:
            hits = int(open(os.path.join(mem_dir, "memory.failcnt")).read())
        except (OSError, ValueError):
            hits = None
        return ev.get("oom_kill", 0), hits

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
        for base in {self.v2, self.mem, self.cpu, self.freezer} - {None}:
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


def process_usage(pid):
    """What a process's threads have used: CPU time (user, system) in
    seconds and page faults (minor, major) as the kernel counts them, or
    None when it cannot be read (no pid, the process gone)."""
    if not pid:
        return None
    try:
        with open(f"/proc/{pid}/stat") as f:
            return parse_stat(f.read(), os.sysconf("SC_CLK_TCK"))
    except OSError:
        return None


def parse_cpu_stat(text):
    """(nr_throttled, throttled µs) from a cgroup's cpu.stat: v2 counts
    throttled_usec, v1 throttled_time in ns; None without them."""
    kv = {}
    for ln in text.splitlines():
        parts = ln.split()
        if len(parts) == 2 and parts[1].isdigit():
            kv[parts[0]] = int(parts[1])
    if "nr_throttled" not in kv:
        return None
    if "throttled_usec" in kv:
        return kv["nr_throttled"], kv["throttled_usec"]
    if "throttled_time" in kv:
        return kv["nr_throttled"], kv["throttled_time"] // 1000
    return None


def parse_stat(text, tick):
    """(utime s, stime s, minflt, majflt) from a /proc/PID/stat line; the
    command name (field 2) may hold spaces and parentheses."""
    fields = text.rsplit(")", 1)[1].split()
    # fields from 3 (state): minflt 10, majflt 12, utime 14, stime 15
    return (int(fields[11]) / tick, int(fields[12]) / tick,
            int(fields[7]), int(fields[9]))


def vmstat():
    out = {}
    for ln in open("/proc/vmstat"):
        k, v = ln.split()
        out[k] = int(v)
    return out
