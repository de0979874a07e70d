# SPDX-License-Identifier: GPL-2.0-only
#
# common.sh - what the vmnap-gateway tests share (sourced after TAP_NAME is
# set, from the repository root): tap.sh, the prerequisites, a work
# directory $T (kept on failure or with KEEP=1) with vmnapd's run dir,
# socket and events file, PIDS killed at exit, and small helpers.
BUILD=${BUILD:-build}
GW=$BUILD/vmnap-gateway
VMNAPD=$BUILD/vmnapd
. tests/lib/tap.sh
for p in "$GW" "$VMNAPD"; do
	[ -x "$p" ] || skip "$p not built"
done
command -v curl >/dev/null || skip "curl not installed"
command -v python3 >/dev/null || skip "python3 not installed"

T=$(mktemp -d "/tmp/vmnap-$TAP_NAME.XXXXXX")
RUN=$T/run
API=$RUN/api.sock
EV=$T/events.jsonl
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	if [ "$failed" -gt 0 ] || [ -n "${KEEP:-}" ]; then
		echo "# logs kept in $T"
	else
		rm -rf "$T"
	fi
}
trap cleanup EXIT

wait_sock() { local i; for ((i = 0; i < 100; i++)); do [ -S "$1" ] && return 0; sleep 0.05; done; return 1; }
jget() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(eval("d"+sys.argv[1]))' "$1"; }
api() { curl -s -m 10 --unix-socket "$API" "$@"; }
# metric NAME LABELS [SOCKET]: the value of one gateway metric (SOCKET: $ADM)
metric() { curl -s -m 10 --unix-socket "${3:-$ADM}" http://gw/metrics | awk -v k="vmnap_gateway_$1{$2}" '$1 == k { print $2 }'; }
# hdr NAME: a header of the last response saved in $T/hdr
hdr() { tr -d '\r' <"$T/hdr" | awk -v k="$(echo "$1" | tr A-Z a-z)" -F': ' 'tolower($1) == k { print substr($0, length($1) + 3) }'; }
# until_ok SECONDS CMD...: poll CMD (bounded) until it succeeds
until_ok() { local d=$((SECONDS + $1)); shift; while [ "$SECONDS" -lt "$d" ]; do "$@" && return 0; sleep 0.05; done; "$@"; }
