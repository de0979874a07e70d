# SPDX-License-Identifier: GPL-2.0-only
# tap.sh - TAP helpers for the shell tests (sourced).
#
#   TAP_NAME="vsock e2e"; . tests/lib/tap.sh
#   check "what is checked" command args...   # one TAP line from a status
#   ok "what" / not_ok "what"                 # a line decided by the caller
#   skip "reason"                             # the whole test cannot run: exit 77
#   tap_done                                  # the plan line; exit 1 on failures
# The plan comes last ("1..N" after the results), which TAP allows.

n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
not_ok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $*"; }
check() { local what=$1; shift; if "$@"; then ok "$what"; else not_ok "$what"; fi; }
skip() { echo "${TAP_NAME:-test} skipped: $*"; exit 77; }
tap_done() { echo "1..$n"; [ "$failed" -eq 0 ]; }
