# SPDX-License-Identifier: GPL-2.0-only
"""Constants and small helpers shared by the replay benchmark's modules.
"""
import hashlib
import os
import re
import sys
import time


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("BUILD", "build")
VMNAP_CACHE = os.environ.get("VMNAP_CACHE", "/var/cache/vmnap")

TRAJECTORY_FORMAT = "vmnap-trajectory"
TRAJECTORY_VERSION = 1
# Every cohort, in table order; the optional ones run only when named in
# --cohorts (REPLAY_COHORTS), the rest by default.
COHORTS = ("baseline", "pause", "offload", "offload-seed", "offload-lazy", "offload-ws",
           "offload-eager", "offload-recurring", "offload-nofollow", "offload-notrack", "offload-tail", "offload-notail",
           "offload-alt", "swap")
OPTIONAL_COHORTS = ("offload-ws", "offload-eager", "offload-recurring", "offload-nofollow",
                    "offload-notrack", "offload-tail", "offload-notail", "offload-alt")
DEFAULT_COHORTS = tuple(c for c in COHORTS if c not in OPTIONAL_COHORTS)
VMNAP_COHORTS = ("pause", "offload", "offload-seed", "offload-lazy", "offload-ws", "offload-eager",
                 "offload-recurring", "offload-nofollow", "offload-notrack", "offload-tail",
                 "offload-notail", "offload-alt")
# offload-alt is offload with another build's vmnapd and preload shim (run
# --alt-build DIR; scripts/build-rev.sh makes one of a git revision), so
# that two builds are measured side by side: the guest (its kernel, vmnap.ko,
# the exec agent) is this tree's in both.
ALT_COHORT = "offload-alt"
ALT_BINARIES = ("vmnapd", "libvmnap-preload.so")
# What each vmnap cohort asks of the coordinator beyond its defaults
# (PUT /vms/NAME "policy"): offload-seed is the fixed offload rule.
COHORT_POLICY = {
    "pause": {"kinds": {"model": {"pause": True, "offload": False}}},
    "offload": {"kinds": {"model": {"pause": True, "offload": True}}},
    "offload-seed": {"kinds": {"model": {"pause": True, "offload": True}},
                     "offload_policy": "seed"},
    "offload-lazy": {"kinds": {"model": {"pause": True, "offload": True}}},
    "offload-ws": {"kinds": {"model": {"pause": True, "offload": True}}},
    "offload-eager": {"kinds": {"model": {"pause": True, "offload": True}}},
    "offload-recurring": {"kinds": {"model": {"pause": True, "offload": True}}},
    "offload-nofollow": {"kinds": {"model": {"pause": True, "offload": True}}},
    "offload-notrack": {"kinds": {"model": {"pause": True, "offload": True}}},
    "offload-tail": {"kinds": {"model": {"pause": True, "offload": True}}},
    "offload-notail": {"kinds": {"model": {"pause": True, "offload": True}}},
    "offload-alt": {"kinds": {"model": {"pause": True, "offload": True}}},
}
# The VM's restore policy (PUT /vms/NAME "restore") where one is asked for:
# offload-lazy names vmnapd's default (faults only) explicitly, offload-ws
# brings the last cycle's working set back after a data resume,
# offload-eager every offloaded page, offload-recurring the pages the last
# two data cycles both touched.  offload takes vmnapd's default.
COHORT_RESTORE = {"offload-lazy": "lazy", "offload-ws": "working-set", "offload-eager": "eager",
                  "offload-recurring": "recurring"}
# vmnapd settings (its -c file) where a cohort changes one: offload-lazy
# holds nothing through a wait (the resume-critical set goes out with the
# rest and is read back before each resume: lazy in full, the frugal peer
# of swap), offload-nofollow turns the fault-order prefetch off,
# offload-tail keeps the command's last writes through every wait,
# offload-notail through none (by default, through the waits before the
# resume-critical set has learned the data path).
COHORT_SETTINGS = {"offload-lazy": {"critical_resident": False},
                   "offload-nofollow": {"follow_pages": 0},
                   "offload-tail": {"tail_resident": "always"},
                   "offload-notail": {"tail_resident": "off"}}
# vmnapd's environment where a cohort changes it: offload-notrack turns
# dirty tracking off (every restored page RESIDENT, no write-protect
# faults; every offload writes every resident page).
COHORT_ENV = {"offload-notrack": {"VMNAPD_DIRTY_TRACKING": "none"}}
# The phases of a resume in vmnapd's "resume" events (ns fields), in order,
# then two figures inside them: the faults' service time and the guest's
# own unquiesce (null without a RESUME_ACK: left out).
RESUME_PHASES = ("pre_resume", "vmm", "resumed", "ack", "total", "fault", "guest_unquiesce")

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
WARMUP_TIMEOUT_S = 300		# the throwaway guest that reads the shared page cache
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


# scripts/run-guest.sh says on stderr which accelerator it used: first
# "run-guest: NAME: tcg, 1 vCPU, ..." and, once the command ran,
# "run-guest: NAME: command started 1.2s after kernel start (tcg)".
LAUNCHER_ACCEL_RE = re.compile(
    r"^run-guest: \S+: (?:(kvm|tcg), \d+ vCPU|command started .*\((kvm|tcg)\)\s*$)",
    re.M)


def launcher_accel(text):
    """The accelerator run-guest.sh reports in its output (the last
    verdict it printed), or None when it printed none."""
    found = None
    for m in LAUNCHER_ACCEL_RE.finditer(text or ""):
        found = m.group(1) or m.group(2)
    return found


def runs_accel(accels):
    """One word for the accelerators the runs' guests used: "tcg", "kvm",
    "mixed" (both), or "unknown" (no launcher said)."""
    seen = sorted({a for a in accels if a})
    if not seen:
        return "unknown"
    return seen[0] if len(seen) == 1 else "mixed"


def percentile(vals, p):
    """The @p-th percentile (0..100) of @vals, linear between ranks; None
    for none."""
    if not vals:
        return None
    s = sorted(vals)
    k = (len(s) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)
