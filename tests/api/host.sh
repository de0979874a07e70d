#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# host.sh - GET /host (admission figures) and the memory pressure options
# of a real vmnapd: without a cgroup the watch is off and /host still
# shows the host's memory; with --pressure-cgroup on a v1 memory cgroup
# the test makes, /host shows its usage, limit and headroom, and a
# pressure.cgroup in the config does the same; a cgroup vmnapd cannot read
# stops it at start.  TAP output.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
VMNAPD=$BUILD/vmnapd
[ -x "$VMNAPD" ] || { echo "1..0 # SKIP $VMNAPD not built"; exit 0; }
command -v curl >/dev/null || { echo "1..0 # SKIP curl not installed"; exit 0; }

T=$(mktemp -d /tmp/vmnap-host.XXXXXX)
RUN=$T/run
SOCK=$RUN/api.sock
CG=
PID=
cleanup() {
	[ -n "$PID" ] && { kill "$PID" 2>/dev/null; wait "$PID" 2>/dev/null; }
	[ -n "$CG" ] && rmdir "$CG" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT

n=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
nok() { n=$((n + 1)); echo "not ok $n - $*"; }
check() { local d=$1; shift; if "$@"; then ok "$d"; else nok "$d"; fi; }
get() { curl -s -m 10 --unix-socket "$SOCK" "http://localhost$1"; }
jget() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(eval("d"+sys.argv[1]))' "$1"; }
start() { # ARGS...: vmnapd in the background, wait for api.sock
	local i
	"$VMNAPD" -r "$RUN" -s "$T/store" -l warn "$@" >"$T/vmnapd.log" 2>&1 &
	PID=$!
	for ((i = 0; i < 100; i++)); do [ -S "$SOCK" ] && return 0; sleep 0.05; done
	return 1
}
stop() { kill "$PID" 2>/dev/null; wait "$PID" 2>/dev/null; PID=; }

start
check "vmnapd runs without a pressure cgroup" [ -S "$SOCK" ]
H=$(get /host)
check "GET /host: the watch is off" [ "$(jget '["pressure"]["enabled"]' <<<"$H")" = False ]
check "GET /host: host memory from /proc/meminfo" \
	[ "$(jget '["host"]["mem_total_bytes"] > 0 and "host_headroom_bytes" in d["admission"]' <<<"$H")" = True ]
check "GET /host: no VMs, nothing reclaimable" \
	[ "$(jget '["totals"]["reclaimable_bytes"] + d["totals"]["expected_return_bytes"] + len(d["vms"])' <<<"$H")" = 0 ]
check "/metrics: no pressure metrics without a cgroup" \
	[ "$(get /metrics | grep -c '^vmnap_memory_pressure')" = 0 ]
check "vmnapctl host prints GET /host" \
	[ "$("$BUILD/vmnapctl" -s "$SOCK" host | jget '["pressure"]["enabled"]')" = False ]
check "POST /host is 405" [ "$(curl -s -o /dev/null -w '%{http_code}' -m 10 --unix-socket "$SOCK" -X POST http://localhost/host)" = 405 ]
stop

MEMV1=/sys/fs/cgroup/memory
if [ "$(id -u)" = 0 ] && [ -f $MEMV1/memory.limit_in_bytes ] && mkdir "$MEMV1/vmnap-host.$$" 2>/dev/null; then
	CG=$MEMV1/vmnap-host.$$
	echo $((512 << 20)) >"$CG/memory.limit_in_bytes"
	start --pressure-cgroup "$CG"
	for ((i = 0; i < 100; i++)); do
		H=$(get /host)
		[ "$(jget '["pressure"].get("samples", 0)' <<<"$H" 2>/dev/null)" != 0 ] && break
		sleep 0.05
	done
	check "--pressure-cgroup: v1 cgroup watched, level normal" \
		[ "$(jget '["pressure"]["cgroup_version"], d["pressure"]["level"]' <<<"$H")" = "('v1', 'normal')" ]
	check "GET /host: the cgroup's limit and its headroom" \
		[ "$(jget '["pressure"]["reading"]["limit_bytes"] == 512 << 20 and d["admission"]["cgroup_headroom_bytes"] > 0' <<<"$H")" = True ]
	check "/metrics: the level and the cgroup's limit" \
		[ "$(get /metrics | grep -cE '^vmnap_memory_pressure_level 0$|^vmnap_pressure_cgroup_limit_bytes 536870912$')" = 2 ]
	stop
	printf '{"pressure": {"cgroup": "%s", "interval_ms": 50}}\n' "$CG" >"$T/conf.json"
	start -c "$T/conf.json"
	for ((i = 0; i < 100; i++)); do
		H=$(get /host)
		[ "$(jget '["pressure"].get("samples", 0)' <<<"$H" 2>/dev/null)" != 0 ] && break
		sleep 0.05
	done
	check "pressure.cgroup in the config turns the watch on" \
		[ "$(jget '["pressure"]["cgroup"]' <<<"$H")" = "$CG" ]
	stop
	printf '{"pressure": {"cgroup": "%s", "enabled": false}}\n' "$CG" >"$T/conf.json"
	start -c "$T/conf.json"
	check "\"enabled\": false keeps it off" [ "$(get /host | jget '["pressure"]["enabled"]')" = False ]
	stop
else
	echo "ok $((n + 1)) # SKIP no writable cgroup v1 memory controller"; n=$((n + 1))
fi

"$VMNAPD" -r "$RUN" -s "$T/store" --pressure-cgroup "$T/nonexistent" >"$T/bad.log" 2>&1 &
PID=$!
for ((i = 0; i < 100; i++)); do kill -0 "$PID" 2>/dev/null || break; sleep 0.05; done
wait "$PID"; rc=$?; PID=
bad_start() { [ "$rc" = 1 ] && grep -q 'memory pressure cgroup' "$T/bad.log"; }
check "an unreadable pressure cgroup stops vmnapd at start (exit $rc)" bad_start
echo "1..$n"
