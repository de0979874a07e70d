#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""logic_test.py - the replay benchmark's pure logic, without guests (TAP).

Checks the committed trajectories (format, recorded expectations, the wait
distribution the issue asks for), trajectory validation, the interleaved
cohort plan, percentiles, event-loss counting and the memory x time
integral of a cohort run.
"""
import json
import mmap
import os
import resource
import shutil
import sys
import tempfile
import threading
import time
import types

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from replay import cli, common, events, host, runner, schedtrace, summary, trajectory  # noqa: E402
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
import tap  # noqa: E402

t = tap.test


@t("full trajectory: about 40 recorded steps, mean wait ~5 s, tails present")
def _():
    hdr, steps = trajectory.load_trajectory(os.path.join(ROOT, "tests/data/replay-full.jsonl"))
    waits = [s["wait_ms"] for s in steps]
    assert 35 <= len(steps) <= 50, len(steps)
    assert 4000 <= sum(waits) / len(waits) <= 6000
    assert any(w < 20 for w in waits) and any(w > 10000 for w in waits)
    assert len(hdr["final_diff_sha256"]) == 64
    assert any("unittest" in s["cmd"] for s in steps) and any("sed -i" in s["cmd"] for s in steps)


@t("tiny trajectory: a handful of recorded steps with short waits")
def _():
    _hdr, steps = trajectory.load_trajectory(os.path.join(ROOT, "tests/data/replay-tiny.jsonl"))
    assert 3 <= len(steps) <= 8 and sum(s["wait_ms"] for s in steps) < 10000


def workspace_copy(dst, reverse):
    """The replay project as the guest's workspace (a git repository with
    one fixed commit, as tests/replay/guest-init.sh makes it), its files
    created in sorted or reverse order: on tmpfs, readdir lists them in
    creation order, so the two copies differ in directory order only."""
    src = os.path.join(ROOT, "tests/data/replay-project")
    files = sorted(os.path.relpath(os.path.join(d, f), src)
                   for d, _s, fs in os.walk(src) for f in fs)
    for rel in (reversed(files) if reverse else files):
        os.makedirs(os.path.dirname(os.path.join(dst, rel)), exist_ok=True)
        with open(os.path.join(src, rel), "rb") as i, open(os.path.join(dst, rel), "wb") as o:
            o.write(i.read())


def replay_on_host(ws, steps, env):
    """Each step's (exit code, stdout digest), run in order in @ws."""
    import hashlib
    import subprocess
    out = []
    for st in steps:
        r = subprocess.run(common.SHELL_ARGV + [st["cmd"]], cwd=ws, env=env, capture_output=True,
                           stdin=subprocess.DEVNULL, timeout=60)
        out.append((r.returncode, hashlib.sha256(r.stdout).hexdigest()))
    return out


@t("every step's output is independent of directory order (readdir of the guest's ext4 is hash order)")
def _():
    import shutil
    import subprocess
    base = "/dev/shm" if os.path.isdir("/dev/shm") else None
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent", "LANG": "C.UTF-8",
           "LC_ALL": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0",
           "GIT_PAGER": "cat", "PAGER": "cat", "TZ": "UTC", "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_AUTHOR_NAME": "vmnap", "GIT_AUTHOR_EMAIL": "vmnap@localhost",
           "GIT_COMMITTER_NAME": "vmnap", "GIT_COMMITTER_EMAIL": "vmnap@localhost",
           "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}
    for name in ("replay-full.jsonl", "replay-tiny.jsonl"):
        _hdr, steps = trajectory.load_trajectory(os.path.join(ROOT, "tests/data", name))
        d = tempfile.mkdtemp(dir=base)
        try:
            res = []
            ws = os.path.join(d, "project")  # one path: tracebacks name it
            for rev in (False, True):
                shutil.rmtree(ws, ignore_errors=True)
                workspace_copy(ws, rev)
                subprocess.run("git init -q -b main . && git add -A && "
                               "git commit -q -m 'inventory: initial import'",
                               shell=True, cwd=ws, env=env, check=True)
                res.append(replay_on_host(ws, steps, env))
            differ = [st["step"] for st, a, b in zip(steps, res[0], res[1]) if a != b]
            assert not differ, f"{name}: steps {differ} depend on directory order"
        finally:
            shutil.rmtree(d)


@t("heavy trajectory: ~30 recorded steps, a long-lived process rewriting a slice per step")
def _():
    hdr, steps = trajectory.load_trajectory(os.path.join(ROOT, "tests/data/replay-heavy.jsonl"))
    assert 25 <= len(steps) <= 35, len(steps)
    assert 100000 <= sum(s["wait_ms"] for s in steps) <= 140000
    assert "hog.py" in steps[0]["cmd"] and "setsid" in steps[0]["cmd"]
    assert all("/tmp/hog.in" in s["cmd"] and "sync" in s["cmd"] for s in steps[1:])
    # every step rewrote a different slice than the one before it
    assert len({s["stdout_sha256"] for s in steps[1:]}) == len(steps) - 1
    # the full trajectory's commands exit as they do there
    _h, full = trajectory.load_trajectory(os.path.join(ROOT, "tests/data/replay-full.jsonl"))
    assert steps[0]["exit_code"] == 0
    assert [s["exit_code"] for s in steps[1:]] == [f["exit_code"] for f in full[:len(steps) - 1]]
    assert len(hdr["final_diff_sha256"]) == 64


