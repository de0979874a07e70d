# SPDX-License-Identifier: GPL-2.0-only
"""Fixed-interval memory sampling of the guests: guest-RAM resident bytes,
VMM PSS, the VM cgroup's memory.
"""
import ctypes
import os
import threading
import time

from .common import NS, PAGE, SAMPLER_RT_PRIO, SYS_CACHESTAT, now_ns


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
