#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""man-module.py - vmnap(4), the guest module's man page, from its source.

Usage: scripts/man-module.py kmod/main.c VERSION man/vmnap.4.in > vmnap.4

Every module_param_named(NAME, VAR, TYPE, PERM) in main.c with its
MODULE_PARM_DESC(NAME, "...") becomes one entry of PARAMETERS (writable
when PERM lets root write it); the rest of the page is man/vmnap.4.in, whose
@PARAMETERS@ and @VERSION@ are replaced.  A parameter without a
description is an error, so the page cannot silently miss one.
"""
import re
import sys


def roff(s):
    s = s.replace("\\", "\\e").replace("-", "\\-")
    return s if not s.startswith((".", "'")) else "\\&" + s


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__.strip().splitlines()[2])
    src = open(sys.argv[1]).read()
    version = open(sys.argv[2]).read().strip()
    tmpl = open(sys.argv[3]).read()
    params = re.findall(r"module_param(?:_named)?\(\s*(\w+)\s*,\s*\w+\s*,\s*(\w+)"
                        r"\s*,\s*(0[0-7]+)\s*\)", src)
    descs = dict(re.findall(r'MODULE_PARM_DESC\(\s*(\w+)\s*,\s*"((?:[^"\\]|\\.)*)"\s*\)',
                            src))
    if not params:
        sys.exit("man-module: no module_param in " + sys.argv[1])
    out = []
    for name, typ, perm in params:
        if name not in descs:
            sys.exit("man-module: parameter %s has no MODULE_PARM_DESC" % name)
        rw = "writable" if int(perm, 8) & 0o200 else "read-only"
        out += [".TP", "\\fB%s\\fR (%s, %s)" % (roff(name), typ, rw),
                roff(descs[name])]
    page = tmpl.replace("@PARAMETERS@", "\n".join(out)).replace("@VERSION@", version)
    sys.stdout.write(page)


main()