def bad_trajectory(lines):
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for ln in lines:
            f.write(json.dumps(ln) + "\n")
    try:
        trajectory.load_trajectory(f.name)
    except trajectory.TrajectoryError:
        return True
    finally:
        os.unlink(f.name)
    return False


HDR = {"format": "vmnap-trajectory", "version": 1, "final_diff_sha256": "0" * 64}
STEP = {"step": 1, "wait_ms": 5, "cmd": "true", "exit_code": 0, "stdout_sha256": "0" * 64}


@t("trajectory validation rejects bad files")
def _():
    assert bad_trajectory([dict(HDR, format="other"), STEP])
    assert bad_trajectory([HDR, dict(STEP, step=2)])
    assert bad_trajectory([HDR, dict(STEP, wait_ms=-1)])
    assert bad_trajectory([HDR, dict(STEP, cmd="")])
    assert bad_trajectory([HDR, {k: v for k, v in STEP.items() if k != "stdout_sha256"}])
    assert bad_trajectory([{k: v for k, v in HDR.items() if k != "final_diff_sha256"}, STEP])
    assert not bad_trajectory([HDR, STEP])


@t("cohort plan is interleaved and repeated, one run at a time")
def _():
    b = types.SimpleNamespace(args=types.SimpleNamespace(cohorts=list(common.COHORTS), repeats=3,
                                                         side_by_side=False))
    batches = runner.Bench.plan(b)
    n = len(common.COHORTS)
    assert len(batches) == 3 * n and all(len(x) == 1 for x in batches), batches
    plan = [x[0] for x in batches]
    for c in common.COHORTS:
        assert sorted(r for cc, r in plan if cc == c) == [0, 1, 2]
    firsts = [plan[i * n][0] for i in range(3)]
    assert len(set(firsts)) == 3, firsts  # each repetition starts elsewhere


@t("cohort plan --side-by-side: one batch per repetition, every cohort in it")
def _():
    b = types.SimpleNamespace(args=types.SimpleNamespace(cohorts=["baseline", "offload"],
                                                         repeats=3, side_by_side=True))
    batches = runner.Bench.plan(b)
    assert len(batches) == 3, batches
    for rep, x in enumerate(batches):
        assert sorted(x) == [("baseline", rep), ("offload", rep)], x


@t("a batch of runs runs at once and keeps plan order")
def _():
    started, release = [], threading.Event()

    def run_cohort(cohort, rep):
        started.append(cohort)
        if len(started) == 2:
            release.set()
        assert release.wait(30), "the runs of a batch did not run at once"
        return (cohort, rep), {"cohort": cohort}
    b = types.SimpleNamespace(run_cohort=run_cohort)
    out = runner.Bench.run_batch(b, [("offload", 1), ("baseline", 1)])
    assert [r for _, r in out] == [{"cohort": "offload"}, {"cohort": "baseline"}], out


@t("cohorts: offload (defaults), offload-seed, offload-lazy, optional offload-ws/-eager/-recurring/-nofollow/-notrack/-tail/-notail/-alt")
def _():
    assert common.DEFAULT_COHORTS == ("baseline", "pause", "offload", "offload-seed",
                                      "offload-lazy", "swap")
    assert set(common.COHORTS) == set(common.DEFAULT_COHORTS) | {"offload-ws", "offload-eager",
                                                                 "offload-recurring",
                                                                 "offload-nofollow",
                                                                 "offload-notrack",
                                                                 "offload-tail",
                                                                 "offload-notail",
                                                                 "offload-alt"}
    for c in common.VMNAP_COHORTS:
        assert c in common.COHORT_POLICY, c
    pol = common.COHORT_POLICY
    assert not pol["pause"]["kinds"]["model"]["offload"]
    for c in ("offload", "offload-lazy", "offload-ws", "offload-eager", "offload-recurring",
              "offload-nofollow", "offload-notrack", "offload-tail", "offload-notail",
              "offload-alt"):
        assert pol[c]["kinds"]["model"]["offload"] and set(pol[c]) == {"kinds"}, c
    # offload-alt is offload in every setting: only its binaries differ
    assert pol["offload-alt"] == pol["offload"]
    for table in (common.COHORT_RESTORE, common.COHORT_SETTINGS, common.COHORT_ENV):
        assert "offload-alt" not in table and "offload" not in table
    assert pol["offload-seed"]["offload_policy"] == "seed"
    # offload takes vmnapd's default restore; the others name theirs
    assert common.COHORT_RESTORE == {"offload-lazy": "lazy", "offload-ws": "working-set",
                                     "offload-eager": "eager", "offload-recurring": "recurring"}
    with open(os.path.join(ROOT, "host-pager/vmnapd.conf.example")) as f:
        conf = json.load(f)
    assert conf["restore"] == "lazy"
    # settings a cohort changes are vmnapd.conf keys, set otherwise there
    assert common.COHORT_SETTINGS == {"offload-lazy": {"critical_resident": False},
                                      "offload-nofollow": {"follow_pages": 0},
                                      "offload-tail": {"tail_resident": "always"},
                                      "offload-notail": {"tail_resident": "off"}}
    for c, s in common.COHORT_SETTINGS.items():
        assert c in common.VMNAP_COHORTS and set(s) <= set(conf), (c, s)
    # what those cohorts turn off is on by default
    assert conf["follow_pages"] > 0 and conf["critical_resident"] is True
    # ... and the command's last writes are kept until the set has pages
    assert conf["tail_resident"] == "first"
    # an environment a cohort changes: vmnapd's dirty-tracking switch only
    assert common.COHORT_ENV == {"offload-notrack": {"VMNAPD_DIRTY_TRACKING": "none"}}
    for c in common.COHORT_ENV:
        assert c in common.VMNAP_COHORTS and c in common.OPTIONAL_COHORTS, c
    # --cohorts: the default list leaves the optional ones out; naming them works
    args = cli.parse_args(["run", "--transport", "tty"])
    assert args.cohorts == list(common.DEFAULT_COHORTS), args.cohorts
    args = cli.parse_args(["run", "--transport", "tty", "--cohorts", "offload-ws,offload-eager"])
    assert args.cohorts == ["offload-ws", "offload-eager"]
    # every policy is one vmnapd accepts: keys of host-pager/vmnapd.conf.example
    with open(os.path.join(ROOT, "host-pager/vmnapd.conf.example")) as f:
        known = json.load(f)["coordinator"]
    for c, p in pol.items():
        assert set(p) <= set(known), (c, set(p) - set(known))


