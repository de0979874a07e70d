#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# rejections.sh - hostile guest and handshake input against a real vmnapd,
# and where it shows: a fake guest (tests/api/fake_guest.py) forges a log
# line through HELLO's module version (newline, invalid UTF-8), sends
# malformed messages and reconnects in a storm; a local peer sends garbage
# to mem.sock.  Every rejection must be counted in /metrics and in
# GET /vms/NAME (or GET / for the daemon-wide ones), the log must keep one
# line per event, the event log valid JSON with every field, and the
# storm's log volume bounded.  TAP output.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
VMNAPD=$BUILD/vmnapd
[ -x "$VMNAPD" ] || { echo "1..0 # SKIP $VMNAPD not built"; exit 0; }
command -v curl >/dev/null || { echo "1..0 # SKIP curl not installed"; exit 0; }

T=$(mktemp -d /tmp/vmnap-rej.XXXXXX)
RUN=$T/run
SOCK=$RUN/api.sock
EV=$T/events.jsonl
LOG=$T/vmnapd.log
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	rm -rf "$T"
}
trap cleanup EXIT

. tests/lib/tap.sh
get() { curl -s -m 10 --unix-socket "$SOCK" "http://localhost$1"; }
jget() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(eval("d"+sys.argv[1]))' "$1"; }
metric() { get /metrics | awk -v k="$1" '$1 == k { print $2 }'; }
wait_for() { # TIMEOUT_S COMMAND...: poll until it succeeds
	local t=$1 i; shift
	for ((i = 0; i < t * 20; i++)); do "$@" && return 0; sleep 0.05; done
	return 1
}

"$VMNAPD" -r "$RUN" -s "$T/store" -e "$EV" -l info >"$LOG" 2>&1 &
PIDS+=($!)
VMNAPD_PID=$!
wait_for 10 test -S "$SOCK" || { not_ok "vmnapd starts: $(tail -n 3 "$LOG" | tr '\n' ' ')"; tap_done; exit 1; }

check "register vm1 with a unix guest link" \
	test "$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$SOCK" -X PUT \
		-d "{\"link_socket\": \"$T/vm1.link\"}" http://localhost/vms/vm1)" = 201
check "rejections start at zero" \
	test "$(get /vms/vm1 | jget '["rejections"]["bad_length"]')" = 0

# ---- a forged log line and invalid UTF-8 in HELLO's module version ----
python3 tests/api/fake_guest.py "$T/vm1.link" \
	--module-version "b'1\\n[ 1.0] I vm vm2: up\\xff\\xfe'" \
	--bad-messages 103 --exit-after-errors 103 >"$T/guest.log" 2>&1 &
PIDS+=($!)
GUEST=$!
check "fake guest got HELLO_ACK" wait_for 10 grep -q HELLO_ACK "$T/guest.log"
check "fake guest got 103 ERRORs" wait_for 10 test "$(grep -c '^ERROR 6' "$T/guest.log")" = 103
wait "$GUEST" 2>/dev/null
check "no log line impersonates another VM" \
	sh -c "! grep -q '^\[ 1.0\]' '$LOG' && ! grep -v 'guest HELLO' '$LOG' | grep -q 'vm vm2'"
check "the module version is logged escaped, on the HELLO line" \
	grep -qF 'guest HELLO: vmnap.ko 1\x0a[ 1.0] I vm vm2: up\xff\xfe,' "$LOG"
check "the log is valid UTF-8" python3 -c 'import sys; open(sys.argv[1], "rb").read().decode("utf-8")' "$LOG"
check "the link-up event has every field" python3 - "$EV" <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1], "rb")]
up = [e for e in ev if e.get("type") == "link" and e.get("vm") == "vm1" and e.get("state") == "up"]
assert up, "no link up event"
e = up[0]
assert e["module"] == "1\\x0a[ 1.0] I vm vm2: up\\xff\\xfe", e
assert "features" in e and "seq" in e and "t_ns" in e, e
PY

