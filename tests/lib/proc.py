# SPDX-License-Identifier: GPL-2.0-only
"""proc.py - the processes the Python tests start (vmnapd and its peers).

    import proc
    rc = proc.stop(p)                  # SIGTERM; SIGKILL after @timeout s
    proc.print_tail(path, "vmnapd")    # its log's last lines as TAP comments
"""
import signal
import subprocess


def stop(p, timeout=10):
    """End @p (a subprocess.Popen) if it runs: SIGTERM, then SIGKILL when it
    has not exited after @timeout seconds.  Its exit status."""
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
    try:
        return p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        return p.wait()


def print_tail(path, name, lines=30):
    """The last @lines lines of the log at @path as "# NAME: line"."""
    with open(path, errors="replace") as f:
        for line in f.read().splitlines()[-lines:]:
            print(f"# {name}: {line}")