@t("offload-alt: --alt-build is checked, its binaries run that cohort alone, offload is paired with it")
def _():
    def rejected(argv):
        try:
            cli.parse_args(argv)
        except SystemExit as e:
            return e.code == 2
        return False
    base = ["run", "--transport", "tty"]
    assert rejected(base + ["--cohorts", "offload,offload-alt"])        # no build
    with tempfile.TemporaryDirectory() as d:
        assert rejected(base + ["--cohorts", "offload", "--alt-build", d])  # no cohort
        assert rejected(base + ["--cohorts", "offload-alt", "--alt-build", d])  # empty dir
        with open(os.path.join(d, "vmnapd"), "wb") as f:
            f.write(b"alt vmnapd")
        assert rejected(base + ["--cohorts", "offload-alt", "--alt-build", d])  # no shim
        with open(os.path.join(d, "libvmnap-preload.so"), "wb") as f:
            f.write(b"alt shim")
        with open(os.path.join(d, "REV"), "w") as f:
            f.write("0123abc an older tree\n")
        args = cli.parse_args(base + ["--cohorts", "offload,offload-alt",
                                      "--alt-build", os.path.relpath(d)])
        assert args.alt_build == d and args.cohorts == ["offload", "offload-alt"]
        # Bench copies the alt build into the run's directory and hands it
        # to offload-alt only
        with tempfile.TemporaryDirectory() as out:
            b = types.SimpleNamespace(args=args, outdir=out, builds={})
            b.vmnapd_exe, b.preload = "/tree/vmnapd", "/tree/libvmnap-preload.so"
            runner.Bench.take_alt_build(b)
            alt_dir = os.path.join(out, "alt")
            # a later rebuild of the directory does not reach the run
            with open(os.path.join(d, "vmnapd"), "wb") as f:
                f.write(b"rebuilt")
            with open(b.alt["vmnapd"], "rb") as f:
                assert f.read() == b"alt vmnapd"
            assert b.builds["alt"]["dir"] == d
            assert b.builds["alt"]["rev"] == "0123abc an older tree", b.builds
            assert runner.Bench.vmnapd_for(b, "offload-alt") == os.path.join(alt_dir, "vmnapd")
            assert runner.Bench.vmnapd_for(b, "offload") == "/tree/vmnapd"
            assert runner.Bench.preload_for(b, "offload-alt") == \
                os.path.join(alt_dir, "libvmnap-preload.so")
            assert runner.Bench.preload_for(b, "pause") == "/tree/libvmnap-preload.so"
            info = runner.build_info(alt_dir, "0123abc an older tree")
            assert info["rev"] == "0123abc an older tree"
            assert info["vmnapd_sha256"] == common.sha256_hex(b"alt vmnapd")
            assert info["libvmnap-preload.so_sha256"] == common.sha256_hex(b"alt shim")
    # paired ratios against offload-alt, repetition by repetition
    runs = [{"cohort": c, "rep": r, "guest_ram_memxtime_gib_s": m, "completion_window_s": w}
            for c, r, m, w in (("offload", 0, 1.0, 210.0), ("offload-alt", 0, 2.0, 200.0),
                               ("offload", 1, 3.0, 202.0), ("offload-alt", 1, 3.0, 202.0))]
    by = summary.paired_ratios(runs, "offload", "offload-alt")
    assert by == {"guest_ram_memxtime_gib_s": [0.5, 1.0], "completion_window_s": [1.05, 1.0]}, by
    assert cli.short_rev({"rev": "0123456789abcdef0 subject +changes"}) == "0123456789ab +changes"
    assert cli.short_rev({"rev": "0123456789abcdef0 subject"}) == "0123456789ab"
    assert cli.short_rev(None) == "revision unknown"
    assert summary.paired_ratios(runs, "offload") == \
        {"guest_ram_memxtime_gib_s": [], "completion_window_s": []}     # no baseline


