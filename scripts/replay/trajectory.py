# SPDX-License-Identifier: GPL-2.0-only
"""Trajectory files (tests/data/*.jsonl): a header line, then one step a line.
"""
import json

from .common import TRAJECTORY_FORMAT, TRAJECTORY_VERSION


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
