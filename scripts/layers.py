#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""layers.py - check that a tree's layers point one way.

A layered tree is a folder whose subfolders are layers (the layer "." is
the files of the folder itself), listed with what each may use in a make
fragment (host-pager/src/layers.mk, kmod/layers.mk):

    VMNAPD_LAYERS := core coord pager ...    (any *_LAYERS := variable)
    LAYER_USES_<layer> := <layer> ...

Checked, each failure one line on stdout and counted:
  - the declared graph has no cycle (so arrows point one way);
  - every '#include "x"' in a layer's files names a header of that layer,
    of a layer it uses, or one outside the tree (uapi/...), never one of a
    layer it does not use;
  - with --obj, every symbol a layer's objects take from another layer
    (nm: undefined there, defined in that layer's objects) comes from a
    layer it uses: calls and data references, not just includes; and no
    two files of one layer call each other, directly or around a loop
    (a file's shared data, such as module parameters, makes no cycle).

Usage: layers.py --tree DIR [--obj DIR] [--tap]
Exit 0 when clean, 1 on a violation, 2 on bad usage or input.
"""
import argparse
import os
import re
import subprocess
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def read_layers(mk):
    layers, uses = None, {}
    text = open(mk).read().replace("\\\n", " ")
    for line in text.splitlines():
        line = line.split("#", 1)[0]
        m = re.match(r"^\s*([\w.]+)\s*:?=\s*(.*)$", line)
        if not m:
            continue
        var, val = m.group(1), m.group(2).split()
        if var.endswith("_LAYERS"):
            layers = val
        elif var.startswith("LAYER_USES_"):
            uses[var[len("LAYER_USES_"):]] = val
    if not layers:
        raise ValueError(f"{mk}: no *_LAYERS := list")
    for layer in layers:
        uses.setdefault(layer, [])
    for layer, deps in uses.items():
        for d in [layer] + deps:
            if d not in layers:
                raise ValueError(f"{mk}: LAYER_USES_{layer} names unknown layer {d!r}")
    return layers, uses


def find_cycle(layers, uses):
    state = {}

    def visit(n, path):
        state[n] = 1
        for d in uses[n]:
            if d == n:
                continue
            if state.get(d) == 1:
                return path[path.index(d):] + [d] if d in path else [n, d]
            if d not in state:
                c = visit(d, path + [d])
                if c:
                    return c
        state[n] = 2
        return None

    for layer in layers:
        if layer not in state:
            c = visit(layer, [layer])
            if c:
                return c
    return None


def layer_files(tree, layers, exts):
    out = {}
    for layer in layers:
        d = tree if layer == "." else os.path.join(tree, layer)
        if not os.path.isdir(d):
            continue
        out[layer] = sorted(os.path.join(d, f) for f in os.listdir(d)
                            if f.endswith(exts))
    return out


def check_includes(tree, layers, uses, problems):
    a_tree = tree
    headers = {}   # header base name -> layer
    for layer, files in layer_files(tree, layers, (".h",)).items():
        for f in files:
            headers[os.path.basename(f)] = layer
    for layer, files in layer_files(tree, layers, (".c", ".h")).items():
        allowed = set([layer] + uses[layer])
        for f in files:
            for m in INCLUDE.finditer(open(f, errors="replace").read()):
                inc = m.group(1)
                if "/" not in inc:
                    owner = headers.get(inc)
                else:   # a path from the repository root into the tree
                    rel = os.path.relpath(os.path.normpath(inc), os.path.normpath(a_tree))
                    if rel.startswith(".."):
                        owner = None
                    else:
                        first = rel.split(os.sep)[0]
                        owner = first if first in layers and os.sep in rel else "."
                        owner = owner if owner in layers else None
                if owner and owner not in allowed:
                    problems.append(f"include: {f} ({layer}) includes {inc} "
                                    f"of layer {owner}, which {layer} does not use")


def nm_symbols(obj):
    res = subprocess.run(["nm", "--no-sort", obj], capture_output=True, text=True)
    if res.returncode:
        raise ValueError(f"nm {obj}: {res.stderr.strip()}")
    defined, undefined = {}, set()   # defined: symbol -> is a function
    for line in res.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "U":
            undefined.add(parts[1])
        elif len(parts) == 3 and parts[1] in "TDBRVWGSCiu":
            defined[parts[2]] = parts[1] in "TWi"
    return defined, undefined


def check_symbols(tree, objdir, layers, uses, problems):
    # Only objects of sources that exist: a stale object of a moved or
    # removed file would claim its symbols for the wrong layer.
    objs = {layer: [o for o in files if os.path.exists(os.path.join(
                tree if layer == "." else os.path.join(tree, layer),
                os.path.basename(o)[:-2] + ".c"))]
            for layer, files in layer_files(objdir, layers, (".o",)).items()}
    if not any(objs.values()):
        raise ValueError(f"{objdir}: no objects; build first")
    owner, obj_of, is_fn, needs = {}, {}, {}, {}
    for layer, files in objs.items():
        for o in files:
            defined, undefined = nm_symbols(o)
            for s, fn in defined.items():
                owner[s] = layer
                obj_of[s] = o
                is_fn[s] = fn
            needs[o] = (layer, undefined)
    calls = {o: set() for o in needs}   # object -> objects of its own layer it uses
    for o, (layer, undefined) in sorted(needs.items()):
        allowed = set([layer] + uses[layer])
        for s in sorted(undefined):
            if s in owner and owner[s] not in allowed:
                problems.append(f"symbol: {o} ({layer}) uses {s} of layer "
                                f"{owner[s]}, which {layer} does not use")
            elif s in owner and owner[s] == layer and obj_of[s] != o and is_fn[s]:
                calls[o].add(obj_of[s])   # calls only: shared data is no cycle
    files = sorted(calls)
    cycle = find_cycle(files, {o: sorted(calls[o]) for o in files})
    if cycle:
        problems.append("call cycle between files of one layer: " +
                        " -> ".join(os.path.basename(o) for o in cycle))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tree", required=True, help="folder whose subfolders are layers")
    ap.add_argument("--layers", help="layer list (default TREE/layers.mk)")
    ap.add_argument("--obj", help="folder of the built objects, same layout")
    ap.add_argument("--tap", action="store_true", help="report as one TAP test")
    a = ap.parse_args()
    try:
        layers, uses = read_layers(a.layers or os.path.join(a.tree, "layers.mk"))
        problems = []
        cycle = find_cycle(layers, uses)
        if cycle:
            problems.append("cycle in the declared layers: " + " -> ".join(cycle))
        check_includes(a.tree, layers, uses, problems)
        if a.obj:
            check_symbols(a.tree, a.obj, layers, uses, problems)
    except (OSError, ValueError) as e:
        print(f"layers.py: {e}", file=sys.stderr)
        return 2
    for p in problems:
        print(("# " if a.tap else "") + p)
    if a.tap:
        print("1..1")
        print(("not ok" if problems else "ok") + f" 1 layers of {a.tree}: "
              f"{len(problems)} violation(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