@t("build-rev.sh: --help, an unknown revision refused, HEAD built into the cache")
def _():
    import subprocess
    script = os.path.join(ROOT, "scripts/build-rev.sh")
    p = subprocess.run([script, "--help"], capture_output=True, text=True)
    assert p.returncode == 0 and "VMNAP_CACHE" in p.stdout, p
    p = subprocess.run([script], capture_output=True, text=True)
    assert p.returncode == 2 and "usage" in p.stderr, p
    if subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True).returncode:
        print("# skip: not a git checkout: build-rev.sh builds git revisions")
        return
    p = subprocess.run([script, "no-such-revision-here"], capture_output=True, text=True)
    assert p.returncode == 1 and "not a commit" in p.stderr, p
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, VMNAP_CACHE=cache)
        p = subprocess.run([script, "HEAD"], capture_output=True, text=True, env=env)
        assert p.returncode == 0, p.stderr[-2000:]
        out = p.stdout.strip().splitlines()[-1]
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True,
                              text=True).stdout.strip()
        assert out == os.path.join(cache, "builds", head), out
        for n in common.ALT_BINARIES:
            assert os.path.getsize(os.path.join(out, n)) > 0, n
        with open(os.path.join(out, "REV")) as f:
            assert f.read().startswith(head + " ")
        # the second call finds it built; nothing is left behind
        p = subprocess.run([script, "HEAD"], capture_output=True, text=True, env=env)
        assert p.returncode == 0 and p.stdout.strip() == out and "building" not in p.stderr, p
        assert sorted(os.listdir(os.path.join(cache, "builds"))) == [head]


def event_figures(evs, tail=""):
    """resume_figures of vmnapd events @evs (then the raw lines @tail), read
    from a file as a run's."""
    from replay import vmnapd

    with tempfile.NamedTemporaryFile("w", delete=False) as f:
        for ev in evs:
            f.write(json.dumps(ev) + "\n")
        f.write(tail)
    try:
        return runner.resume_figures(vmnapd.vmnapd_event_figures(f.name))
    finally:
        os.unlink(f.name)


@t("resume breakdown: p50/p99 per phase from vmnapd's resume events")
def _():
    evs = [{"type": "transition", "vm": "a", "to": "PAUSED", "resident_bytes": 300},
           {"type": "offload_decision", "vm": "a", "offload": True, "reason": "cheap"},
           {"type": "offload_decision", "vm": "a", "offload": False, "reason": "cost"},
           {"type": "transition", "vm": "a", "to": "OFFLOADED", "resident_bytes": 100}]
    for i in range(1, 11):
        evs.append({"type": "resume", "vm": "a", "restore": "lazy" if i == 1 else "working-set",
                    "probe": i == 1,
                    "pre_resume_ns": 0, "vmm_ns": i * 1000000, "resumed_ns": 1000,
                    "ack_ns": 2 * i * 1000000, "total_ns": 3 * i * 1000000, "faults": i,
                    "fault_ns": i * 100000,
                    "guest_unquiesce_ns": None if i == 10 else i * 10000})
    r = event_figures(evs, "not json\n")
    assert r["resumes"] == 10 and r["resumes_lazy"] == 1 and r["resumes_probe"] == 1, r
    assert r["offloads"] == 1 and r["offloaded_bytes"] == 200
    assert r["offload_decisions"] == {"offload:cheap": 1, "no:cost": 1}
    assert r["resume_vmm_p50_ms"] == 5.5 and r["resume_ack_p50_ms"] == 11.0, r
    assert abs(r["resume_total_p99_ms"] - 29.73) < 1e-6, r
    assert r["resume_fault_p50_ms"] == 0.55, r
    assert r["resume_guest_unquiesce_p50_ms"] == 0.05, r  # the unacked one left out
    assert r["resume_faults_p50"] == 5.5 and r["vmnapd_delivery_p50_ms"] is None
    assert r["command_faults"] == 0
    assert r["data_delivery_faults_p50"] is None and r["data_delivery_fault_p50_ms"] is None
    assert r["link_up_ms"] is None


@t("link up: the slowest VM's ms from its registration to its guest link's first up")
def _():
    evs = [{"type": "vm_register", "vm": "a", "t_ns": 1000000},
           {"type": "vm_register", "vm": "b", "t_ns": 2000000},
           {"type": "link", "vm": "a", "state": "up", "t_ns": 3500000},
           {"type": "link", "vm": "b", "state": "down", "t_ns": 4000000},
           {"type": "link", "vm": "b", "state": "up", "t_ns": 9000000},
           {"type": "link", "vm": "a", "state": "up", "t_ns": 90000000},  # a reconnect
           {"type": "link", "vm": "c", "state": "up", "t_ns": 5000000}]   # never registered
    r = event_figures(evs)
    assert r["link_up_ms"] == 7.0, r


@t("data deliveries: faults from a data resume's request to the delivery")
def _():
    evs = [{"type": "delivered", "vm": "a", "wait": "w0", "latency_ns": 9000000}]
    for i in range(1, 5):
        evs.append({"type": "delivered", "vm": "a", "wait": f"w{i}",
                    "latency_ns": 10000000, "resume_faults": i, "resume_fault_pages": i,
                    **({"faults_from": "resume"} if i % 2 else {}),
                    "resume_zero_faults": 0, "resume_fault_ns": i * 500000})
    evs.append({"type": "delivered", "vm": "a", "wait": "w9", "latency_ns": 1,
                "resume_faults": "x", "resume_fault_ns": 1})
    # data taken in while running: counted from its arrival, not a resume's
    evs.append({"type": "delivered", "vm": "a", "wait": "w10", "latency_ns": 10000000,
                "faults_from": "data_ready", "resume_faults": 90, "resume_fault_pages": 90,
                "resume_zero_faults": 0, "resume_fault_ns": 90 * 500000})
    r = event_figures(evs)
    assert r["vmnapd_delivery_p50_ms"] == 10.0, r
    assert r["data_delivery_faults_p50"] == 2.5, r
    assert r["data_delivery_fault_p50_ms"] == 1.25, r


