# SPDX-License-Identifier: GPL-2.0-only
"""The vmnap trajectory replay benchmark, one module per concern.

Run it as scripts/replay.py (subcommands and outputs: replay/cli.py).

  common      constants and small helpers
  trajectory  loading and checking tests/data/*.jsonl
  agent       the in-guest exec agent's client (vsock and tty channels)
  host        cgroups, swap file and reclaim, /proc/vmstat
  vmnapd      vmnapd per cohort run, its control API and event figures
  guest       one QEMU guest
  sampler     fixed-interval memory sampling
  events      events.jsonl and lost-event counting
  runner      cohort runs (CohortRun) and the interleaved plan (Bench)
  summary     samples.csv, summary.json, validation.json
  plot        the gnuplot figures
  cli         run, record, probe, table
"""
