#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""gen-trajectory.py - write the replay trajectories' steps (no expectations).

The commands are those an SWE agent runs to fix tests/data/replay-project:
read files, grep, run the test suite, edit with sed and a heredoc, rerun the
tests, git diff.  The model waits before each command are drawn once from a
fixed-seed mixture shaped like the waits an agent sees between its tool
calls, so that every path of the coordinator is taken: about a sixth
are tiny (< 20 ms: cached or streamed answers), most are seconds of
generation (log-normal around 3.5 s), and about one in seven is a long
generation or queueing stall (> 10 s); the draw is scaled so the mean is
5 s.  Expected exit codes and digests are then filled in by running the
trajectory once in a guest:

    tests/data/gen-trajectory.py
    scripts/replay.py record --transport tty --trajectory tests/data/replay-full.jsonl
    scripts/replay.py record --transport tty --trajectory tests/data/replay-tiny.jsonl
"""
import json
import math
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = 7
MEAN_WAIT_MS = 5000
TINY_SHARE, LONG_SHARE = 0.16, 0.14

TESTS = ("python3 -m unittest discover -s tests -t . 2>&1 "
         "| sed -E 's/^(Ran [0-9]+ tests?) in [0-9.]+s$/\\1/'")

FULL = [
    "ls -la --time-style=+ | awk '{print $1, $NF}'",
    "cat README.md",
    "git log --oneline | wc -l",
    "find . -name '*.py' -not -path './.git/*' | sort",
    "cat inventory/__init__.py",
    "cat inventory/models.py",
    "cat inventory/pricing.py",
    TESTS,
    "cat tests/test_pricing.py",
    "grep -n 'DISCOUNT_TIERS' -r inventory tests | LC_ALL=C sort",  # readdir order varies
    "grep -n 'quantity >' inventory/pricing.py",
    "sed -n '8,14p' inventory/pricing.py",
    "python3 -c 'from inventory.pricing import discount_percent as d; print([d(q) for q in (9, 10, 11, 50, 100)])'",
    "sed -i 's/if quantity > min_qty:/if quantity >= min_qty:/' inventory/pricing.py",
    "git diff --stat",
    "python3 -c 'from inventory.pricing import discount_percent as d; print([d(q) for q in (9, 10, 11, 50, 100)])'",
    TESTS,
    "cat inventory/report.py",
    "grep -rn 'format_cents' inventory",
    "python3 -c 'from inventory import *; i = Inventory(); i.add(Item(\"A1\", \"bolt\", 333), 3); print(order_total(i, [(\"A1\", 12)]))'",
    "grep -n 'return item.price_cents' inventory/pricing.py",
    "sed -i 's|return item.price_cents \\* (100 - percent) / 100|return round(item.price_cents * (100 - percent) / 100)|' inventory/pricing.py",
    "sed -n '16,21p' inventory/pricing.py",
    "python3 -c 'from inventory import *; i = Inventory(); i.add(Item(\"A1\", \"bolt\", 333), 3); print(order_total(i, [(\"A1\", 12)]))'",
    "cat tests/test_report.py",
    "cat >> tests/test_pricing.py.new <<'PY'\n\n\nclass RoundingTest(unittest.TestCase):\n    def test_unit_price_is_whole_cents(self):\n        self.assertEqual(unit_price(Item(\"B2\", \"nut\", 333), 12), 316)\nPY",
    "head -n -3 tests/test_pricing.py > tests/tmp && cat tests/tmp tests/test_pricing.py.new && rm tests/tmp",
    "python3 - <<'PY'\nsrc = open('tests/test_pricing.py').read()\nadd = open('tests/test_pricing.py.new').read()\nmark = '\\n\\nif __name__'\nopen('tests/test_pricing.py', 'w').write(src.replace(mark, add + mark, 1))\nPY",
    "rm tests/test_pricing.py.new && tail -n 12 tests/test_pricing.py",
    TESTS,
    "grep -c 'def test_' tests/*.py",
    "python3 -c 'import inventory; print(inventory.__all__)'",
    "sed -i 's/^Known issue (what the recorded trajectory fixes)/Fixed issue (by the recorded trajectory)/' README.md",
    "git status --short",
    "grep -n 'round(' inventory/*.py",
    "python3 -m unittest tests.test_pricing -v 2>&1 | grep -E '(ok|FAIL|ERROR)$' | sort",
    "wc -l inventory/*.py tests/*.py",
    "git diff --stat",
    TESTS,
    "git diff inventory/pricing.py",
    "git add -A && git -c user.name=agent -c user.email=agent@localhost diff --cached --stat",
]

TINY = [
    ("cat inventory/pricing.py", 5),
    ("sed -i 's/if quantity > min_qty:/if quantity >= min_qty:/' inventory/pricing.py", 400),
    (TESTS, 1500),
    ("grep -n 'min_qty' inventory/pricing.py", 12),
    ("git diff --stat", 1200),
]


def draw_waits(n, rng):
    waits = []
    for _ in range(n):
        u = rng.random()
        if u < TINY_SHARE:
            waits.append(rng.uniform(1, 19))
        elif u < TINY_SHARE + LONG_SHARE:
            waits.append(rng.uniform(10500, 22000))
        else:
            waits.append(math.exp(rng.gauss(math.log(3500), 0.5)))
    # Scale the middle band so the mean is MEAN_WAIT_MS, the tails untouched.
    fixed = sum(w for w in waits if w < 20 or w > 10000)
    mid = [i for i, w in enumerate(waits) if 20 <= w <= 10000]
    scale = (MEAN_WAIT_MS * n - fixed) / sum(waits[i] for i in mid)
    for i in mid:
        waits[i] = min(waits[i] * scale, 9999)
    return [int(round(w)) for w in waits]


def write(path, name, steps, note):
    header = {"format": "vmnap-trajectory", "version": 1, "name": name,
              "workspace": "/srv/project", "note": note,
              "waits": f"gen-trajectory.py seed {SEED}: {TINY_SHARE:.0%} < 20 ms, "
                       f"{LONG_SHARE:.0%} > 10 s, rest log-normal; mean {MEAN_WAIT_MS} ms"}
    with open(path, "w") as f:
        f.write(json.dumps(header) + "\n")
        for i, (cmd, wait) in enumerate(steps, 1):
            f.write(json.dumps({"step": i, "wait_ms": wait, "cmd": cmd}) + "\n")


def main():
    rng = random.Random(SEED)
    waits = draw_waits(len(FULL), rng)
    write(os.path.join(HERE, "replay-full.jsonl"), "inventory-discount-fix",
          list(zip(FULL, waits)),
          "an SWE agent fixing the bulk-discount tier and rounding bugs")
    write(os.path.join(HERE, "replay-tiny.jsonl"), "inventory-tiny", TINY,
          "five steps with short waits, for make check")
    print(f"full: {len(FULL)} steps, waits {sum(waits) / 1000:.1f} s, "
          f"mean {sum(waits) / len(waits):.0f} ms, "
          f"{sum(w < 20 for w in waits)} < 20 ms, {sum(w > 10000 for w in waits)} > 10 s")


if __name__ == "__main__":
    main()