@t("delivery after offload: each wait's data classed by the state it found its VM in")
def _():
    from replay import vmnapd

    def tr(vm, frm, to):
        return {"type": "transition", "vm": vm, "from": frm, "to": to}

    def ready(vm, w):
        return {"type": "wait_ready", "vm": vm, "wait": w}
    evs = [ready("a", "s1"),                                # no transition yet: running
           tr("a", "WAITING", "HANDOFF"), ready("a", "s2"),  # still running
           tr("a", "HANDOFF", "PAUSED"), ready("a", "s3"),
           tr("a", "PAUSED", "OFFLOADING"), ready("a", "s4"),
           tr("a", "OFFLOADING", "OFFLOADED"), ready("b", "s4"), ready("a", "s5"),
           # a guest timer resumes it: data coming meanwhile found it offloaded
           tr("a", "OFFLOADED", "RESUMING"), ready("a", "s6"),
           tr("a", "RESUMING", "RUNNING"), ready("a", "s7"),
           tr("a", "RUNNING", "PAUSED"), tr("a", "PAUSED", "RESUMING"), ready("a", "s8"),
           {"type": "wait_ready", "vm": "a"}]               # no wait id: ignored
    with tempfile.NamedTemporaryFile("w", delete=False) as f:
        for ev in evs:
            f.write(json.dumps(ev) + "\n")
    try:
        found = vmnapd.vmnapd_event_figures(f.name)["data_found"]
    finally:
        os.unlink(f.name)
    assert found == {("a", "s1"): "running", ("a", "s2"): "running",
                     ("a", "s3"): "paused", ("a", "s4"): "offloaded",
                     ("b", "s4"): "running", ("a", "s5"): "offloaded",
                     ("a", "s6"): "offloaded", ("a", "s7"): "running",
                     ("a", "s8"): "paused"}, found
    deliveries = [("a", 1, 40.0, True), ("a", 3, 5.0, False), ("a", 4, 10.0, False),
                  ("a", 5, 20.0, True), ("a", 6, 30.0, None), ("b", 4, 50.0, False),
                  ("a", 9, 70.0, False)]                     # no event: in no class
    r = runner.delivery_split(deliveries, found)
    assert r["delivery_offloaded_n"] == 3 and r["delivery_offloaded_throttled"] == 1, r
    assert r["delivery_offloaded_p50_ms"] == 20.0, r
    assert abs(r["delivery_offloaded_p99_ms"] - 29.8) < 1e-6, r
    assert r["delivery_paused_n"] == 1 and r["delivery_paused_p99_ms"] == 5.0, r
    assert r["delivery_running_n"] == 2 and r["delivery_running_throttled"] == 1, r
    assert r["delivery_running_p50_ms"] == 45.0, r
    none = runner.delivery_split([], found)
    assert none["delivery_offloaded_n"] == 0 and none["delivery_offloaded_p99_ms"] is None


@t("command faults: the counters' growth while RUNNING, per VM, nothing else")
def _():
    def tr(vm, to, faults, ms, read_ms, seq):
        return {"type": "transition", "vm": vm, "to": to, "faults": faults,
                "fault_ns": ms * 1000000, "fault_read_ns": read_ms * 1000000,
                "faults_sequential": seq}
    evs = [tr("a", "RUNNING", 10, 100, 50, 2),      # command 1 of a
           tr("b", "RUNNING", 0, 0, 0, 0),          # b interleaved
           tr("a", "WAITING", 30, 300, 150, 9),     # +20 faults (7 seq), 200 ms, 100 read
           {"type": "transition", "vm": "a", "to": "HANDOFF"},    # no counters
           tr("a", "PAUSED", 35, 320, 160, 12),     # a wait: not counted
           tr("b", "WAITING", 7, 70, 35, 1),        # +7 (1 seq) for b
           tr("a", "RUNNING", 40, 400, 200, 13),
           tr("a", "WAITING", 41, 410, 205, 13)]    # +1
    r = event_figures(evs)
    assert r["command_faults"] == 28 and r["command_faults_sequential"] == 8, r
    assert abs(r["command_fault_s"] - 0.28) < 1e-9 and abs(r["command_fault_read_s"] - 0.14) < 1e-9, r
    # a vmnapd that does not report the parts: none, not zero
    assert r["command_fault_lock_s"] is None and r["command_fault_in_flight_s"] is None, r
    assert r["command_fault_sequential_s"] is None, r


