#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""ktap2tap.py - flatten KUnit's nested KTAP into one TAP line per case.

Reads KTAP on stdin: suites at the top level, their cases indented below
("    ok 1 case_name", "    not ok 2 case_name", "# SKIP" directives).
Prints "ok N - suite.case" for every case, then a plan, and exits 1 when
any case failed, when a suite reported failure without a failing case, or
when no case ran at all (an empty KTAP is a failure, not a pass).
"""
import re
import sys

LINE = re.compile(r"^(\s*)(not ok|ok)\s+(\d+)\s+(?:-\s*)?([^#]*?)\s*(#.*)?$")
NAME = re.compile(r"^\s*# Subtest:\s*(\S+)")


def main():
    results = []
    suite_fail = []
    current = None
    for raw in sys.stdin:
        line = raw.rstrip("\n")
        m = NAME.match(line)
        if m and len(line) - len(line.lstrip()) <= 4:
            current = m.group(1)
            continue
        m = LINE.match(line)
        if not m:
            continue
        indent, status, _, name, directive = m.groups()
        directive = directive or ""
        depth = len(indent.expandtabs(8)) // 4
        if depth == 0:
            if status == "not ok":
                suite_fail.append(name)
            current = None
            continue
        if depth == 1:
            results.append((status, f"{current or 'kunit'}.{name}", directive))
        # deeper levels are parameterised sub-cases: summarised by depth 1
    n = 0
    failed = 0
    for status, name, directive in results:
        n += 1
        if status == "not ok" and "SKIP" not in directive.upper():
            failed += 1
        print(f"{status} {n} - {name}{(' ' + directive) if directive else ''}")
    suites_with_failed_case = {name.split('.')[0] for st, name, _ in results
                               if st == "not ok"}
    for s in suite_fail:
        if s not in suites_with_failed_case:
            n += 1
            failed += 1
            print(f"not ok {n} - {s} (suite failed)")
    if n == 0:
        print("not ok 1 - no KUnit case ran")
        n, failed = 1, 1
    print(f"1..{n}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
