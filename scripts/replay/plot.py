# SPDX-License-Identifier: GPL-2.0-only
"""memory-over-time.png and delivery-cdf.png of a run, with gnuplot.
"""
import os
import shutil
import subprocess

from .common import COHORTS, MIB


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


def gnuplot_lines(outdir, name, title, ylabel, series):
    """<name>.png: one line per (label, [(t_s, y)]) series, with gnuplot (if
    present); the data under plot-data/."""
    series = [(label, pts) for label, pts in series if pts]
    if not shutil.which("gnuplot") or not series:
        return
    pdir = os.path.join(outdir, "plot-data")
    os.makedirs(pdir, exist_ok=True)
    plots = []
    for label, pts in series:
        path = os.path.join(pdir, f"{name}-{label}.dat")
        with open(path, "w") as f:
            for t, y in pts:
                f.write(f"{t} {y}\n")
        plots.append(f"'{path}' using 1:2 with lines lw 2 title '{label}'")
    script = ["set terminal png size 1000,600", "set key outside right", "set grid",
              f"set output '{os.path.join(outdir, name + '.png')}'", f"set title '{title}'",
              "set xlabel 'seconds since the cohort started'", f"set ylabel '{ylabel}'",
              "plot " + ", ".join(plots)]
    subprocess.run(["gnuplot"], input="\n".join(script) + "\n", text=True, capture_output=True)