@t("command faults: lock, in-flight and sequential seconds while RUNNING")
def _():
    def tr(to, faults, lock_ms, wait_ms, seq_ms):
        return {"type": "transition", "vm": "a", "to": to, "faults": faults,
                "fault_ns": 1000 * faults, "fault_read_ns": 0, "faults_sequential": 0,
                "fault_lock_ns": lock_ms * 1000000, "fault_in_flight_ns": wait_ms * 1000000,
                "fault_sequential_ns": seq_ms * 1000000}
    evs = [tr("RUNNING", 1, 1, 2, 3),
           tr("WAITING", 5, 11, 42, 103),   # +10, +40, +100 ms
           tr("PAUSED", 6, 20, 50, 200),    # a wait: not counted
           tr("RUNNING", 6, 20, 50, 200),
           tr("WAITING", 7, 25, 50, 200)]   # +5, 0, 0
    r = event_figures(evs)
    assert r["command_fault_lock_s"] == 0.015 and r["command_fault_in_flight_s"] == 0.04, r
    assert r["command_fault_sequential_s"] == 0.1, r


@t("percentiles interpolate")
def _():
    assert common.percentile([1, 2, 3, 4], 50) == 2.5
    assert common.percentile([5], 99) == 5
    assert common.percentile([], 50) is None


@t("lost events are counted by sequence gaps")
def _():
    with tempfile.NamedTemporaryFile("w", delete=False) as f:
        for s in (1, 2, 5, 6, 9):
            f.write(json.dumps({"seq": s}) + "\n")
    try:
        assert events.event_seq_gaps(f.name) == 4
    finally:
        os.unlink(f.name)


@t("memory x time integral over the release window")
def _():
    cr = runner.CohortRun.__new__(runner.CohortRun)
    cr.cohort, cr.rep, cr.guests = "baseline", 0, [1, 2]
    cr.delivery_ms, cr.result = [1.0, 2.0, 3.0], {}
    # the 3.0 ms delivery met a throttled CPU quota: left out of the others
    cr.delivery_throttled, cr.delivery_unthrottled_ms = 1, [1.0, 2.0]
    cr.bench, cr.via_gateway, cr.command_usage = None, False, [1.25, 0.5, 7, 3]
    gib = common.GIB
    sampler = types.SimpleNamespace(
        rows=[(t / 10, vm, gib, 2 * gib, 3 * gib, 100.0) for t in range(0, 101) for vm in ("a", "b")],
        gaps_ms=[100.0] * 100, read_max_ms={}, priority="test", pss_age_max_ms=0.0)
    ns = common.NS
    cr.summarise(sampler, 0, 0, 10 * ns, {}, {"a": {}, "b": {}}, {"a": {}, "b": {}})
    r = cr.result
    assert abs(r["guest_ram_memxtime_gib_s"] - 20.0) < 1e-6, r  # 2 VMs x 1 GiB x 10 s
    assert abs(r["vmm_pss_memxtime_gib_s"] - 40.0) < 1e-6
    assert r["completion_window_s"] == 10 and r["throughput_per_min"] == 12
    assert r["guest_ram_peak_mib"] == 2048 and r["delivery_p50_ms"] == 2.0
    assert r["delivery_throttled"] == 1 and r["delivery_unthrottled_p99_ms"] < 2.0 + 1e-9
    assert r["delivery_unthrottled_p50_ms"] < r["delivery_p50_ms"], r
    assert r["command_vmm_user_s"] == 1.25 and r["command_vmm_sys_s"] == 0.5
    assert r["command_vmm_minflt"] == 7 and r["command_vmm_majflt"] == 3


@t("paired ratios: each repetition against the baseline run of the same repetition")
def _():
    runs = [{"cohort": "baseline", "rep": 0, "completion_window_s": 100.0,
             "guest_ram_memxtime_gib_s": 10.0},
            {"cohort": "offload", "rep": 1, "completion_window_s": 150.0,
             "guest_ram_memxtime_gib_s": 0.6},
            {"cohort": "offload", "rep": 0, "completion_window_s": 103.0,
             "guest_ram_memxtime_gib_s": 0.2},
            {"cohort": "baseline", "rep": 1, "completion_window_s": 120.0,
             "guest_ram_memxtime_gib_s": 12.0},
            {"cohort": "offload", "rep": 2, "completion_window_s": 90.0,   # baseline failed
             "guest_ram_memxtime_gib_s": 0.1},
            {"cohort": "baseline", "rep": 2, "error": "boot failed"}]
    by = summary.paired_ratios(runs, "offload")
    assert by == {"completion_window_s": [1.03, 1.25],
                  "guest_ram_memxtime_gib_s": [0.02, 0.05]}, by


@t("VMM usage: a process's CPU seconds and page faults from /proc/PID/stat")
def _():
    t0 = host.process_usage(os.getpid())
    end = time.process_time() + 0.05
    while time.process_time() < end:
        pass
    buf = mmap.mmap(-1, 64 * mmap.PAGESIZE)
    for off in range(0, len(buf), mmap.PAGESIZE):   # first touches: minor faults
        buf[off] = 1
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t1 = host.process_usage(os.getpid())
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    assert t0 and t1 and t1[0] + t1[1] > t0[0] + t0[1], (t0, t1)
    assert t1[2] >= t0[2] + 64, (t0, t1)
    # the kernel's own counts for this process, read just before and after
    assert r0.ru_minflt <= t1[2] <= r1.ru_minflt, (r0.ru_minflt, t1, r1.ru_minflt)
    assert r0.ru_majflt <= t1[3] <= r1.ru_majflt, (r0.ru_majflt, t1, r1.ru_majflt)
    # each field from its place: a name with spaces and ") (" in it, and
    # fields 3-15 all different (utime 1400 and stime 1500 ticks at 100/s)
    line = "4242 (a) (b c) " + " ".join(str(100 * n) for n in range(3, 53))
    assert host.parse_stat(line, 100) == (14.0, 15.0, 1000, 1200), host.parse_stat(line, 100)
    assert host.process_usage(None) is None and host.process_usage(2 ** 22 + 1) is None


