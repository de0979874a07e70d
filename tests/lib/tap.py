# SPDX-License-Identifier: GPL-2.0-only
"""tap.py - TAP output for the Python tests (the counterpart of tap.sh and
tap.h), as scripts/check.py reads it.

    import tap
    tap.ok(cond, "what", diag)   # "ok N - what" / "not ok N - what", then
                                 # each line of diag as "# ..."
    @tap.test("what")            # runs the function now: ok unless it raises
    def _(): ...                 # (the exception is the diagnostic)
    return tap.done()            # the plan "1..N" last; 1 on failures
"""
n = 0
failed = 0


def ok(cond, what, diag=None):
    global n, failed
    n += 1
    if not cond:
        failed += 1
    print(("ok" if cond else "not ok") + f" {n} - {what}", flush=True)
    if diag:
        for line in str(diag).splitlines():
            print(f"# {line}", flush=True)


def test(what):
    """Decorator: run the function at once, one result for it."""
    def run(fn):
        try:
            fn()
            ok(True, what)
        except Exception as e:  # noqa: BLE001 - a failed check
            ok(False, what, repr(e))
        return fn
    return run


def done():
    print(f"1..{n}", flush=True)
    return 1 if failed else 0
