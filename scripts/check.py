#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""check.py - run every test layer of vmnap and count results.

Tests are listed in tests/<layer>/*.list (layers and files sorted by name;
one test command a line: "<name> <timeout-seconds> <command...>", run from the repo root by
/bin/sh; a line starting with '#' is a comment).  A command reports through TAP on stdout
("ok N ...", "not ok N ...", "ok N ... # SKIP reason", a plan "1..0 # SKIP reason" for a test
that cannot run at all — counted as one skip, never as a pass; nested/indented
KTAP lines are only echoed) or, when it prints no TAP, through its exit
status: 0 passed, 77 skipped (reason on its last output line), else failed.
A command that exits non-zero after TAP lines adds one failure unless a
"not ok" already accounts for it, and so does a TAP plan "1..N" that the
results do not match.  A timeout is a failure.

A line "@warm <name> <command...>" names a command that fills a cache test
<name> needs (the KUnit UML kernel build, minutes on a cold cache): when
<name> is selected, it starts in the background at once, at SCHED_IDLE
(it takes only CPU time the tests leave), output to
$BUILD/check/warm-<name>.log.  It must be idempotent and hold the lock
the test takes, so the test waits for it; the test, not the warmer, is
counted.

Output: each command's output goes to $BUILD/check/<name>.log; a line per
result is printed; the last line is exactly
    check: N passed, M failed, K skipped
and the exit status is 0 only when M == 0.
Environment: CHECK_FILTER=<regex> runs only matching test names;
CHECK_TESTS=<dir> reads the lists from <dir> instead of tests/ (the
runner's own test, tests/layout/check-runner.sh).
"""
import os, re, signal, subprocess, sys, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("BUILD", "build")
LOGDIR = os.path.join(ROOT, BUILD, "check")
TAP = re.compile(r"^(not ok|ok)\b\s*(\d+)?\s*-?\s*(.*)$")
SKIP = re.compile(r"#\s*SKIP\b\s*(.*)$", re.I)
PLAN = re.compile(r"^1\.\.(\d+)\b")
PLAN_NONE = re.compile(r"^1\.\.0\b(?:\s*#\s*(?:SKIP\b:?)?\s*(.*))?$", re.I)


def load_tests():
    tests = []
    warmers = {}
    tdir = os.environ.get("CHECK_TESTS") or os.path.join(ROOT, "tests")
    lists = []
    for layer in sorted(os.listdir(tdir)):
        ldir = os.path.join(tdir, layer)
        if os.path.isdir(ldir):
            lists += [os.path.join(ldir, n) for n in sorted(os.listdir(ldir))
                      if n.endswith(".list")]
    for lst in lists:
        with open(lst) as f:
            for raw in f:
                line = raw.strip()   # a command may contain '#'
                if line.startswith("#"):
                    line = ""
                if not line:
                    continue
                if line.startswith("@warm "):
                    _, name, cmd = line.split(None, 2)
                    warmers[name] = cmd
                    continue
                name, timeout, cmd = line.split(None, 2)
                tests.append((name, int(timeout), cmd))
    unknown = set(warmers) - {t[0] for t in tests}
    if unknown:
        sys.exit(f"check: @warm for no test: {' '.join(sorted(unknown))}")
    return tests, warmers


def start_warmer(name, cmd):
    os.makedirs(LOGDIR, exist_ok=True)
    log = open(os.path.join(LOGDIR, f"warm-{name}.log"), "w")

    def idle():
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))

    p = subprocess.Popen(["/bin/sh", "-c", cmd], cwd=ROOT, stdout=log,
                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                         start_new_session=True, preexec_fn=idle)
    log.close()
    print(f"  warm {name}: started in the background (log "
          f"{os.path.relpath(log.name, ROOT)})", flush=True)
    return p


def run(name, timeout, cmd, counts):
    os.makedirs(LOGDIR, exist_ok=True)
    log = os.path.join(LOGDIR, name + ".log")
    t0 = time.monotonic()
    p = subprocess.Popen(["/bin/sh", "-c", cmd], cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, errors="replace",
                         start_new_session=True)
    passed = failed = skipped = 0
    last = ""
    diag = ""   # last top-level TAP diagnostic ("# ..."): a skip's reason
    plan = None  # N of a top-level "1..N" plan
    timed_out = False

    def kill(*_):
        nonlocal timed_out
        timed_out = True
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    signal.signal(signal.SIGALRM, kill)
    signal.alarm(timeout)
    with open(log, "w") as lf:
        for line in p.stdout:
            lf.write(line)
            s = line.rstrip("\n")
            if s.strip():
                last = s.strip()
            if s.startswith("#"):
                diag = re.sub(r"^SKIP\b:?\s*", "", s.lstrip("# ").strip())
            m = PLAN_NONE.match(s)  # "1..0 # SKIP why": the whole test skipped
            if m:
                skipped += 1
                print(f"  SKIP {name}: {(m.group(1) or '').strip() or 'plan 1..0 (no tests run)'}")
                continue
            m = PLAN.match(s)
            if m:
                plan = int(m.group(1))
                continue
            m = TAP.match(s)  # top-level only: indented KTAP is a subtest
            if not m:
                continue
            desc = m.group(3)
            sk = SKIP.search(desc)
            if m.group(1) == "not ok" and not sk:
                failed += 1
                print(f"  FAIL {name}: {desc}")
            elif sk:
                # cmocka puts the test name in the directive and the reason
                # in the diagnostic line before it
                skipped += 1
                what = desc.split("#")[0].strip() or sk.group(1).strip()
                why = sk.group(1).strip() if desc.split("#")[0].strip() else diag
                print(f"  SKIP {name}: {what}: {why or 'no reason given'}")
            else:
                passed += 1
            diag = ""
    rc = p.wait()
    signal.alarm(0)
    dt = time.monotonic() - t0
    tap = passed + failed + skipped
    if timed_out:
        failed += 1
        print(f"  FAIL {name}: timed out after {timeout}s")
    elif tap == 0:
        if rc == 0:
            passed += 1
        elif rc == 77:
            skipped += 1
            print(f"  SKIP {name}: {last}")
        else:
            failed += 1
            print(f"  FAIL {name}: exit {rc}: {last}")
    elif rc != 0 and failed == 0:
        failed += 1
        print(f"  FAIL {name}: exit {rc} after {tap} TAP results: {last}")
    elif plan is not None and plan != tap:
        failed += 1   # died (or lost results) part way, whatever its status
        print(f"  FAIL {name}: planned {plan} results, got {tap}")
    print(f"{name}: {passed} passed, {failed} failed, {skipped} skipped "
          f"({dt:.1f}s, log {os.path.relpath(log, ROOT)})", flush=True)
    counts[0] += passed
    counts[1] += failed
    counts[2] += skipped


def main():
    flt = re.compile(os.environ.get("CHECK_FILTER", ""))
    counts = [0, 0, 0]
    tests, warmers = load_tests()
    tests = [t for t in tests if flt.search(t[0])]
    warming = [start_warmer(n, warmers[n]) for n, _, _ in tests if n in warmers]
    try:
        for name, timeout, cmd in tests:
            run(name, timeout, cmd, counts)
    except BaseException:
        for p in warming:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
        raise
    for p in warming:   # done unless its test took the lock first
        p.wait()
    print(f"check: {counts[0]} passed, {counts[1]} failed, {counts[2]} skipped")
    return 0 if counts[1] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