@t("CPU throttling: a cgroup's cpu.stat, v2 in µs and v1 in ns")
def _():
    v2 = ("usage_usec 1200\nuser_usec 1000\nsystem_usec 200\nnr_periods 30\n"
          "nr_throttled 4\nthrottled_usec 81234\nnr_bursts 0\nburst_usec 0\n")
    assert host.parse_cpu_stat(v2) == (4, 81234), host.parse_cpu_stat(v2)
    v1 = "nr_periods 30\nnr_throttled 2\nthrottled_time 5000000\n"
    assert host.parse_cpu_stat(v1) == (2, 5000), host.parse_cpu_stat(v1)
    # no CPU controller (or no quota ever set): no answer, not zero
    assert host.parse_cpu_stat("usage_usec 5\nuser_usec 3\n") is None
    assert host.parse_cpu_stat("nr_throttled 1\n") is None
    assert host.Cgroups.cpu_throttled({"cpu": "/nonexistent"}) is None


@t("accelerator: read from run-guest.sh's own lines, not from /dev/kvm")
def _():
    out = ("run-guest: r1-offload-r0-vm0: tcg, 1 vCPU, 384 MiB, timeout 900s, console x.log\n"
           "some QEMU noise (kvm)\n"
           "run-guest: r1-offload-r0-vm0: command started 3.21s after kernel start (tcg)\n")
    assert common.launcher_accel(out) == "tcg"
    assert common.launcher_accel("run-guest: g: kvm, 2 vCPU, 256 MiB, timeout 60s\n") == "kvm"
    assert common.launcher_accel(
        "run-guest: g: command started 0.50s after kernel start (kvm)\n") == "kvm"
    # no verdict line (the launcher died early) or an unrelated mention: unknown
    assert common.launcher_accel("") is None and common.launcher_accel(None) is None
    assert common.launcher_accel("qemu-system-x86_64: -accel kvm: no such device\n") is None
    assert common.runs_accel(["tcg", "tcg", None]) == "tcg"
    assert common.runs_accel(["kvm", "tcg"]) == "mixed"
    assert common.runs_accel([None]) == "unknown" and common.runs_accel([]) == "unknown"


@t("accelerator: the summary takes it from the runs' guests, even with /dev/kvm")
def _():
    from replay import summary
    d = tempfile.mkdtemp()
    open(os.path.join(d, "events.jsonl"), "w").close()
    args = types.SimpleNamespace(sample_ms=100, trajectory=os.path.join(ROOT, "tests/data/x.jsonl"),
                                 vms=1, repeats=1, mem=384, cpu_quota=0.5, transport="vsock")
    bench = types.SimpleNamespace(args=args, outdir=d, run_id="t", steps=[], vmnapd_lost=0,
                                  cgroups=types.SimpleNamespace(describe=lambda: "v1"))
    runs = [{"cohort": "baseline", "rep": 0, "accel": {"vm0": "tcg"}},
            {"cohort": "offload", "rep": 0, "accel": {"vm0": "tcg"}}]
    real_exists, real_plot = os.path.exists, summary.plot
    os.path.exists = lambda p: True if p == "/dev/kvm" else real_exists(p)  # a PVM host
    summary.plot = lambda *a: None
    try:
        s, _v = summary.write_outputs(bench, runs, [], [], {})
        assert s["host"]["accel"] == "tcg", s["host"]
        runs[1]["accel"] = {"vm0": None}
        s, _v = summary.write_outputs(bench, runs[1:], [], [], {})
        assert s["host"]["accel"] == "unknown", s["host"]
    finally:
        os.path.exists, summary.plot = real_exists, real_plot
        import shutil
        shutil.rmtree(d)


@t("table: a cohort's deliveries after an offload and after a pause, each with its p99")
def _():
    import contextlib
    import io
    import shutil
    d = tempfile.mkdtemp()
    cohorts = {"baseline": {"runs": 1, "delivery_p99_ms": 9.4},
               "pause": {"runs": 1, "delivery_paused_n": 19, "delivery_paused_p99_ms": 9.137},
               "offload": {"runs": 1, "delivery_offloaded_n": 17, "delivery_offloaded_p99_ms": 12.788,
                           "delivery_paused_n": 1, "delivery_paused_p99_ms": 17.724},
               "swap": {"runs": 0, "skipped": "not in --cohorts"}}
    with open(os.path.join(d, "summary.json"), "w") as f:
        json.dump({"vms": 1, "repeats": 1, "trajectory": "t.jsonl", "trajectory_steps": 3,
                   "trajectory_wait_s": 1.0, "run_id": "t", "cohorts": cohorts}, f)
    with open(os.path.join(d, "validation.json"), "w") as f:
        json.dump({"measurement_integrity_passed": True, "max_sampling_gap_ms": 1, "lost_events": 0,
                   "lost_events_vmnapd": 0, "checks_total": 2, "checks_failed": 0}, f)
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            assert cli.cmd_table(types.SimpleNamespace(run_dir=d)) == 0
    finally:
        shutil.rmtree(d)
    lines = out.getvalue().splitlines()
    head = next(ln for ln in lines if ln.startswith("| cohort |"))
    titles = [c.strip() for c in head.strip("|").split("|")]
    rows = {ln.split("|")[1].strip(): [c.strip() for c in ln.strip("|").split("|")]
            for ln in lines if ln.startswith("| ") and not ln.startswith("| cohort |")}
    col = {k: titles.index(k) for k in ("deliv. after offload", "deliv. p99 after offload ms",
                                         "deliv. after pause", "deliv. p99 after pause ms")}
    pause, off, base = rows["pause"], rows["offload"], rows["baseline"]
    assert [pause[col[k]] for k in col] == ["-", "-", "19", "9.1"], pause
    assert [off[col[k]] for k in col] == ["17", "12.8", "1", "17.7"], off
    assert [base[col[k]] for k in col] == ["-"] * 4, base
    assert "skipped: not in --cohorts" in rows["swap"][1], rows["swap"]