# ---- a client's bytes in a URL: the log line and the error reply ----
curl -s -g -m 10 --unix-socket "$SOCK" -X POST -o "$T/reply" \
	'http://localhost/vms/vm1/actions/%FF%0A[%20I%20vm%20vm2'
check "an error quoting invalid UTF-8 from the URL is still a JSON error" python3 - "$T/reply" <<'PY'
import json, sys
r = json.load(open(sys.argv[1], "rb"))
assert r["status"] == 404 and "\\xff\\x0a[ I vm vm2" in r["error"], r
PY
check "the request's log line is one line, escaped" \
	grep -qF 'api: POST /vms/vm1/actions/\xff\x0a[ I vm vm2 -> 404' "$LOG"

# ---- rejected guest messages: counted in both places ----
check "GET /vms/vm1: rejections.bad_length == 103" \
	wait_for 5 test "$(get /vms/vm1 | jget '["rejections"]["bad_length"]')" = 103
check "/metrics: vmnap_guest_rejected_total{reason=bad_length} 103" \
	test "$(metric 'vmnap_guest_rejected_total{vm="vm1",reason="bad_length"}')" = 103
check "/metrics: other reasons listed at zero" \
	test "$(metric 'vmnap_guest_rejected_total{vm="vm1",reason="bad_magic"}')" = 0

# ---- refused memory handshakes: counted in /metrics and GET / ----
python3 - "$RUN/mem.sock" <<'PY'
import socket, sys
for i in range(49):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    s.sendall(b"{\"vm\": \x01\n garbage %d" % i)
    s.settimeout(10)
    try:
        s.recv(4096)
    except OSError:
        pass
    s.close()
PY
check "/metrics: vmnap_handshake_refused_total{reason=json} 49" \
	test "$(metric 'vmnap_handshake_refused_total{reason="json"}')" = 49
check "refused handshakes are logged within a budget (<= 34 of 49 lines)" \
	test "$(grep -c ' W mem.sock: refused' "$LOG")" -le 34
check "GET /: rejections.mem_handshake.refused.json == 49" \
	test "$(get / | jget '["rejections"]["mem_handshake"]["refused"]["json"]')" = 49

# ---- a reconnect storm: refused beyond the limit, log volume bounded ----
lines_before=$(wc -l <"$LOG")
python3 tests/api/fake_guest.py "$T/vm1.link" --reconnects 300 >"$T/storm.log" 2>&1 &
PIDS+=($!)
STORM=$!
check "storm done" wait_for 30 grep -qs RECONNECTED "$T/storm.log"
kill "$STORM" 2>/dev/null; wait "$STORM" 2>/dev/null
refused=$(get /vms/vm1 | jget '["link"]["connects_refused"]')
connects=$(get /vms/vm1 | jget '["link"]["connects"]')
echo "# storm: $connects sessions, $refused refused"
check "reconnects beyond the limit refused" test "$refused" -ge 250
check "/metrics: connect_rate rejections = GET /vms/vm1" \
	test "$(metric 'vmnap_guest_rejected_total{vm="vm1",reason="connect_rate"}')" = "$refused"
storm_lines=$(( $(wc -l <"$LOG") - lines_before ))
echo "# storm: $storm_lines log lines"
check "the storm's log volume is bounded (<= 64 lines for 300 connections)" test "$storm_lines" -le 64
check "suppressed lines are counted" \
	test "$(metric 'vmnap_log_lines_suppressed_total{vm="vm1"}')" -gt 0
check "link events stay within the budget" python3 - "$EV" <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1], "rb")]
link = [e for e in ev if e.get("type") == "link" and e.get("vm") == "vm1"]
assert len(link) <= 40, len(link)
PY

check "vmnapd still alive" kill -0 "$VMNAPD_PID"
kill "$VMNAPD_PID"; wait "$VMNAPD_PID"
check "vmnapd exits 0 on SIGTERM" test $? -eq 0
tap_done
