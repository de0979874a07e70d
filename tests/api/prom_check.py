#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""prom_check.py - strict check of a Prometheus text exposition (format
0.0.4) on stdin, plus vmnap's naming rules.  Prints one line per problem
and exits 1 when there is any, else prints a summary and exits 0.

Format: every line is a "# HELP name text", a "# TYPE name type" (once per
family, before its samples, after its HELP), or a sample
'name{l="v",...} value' whose family was declared; metric and label names
match the grammar, label values are escaped, values are floats (or +Inf,
-Inf, NaN); no series appears twice; families are contiguous.
Histograms: _bucket series with le, ascending le ending in +Inf,
cumulative (non-decreasing) counts, +Inf bucket == _count, a _sum.
Counters end in _total.  vmnap's rules: at most MAX_BUCKETS buckets per
histogram (bounds chosen from measured ranges, not every power of 2), base units (no _ms, _us,
_milliseconds, _microseconds, _gib, _mib, _kib in a name), errors are
counted by their own metric (no label value "error" on a *_calls_total),
vmnap_build_info{version} is 1.
"""
import math
import re
import sys

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
SAMPLE = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)\Z")
LABEL_PAIR = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"')
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}
MAX_BUCKETS = 16  # + the +Inf bucket
NON_BASE = re.compile(r"_(ms|us|milliseconds|microseconds|gib|mib|kib)(_|\Z)")

problems = []


def bad(lineno, msg):
    problems.append("line %d: %s" % (lineno, msg))


def parse_labels(lineno, text):
    """'{a="1",b="2"}' -> dict, strictly."""
    inner = text[1:-1]
    labels, pos = {}, 0
    while pos < len(inner):
        m = LABEL_PAIR.match(inner, pos)
        if not m:
            bad(lineno, "bad label syntax at %r" % inner[pos:pos + 20])
            return None
        if m.group(1) in labels:
            bad(lineno, "label %s twice" % m.group(1))
        labels[m.group(1)] = m.group(2)
        pos = m.end()
        if pos < len(inner):
            if inner[pos] != ",":
                bad(lineno, "expected ',' in labels at %r" % inner[pos:pos + 20])
                return None
            pos += 1
            if pos == len(inner):
                bad(lineno, "trailing ',' in labels")
    return labels


def parse_value(lineno, text):
    if text in ("+Inf", "-Inf", "NaN"):
        return float(text.replace("Inf", "inf").replace("NaN", "nan"))
    try:
        return float(text)
    except ValueError:
        bad(lineno, "value %r is not a float" % text)
        return None


def family_of(name, types):
    if name in types:
        return name
    for suffix in ("_bucket", "_sum", "_count"):
        if name.endswith(suffix) and types.get(name[: -len(suffix)]) in ("histogram", "summary"):
            return name[: -len(suffix)]
    return None


def main():
    text = sys.stdin.read()
    if not text.endswith("\n"):
        bad(0, "the exposition does not end with a newline")
    helps, types, done, series = {}, {}, set(), set()
    samples = {}  # family -> [(name, labels, value)]
    current = None
    for lineno, line in enumerate(text.split("\n")[:-1], 1):
        if line.startswith("#"):
            parts = line.split(" ", 3)
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                name = parts[2]
                if not NAME.match(name):
                    bad(lineno, "bad metric name %r" % name)
                if parts[1] == "HELP":
                    if name in helps:
                        bad(lineno, "HELP %s twice" % name)
                    helps[name] = parts[3] if len(parts) == 4 else ""
                else:
                    if name in types:
                        bad(lineno, "TYPE %s twice" % name)
                    if len(parts) != 4 or parts[3] not in TYPES:
                        bad(lineno, "bad TYPE line %r" % line)
                    if name in samples:
                        bad(lineno, "TYPE %s after its samples" % name)
                    types[name] = parts[3] if len(parts) == 4 else "untyped"
                    if name not in helps:
                        bad(lineno, "TYPE %s without a HELP before it" % name)
                continue
            continue  # a comment
        if not line:
            bad(lineno, "empty line")
            continue
        m = SAMPLE.match(line)
        if not m:
            bad(lineno, "not a sample line: %r" % line)
            continue
        name, ltext, vtext = m.groups()
        labels = parse_labels(lineno, ltext) if ltext else {}
        value = parse_value(lineno, vtext)
        if labels is None or value is None:
            continue
        fam = family_of(name, types)
        if fam is None:
            bad(lineno, "sample %s has no TYPE declared before it" % name)
            continue
        if fam != current:
            if fam in done:
                bad(lineno, "family %s is not contiguous" % fam)
            if current:
                done.add(current)
            current = fam
        key = (name, tuple(sorted(labels.items())))
        if key in series:
            bad(lineno, "series %s%s twice" % (name, ltext or ""))
        series.add(key)
        samples.setdefault(fam, []).append((name, labels, value))

    for fam, kind in types.items():
        if NON_BASE.search(fam):
            bad(0, "%s: not in base units (seconds, bytes)" % fam)
        if kind == "counter" and not fam.endswith("_total"):
            bad(0, "counter %s does not end in _total" % fam)
        rows = samples.get(fam, [])
        if fam.endswith("_calls_total"):
            for _, labels, _ in rows:
                if "error" in labels.values():
                    bad(0, "%s: errors belong in their own counter, not a label" % fam)
        if kind == "counter":
            for name, labels, v in rows:
                if v < 0 or math.isnan(v):
                    bad(0, "counter %s%s is %r" % (name, labels, v))
        if kind == "histogram":
            check_histogram(fam, rows)
    info = samples.get("vmnap_build_info", [])
    if types.get("vmnap_build_info") != "gauge" or len(info) != 1 or \
            not info[0][1].get("version") or info[0][2] != 1:
        bad(0, "no vmnap_build_info{version=...} 1 gauge")
    for p in problems:
        print(p)
    if problems:
        return 1
    print("prom_check: %d families, %d series, strict 0.0.4" % (len(types), len(series)))
    return 0


def check_histogram(fam, rows):
    groups = {}
    for name, labels, v in rows:
        rest = tuple(sorted((k, x) for k, x in labels.items() if k != "le"))
        g = groups.setdefault(rest, {"buckets": [], "sum": None, "count": None})
        if name == fam + "_bucket":
            if "le" not in labels:
                bad(0, "%s_bucket without le" % fam)
                continue
            g["buckets"].append((parse_value(0, labels["le"]), v))
        elif name == fam + "_sum":
            g["sum"] = v
        elif name == fam + "_count":
            g["count"] = v
        else:
            bad(0, "histogram %s has a plain sample %s" % (fam, name))
    for rest, g in groups.items():
        b = g["buckets"]
        where = "%s%s" % (fam, dict(rest))
        if not b or b[-1][0] != math.inf:
            bad(0, "%s: buckets do not end in le=+Inf" % where)
            continue
        if len(b) - 1 > MAX_BUCKETS:
            bad(0, "%s: %d buckets (at most %d)" % (where, len(b) - 1, MAX_BUCKETS))
        les = [x[0] for x in b]
        if any(x is None for x in les) or les != sorted(set(les)):
            bad(0, "%s: le not strictly ascending" % where)
        counts = [x[1] for x in b]
        if counts != sorted(counts):
            bad(0, "%s: bucket counts not cumulative" % where)
        if g["count"] is None or g["sum"] is None:
            bad(0, "%s: _sum or _count missing" % where)
        elif g["count"] != counts[-1]:
            bad(0, "%s: _count %r != +Inf bucket %r" % (where, g["count"], counts[-1]))
        elif g["sum"] < 0 or (g["count"] == 0 and g["sum"] != 0):
            bad(0, "%s: _sum %r impossible for _count %r" % (where, g["sum"], g["count"]))


if __name__ == "__main__":
    sys.exit(main())
