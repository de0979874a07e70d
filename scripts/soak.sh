#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# The soak run of `make soak` (scripts/soak.mk): build-asan/tests/bench/soak
# (vmnapd's side with ASan+UBSan+LSan) drives SOAK_VMS mock VMMs (the plain
# $BUILD program and preload shim: an ASan runtime cannot be preloaded
# behind another library) through SOAK_CYCLES cycles.  LeakSanitizer runs
# at its exit (exit code 23 on a leak).  $BUILD/bench/soak.json: the
# program's figures plus the sanitizer verdict; the log next to it.
set -u
BUILD=${BUILD:-build}
ASAN_BUILD=${ASAN_BUILD:-build-asan}
cycles=${SOAK_CYCLES:-100} vms=${SOAK_VMS:-4} mib=${SOAK_MIB:-8}
out=$BUILD/bench/soak.json
log=$BUILD/bench/soak.log
mkdir -p "$BUILD/bench"
rm -f "$out" "$out.part"

echo "soak: $vms VMs x $cycles cycles x $mib MiB under ASan+LSan (log $log)"
MOCKVMM_EXE=$BUILD/tests/bench/soak BUILD=$BUILD \
ASAN_OPTIONS=detect_leaks=1:exitcode=23:quarantine_size_mb=16 \
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	"$ASAN_BUILD/tests/bench/soak" "$cycles" "$vms" "$mib" "$out.part" >"$log" 2>&1
rc=$?
grep -E '^(ok|not ok|# )' "$log"
leaks=false
grep -q 'ERROR: LeakSanitizer' "$log" && leaks=true
asan_errors=$(grep -c 'ERROR: AddressSanitizer\|runtime error:' "$log")
python3 - "$out.part" "$out" "$rc" "$leaks" "$asan_errors" <<'PY'
import json, sys
part, out, rc, leaks, errs = sys.argv[1:]
try:
    d = json.load(open(part))
except (OSError, ValueError):
    d = {}
d.update({"sanitizers": "asan+ubsan+lsan", "exit_status": int(rc),
          "lsan_leaks": leaks == "true", "asan_ubsan_errors": int(errs)})
json.dump(d, open(out, "w"), indent=1)
print(json.dumps(d))
PY
rm -f "$out.part"
if [ "$rc" -ne 0 ]; then
	echo "soak: FAILED (exit $rc; leaks: $leaks; see $log)" >&2
	exit 1
fi
echo "soak: passed ($out)"