@t("sched trace: a resume's RESUMED->RESUME_ACK split by what QEMU's threads did")
def _():
    # perf script lines (comm pid/tid [cpu] time: event: fields) around one
    # resume: RESUMED sent at 10.000 s, RESUME_ACK at 10.008 s.  The vCPU
    # (tid 11) sleeps until the main thread (10), woken at 10.001 but
    # runnable until 10.004, wakes it at 10.005; it runs to 10.006, is
    # preempted (runnable) to 10.007 and runs on.
    sw = ("{c} {p}/{t} [000] {ts}: sched:sched_switch: prev_comm=x prev_pid={a} "
          "prev_prio=120 prev_state={st} ==> next_comm=y next_pid={b} next_prio=120")
    wk = "{c} {p}/{t} [001] {ts}: sched:sched_wakeup: comm=z pid={a} prio=120 target_cpu=000"
    lines = [
        sw.format(c="q", p=10, t=11, ts="9.999000", a=11, st="S", b=0),
        sw.format(c="q", p=10, t=10, ts="9.999500", a=10, st="S", b=0),
        wk.format(c="python3", p=5, t=5, ts="10.001000", a=10),
        sw.format(c="python3", p=5, t=5, ts="10.004000", a=5, st="S", b=10),
        wk.format(c="q", p=10, t=10, ts="10.005000", a=11),
        sw.format(c="swapper", p=0, t=0, ts="10.005000", a=0, st="R", b=11),
        sw.format(c="q", p=10, t=10, ts="10.005500", a=10, st="S", b=0),
        sw.format(c="q", p=10, t=11, ts="10.006000", a=11, st="R", b=7),
        sw.format(c="w", p=7, t=7, ts="10.007000", a=7, st="S", b=11),
        "garbage line",
        sw.format(c="q", p=10, t=11, ts="10.009000", a=11, st="S", b=0),
    ]
    states = schedtrace.thread_states(lines, {10, 11})
    assert states[11][0] == (9999000000, "sleep"), states[11]
    d = tempfile.mkdtemp()
    try:
        ev = os.path.join(d, "events.jsonl")
        with open(ev, "w") as f:
            for vm, acked in (("vm0", True), ("vm0", False), ("vm1", True)):
                f.write(json.dumps({"type": "resume", "vm": vm, "acked": acked, "reason": "timer",
                                    "t_ns": 10_008_000_000 + 500_000, "total_ns": 9_000_000,
                                    "pre_resume_ns": 100_000, "vmm_ns": 300_000,
                                    "resumed_ns": 100_000, "ack_ns": 8_000_000,
                                    "fault_ns": 1_500_000}) + "\n")
            f.write(json.dumps({"type": "delivered", "vm": "vm0"}) + "\n")
        wins = schedtrace.resume_windows(ev, "vm0")
    finally:
        shutil.rmtree(d)
    assert wins == [("timer", 10_000_000_000, 10_008_000_000, 1_500_000)], wins
    rows = schedtrace.ack_rows(states, [11], 10, wins)
    ack, run, runnable, sleep, halt, main_runnable = rows[0]
    assert abs(ack - 8) < 1e-9 and abs(run - 2) < 1e-9, rows
    assert abs(runnable - 1) < 1e-9 and abs(sleep - 5) < 1e-9, rows
    assert abs(halt - 3.5) < 1e-9 and abs(main_runnable - 3) < 1e-9, rows
    b = schedtrace.breakdown(rows + [(1.0, 0.5, 0.0, 0.5, 0.0, 0.0)])
    assert b["sched_ack_resumes"] == 2 and b["sched_ack_slow"] == 1, b
    assert (b["sched_ack_slow_vcpu_sleep"], b["sched_ack_slow_vcpu_halt"],
            b["sched_ack_slow_main_runnable"], b["sched_ack_slow_vcpu_runnable"],
            b["sched_ack_slow_vcpu_run"]) == (1, 1, 1, 1, 1), b
    assert set(b) == set(schedtrace.FIELDS), set(b) ^ set(schedtrace.FIELDS)
    assert schedtrace.breakdown([])["sched_ack_vcpu_run_p99_ms"] is None


sys.exit(tap.done())
