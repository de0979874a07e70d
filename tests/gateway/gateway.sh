#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# gateway.sh - vmnap-gateway between curl (the agent) and its fake model API
# (vmnap-gateway --fake-upstream tests/data/replay-tiny.jsonl), with a real
# vmnapd.  VM g1 is registered without a guest (unmanaged: waits do not
# pause it); VM p1 has a fake freezer directory and tests/api/fake_guest.py
# as its guest link peer, is managed, and really goes PAUSED while its
# request waits.  Bodies are compared byte for byte with the fake's own
# answer; waits are checked in vmnapd's events.jsonl.  TAP output.
set -u
cd "$(dirname "$0")/../.."
TAP_NAME="gateway"
. tests/gateway/common.sh
UP=$T/up.sock
# gw SOCK ARGS...: a request to a gateway listener; body to $T/out, headers to $T/hdr
gw() { local s=$1; shift; curl -s -m 30 --unix-socket "$s" -o "$T/out" -D "$T/hdr" -w '%{http_code}' "$@"; }
direct() { curl -s -m 30 --unix-socket "$UP" -o "$T/want" "$@"; }
# wait_ids: the gateway's wait ids in vmnapd's events, in order of wait_start
wait_ids() { python3 - "$EV" "$1" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    e = json.loads(l)
    if e.get("type") == "wait_start" and e.get("vm") == sys.argv[2] and e["wait"].startswith("gw-"):
        print(e["wait"])
PY
}
# lifecycle ID: "start<ready<delivered" when the wait went through all three in order
lifecycle() { python3 - "$EV" "$1" <<'PY'
import json, sys
seq = {}
for l in open(sys.argv[1]):
    e = json.loads(l)
    if e.get("wait") == sys.argv[2]:
        seq.setdefault(e["type"], e["seq"])
s, r, d = seq.get("wait_start"), seq.get("wait_ready"), seq.get("delivered")
print("start<ready<delivered" if s is not None and r is not None and d is not None and s < r < d
      else "start=%s ready=%s delivered=%s" % (s, r, d))
PY
}

"$VMNAPD" -r "$RUN" -s "$T/store" -e "$EV" -l debug >"$T/vmnapd.log" 2>&1 &
PIDS+=($!)
"$GW" --fake-upstream tests/data/replay-tiny.jsonl --listen fake="unix:$UP" >"$T/fake.log" 2>&1 &
PIDS+=($!)
wait_sock "$API" && wait_sock "$UP" || { not_ok "vmnapd and the fake upstream start"; echo "1..$n"; exit 1; }
api -X PUT http://vmnapd/vms/g1 -d '{}' >/dev/null
# g1 (unmanaged, no guest), p1 (managed, fake guest), nope (not registered in vmnapd)
CG=$T/fake-cgroup
mkdir -p "$CG" && echo THAWED >"$CG/freezer.state"
api -X PUT http://vmnapd/vms/p1 -d "{\"pause\": {\"backend\": \"freezer\", \"path\": \"$CG\"}, \"link_socket\": \"$T/p1.link\", \"policy\": {\"handoff_delay_ms\": 20, \"ack_timeout_ms\": 30000}}" >/dev/null
# the fake guest acknowledges its resume only once $T/p1ack exists
python3 tests/api/fake_guest.py "$T/p1.link" --budget-ms 10000 --resume-ack-gate "$T/p1ack" >"$T/guest.log" 2>&1 &
PIDS+=($!)
"$GW" --api "$API" --listen g1="unix:$T/g1.sock" --listen p1="unix:$T/p1.sock" \
	--listen nope="unix:$T/nope.sock" --upstream http://fake.invalid/ --upstream-unix "$UP" \
	--admin "unix:$T/admin.sock" --hold-buffer 4096 --spool-max 65536 --client-timeout 2 \
	-l debug >"$T/gw.log" 2>&1 &
GWPID=$!
PIDS+=($GWPID)
wait_sock "$T/admin.sock"
ADM=$T/admin.sock
G1=$T/g1.sock

# ---- non-streaming and streaming, byte for byte ----
code=$(gw "$G1" -H 'X-Fake-Step: 3' -H 'X-Fake-Wait-Ms: 50' -H 'Content-Type: application/json' \
	-d '{"model": "m", "messages": []}' http://agent/v1/chat/completions)
direct -H 'X-Fake-Step: 3' -H 'X-Fake-Wait-Ms: 0' -H 'Content-Type: application/json' \
	-d '{"model": "m", "messages": []}' http://fake/v1/chat/completions
check "non-streaming: 200" test "$code" = 200
check "non-streaming: body byte-exact" cmp -s "$T/out" "$T/want"
check "non-streaming: upstream saw the body unchanged" \
	test "$(hdr X-Fake-Body-Fnv)" = "$(python3 -c 'import sys
h = 0xcbf29ce484222325
for b in b"{\"model\": \"m\", \"messages\": []}": h = ((h ^ b) * 0x100000001b3) % 2**64
print("%016x" % h)')"
code=$(gw "$G1" -N -H 'X-Fake-Step: 2' -H 'X-Fake-Wait-Ms: 50' -d '{"model": "m", "stream": true}' \
	http://agent/v1/chat/completions)
direct -H 'X-Fake-Step: 2' -H 'X-Fake-Wait-Ms: 0' -d '{"model": "m", "stream": true}' http://fake/v1/chat/completions
check "streaming: 200 text/event-stream" test "$code $(hdr Content-Type)" = "200 text/event-stream"
check "streaming: chunked to the client" test "$(hdr Transfer-Encoding)" = chunked
check "streaming: body byte-exact (4 events and [DONE])" sh -c "cmp -s '$T/out' '$T/want' && test \$(grep -c '^data: ' '$T/out') = 5"
mapfile -t ids < <(wait_ids g1)
check "two requests -> two gateway waits on g1" test "${#ids[@]}" = 2
check "wait 1: started, ready, delivered in order" test "$(lifecycle "${ids[0]}")" = "start<ready<delivered"
check "wait 2: started, ready, delivered in order" test "$(lifecycle "${ids[1]}")" = "start<ready<delivered"
check "waits are kind model" test "$(api http://vmnapd/vms/g1 | jget '["counters"]["waits_by_kind"]["model"]')" = 2

# ---- the first SSE event passes before the upstream finished ----
rm -f "$T/go"
python3 - "$G1" "$T/go" >"$T/sse.txt" 2>&1 <<'PY' &
import socket, sys, os
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(20)
s.connect(sys.argv[1])
body = b'{"stream": true}'
s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\nX-Fake-Step: 1\r\nX-Fake-Wait-Ms: 0\r\n"
          b"X-Fake-Hold: " + sys.argv[2].encode() + b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
buf = b""
while b"data: " not in buf:
    buf += s.recv(65536)
print("first-event-before-go" if not os.path.exists(sys.argv[2]) else "go-existed")
open(sys.argv[2], "w").close()
while not buf.endswith(b"0\r\n\r\n"):
    d = s.recv(65536)
    if not d:
        break
    buf += d
print("done" if b"data: [DONE]" in buf else "no-done")
PY
sse=$!
wait "$sse"
check "SSE: first event reached the client while upstream still held the rest" \
	test "$(tr '\n' ' ' <"$T/sse.txt")" = "first-event-before-go done "

# ---- pass-through: method, path, query, headers ----
code=$(gw "$G1" -X PUT -H 'Accept:' -H 'Authorization: Bearer sk-SECRET-123' -H 'X-Custom: kept' \
	-H 'Connection: X-Drop-Me' -H 'X-Drop-Me: 1' -H 'Keep-Alive: timeout=5' \
	-H 'X-Fake-Wait-Ms: 0' --data-binary 'abc' 'http://agent/some/path?api-key=QSECRET&x=%20y')
check "PUT with a query: 200" test "$code" = 200
check "method, path and query reach the upstream unchanged" \
	test "$(hdr X-Fake-Request)" = "PUT /some/path?api-key=QSECRET&x=%20y"
check "Authorization reaches the upstream unchanged" test "$(hdr X-Fake-Authorization)" = "Bearer sk-SECRET-123"
h=$(hdr X-Fake-Headers)
check "end-to-end header kept" sh -c "echo '$h' | tr , '\n' | grep -qx x-custom"
check "hop-by-hop headers dropped (Connection, Keep-Alive, those it names)" \
	sh -c "! echo '$h' | tr , '\n' | grep -qx -e connection -e keep-alive -e x-drop-me"
check "no header added by the gateway (the client sent no Accept; no Expect)" \
	sh -c "! echo '$h' | tr , '\n' | grep -qx -e expect -e accept"
code=$(gw "$G1" --path-as-is -H 'X-Fake-Wait-Ms: 0' 'http://agent/v1/a/../b/./c//d')
check "dot segments and empty segments pass as sent" test "$(hdr X-Fake-Request)" = "GET /v1/a/../b/./c//d"
code=$(gw "$G1" -X DELETE -H 'X-Fake-Wait-Ms: 0' http://agent/v1/files/f1)
check "DELETE without a body passes" test "$code $(hdr X-Fake-Request)" = "200 DELETE /v1/files/f1"
code=$(gw "$G1" -I -H 'X-Fake-Wait-Ms: 0' http://agent/v1/models)
check "HEAD passes" test "$code $(hdr X-Fake-Request)" = "200 HEAD /v1/models"

# ---- concurrent requests of one VM: separate waits ----
before=$(api http://vmnapd/vms/g1 | jget '["counters"]["waits_started"]')
rm -f "$T/gate"
cpids=()
for i in 1 2 3 4; do
	curl -s -m 30 --unix-socket "$G1" -o "$T/c$i" -H "X-Fake-Step: $i" -H 'X-Fake-Wait-Ms: 0' \
		-H "X-Fake-Hold: $T/gate" -d '{}' http://agent/v1/chat/completions &
	cpids+=($!)
done
outstanding() { [ "$(api http://vmnapd/vms/g1 | jget '["waits_outstanding"]')" = 4 ]; }
check "4 concurrent requests: 4 waits outstanding at once in vmnapd" until_ok 20 outstanding
touch "$T/gate"
for p in "${cpids[@]}"; do wait "$p"; done
for i in 1 2 3 4; do direct -H "X-Fake-Step: $i" -H 'X-Fake-Wait-Ms: 0' -d '{}' http://fake/x; cp "$T/want" "$T/w$i"; done
check "4 concurrent: each body byte-exact for its step" \
	sh -c "cmp -s '$T/c1' '$T/w1' && cmp -s '$T/c2' '$T/w2' && cmp -s '$T/c3' '$T/w3' && cmp -s '$T/c4' '$T/w4'"
check "4 concurrent: 4 more waits started, none outstanding" \
	test "$(api http://vmnapd/vms/g1 | jget '["counters"]["waits_started"], d["waits_outstanding"]')" = "($((before + 4)), 0)"

# ---- a response larger than the hold buffer (4 KiB) and the spool (64 KiB) ----
for mode in plain stream; do
	body='{}'; [ $mode = stream ] && body='{"stream": true}'
	code=$(gw "$G1" --limit-rate 2M -H 'X-Fake-Size: 3000000' -H 'X-Fake-Wait-Ms: 0' -d "$body" http://agent/big)
	direct -H 'X-Fake-Size: 3000000' -H 'X-Fake-Wait-Ms: 0' -d "$body" http://fake/big
	check "3 MB $mode response through a 4 KiB hold buffer: byte-exact" \
		sh -c "test '$code' = 200 && cmp -s '$T/out' '$T/want'"
done
check "the large responses spilled to the temp file" test "$(metric spilled_bytes_total 'vm="g1"' "$ADM")" -gt 0
check "and paused the upstream at --spool-max (64 KiB)" test "$(metric backpressure_total 'vm="g1"' "$ADM")" -gt 0

# ---- upstream failures: the wait ends, the agent gets the status ----
code=$(gw "$G1" -H 'X-Fake-Fault: status:503' -H 'X-Fake-Wait-Ms: 0' -d '{}' http://agent/v1/x)
check "upstream 503 passes through with its body" \
	sh -c "test '$code' = 503 && grep -q 'fake 503' '$T/out'"
code=$(gw "$G1" -H 'X-Fake-Fault: reset' -H 'X-Fake-Wait-Ms: 0' -d '{}' http://agent/v1/x)
check "upstream reset before answering -> 502" test "$code" = 502
check "reset counted" test "$(metric upstream_errors_total 'vm="g1",kind="reset"' "$ADM")" = 1
curl -s -m 30 -N --unix-socket "$G1" -o "$T/out" -H 'X-Fake-Fault: truncate' -H 'X-Fake-Wait-Ms: 0' \
	-d '{"stream": true}' http://agent/v1/x
rc=$?
check "upstream cut mid-stream: the client sees a cut stream (curl $rc), first event kept" \
	sh -c "test $rc -ne 0 && grep -q '^data: ' '$T/out' && ! grep -q DONE '$T/out'"
api -X PUT http://vmnapd/vms/t1 -d '{}' >/dev/null
"$GW" --api "$API" --listen t1="unix:$T/t1.sock" --upstream http://fake --upstream-unix "$UP" \
	--upstream-timeout 2000 --admin "unix:$T/admin-t.sock" >"$T/gw-timeout.log" 2>&1 &
PIDS+=($!)
wait_sock "$T/admin-t.sock"
code=$(gw "$T/t1.sock" -H 'X-Fake-Wait-Ms: 6000' -d '{}' http://agent/v1/slow)
mapfile -t ids < <(wait_ids t1)
check "upstream slower than --upstream-timeout -> 504, the wait made ready" \
	sh -c "test '$code' = 504 && test '$(lifecycle "${ids[0]}")' = start\<ready\<delivered"
gw "$T/t1.sock" -N -H 'X-Fake-Size: 20000' -H 'X-Fake-Wait-Ms: 0' -H "X-Fake-Hold: $T/t1go" \
	-d '{"stream": true}' http://agent/v1/long >/dev/null &
t1req=$!
sleep 3	# longer than --upstream-timeout: the stream had its first byte, so it may run on
touch "$T/t1go"
wait "$t1req"
check "--upstream-timeout bounds the first byte only: a longer stream completes" \
	sh -c "grep -q 'data: \[DONE\]' '$T/out'"
mapfile -t ids < <(wait_ids g1)
all_done=yes
for id in "${ids[@]}"; do
	[ "$(lifecycle "$id")" = "start<ready<delivered" ] || { all_done="$id: $(lifecycle "$id")"; break; }
done
check "every g1 wait so far (${#ids[@]}) was started, made ready and delivered" test "$all_done" = yes

# ---- hostile clients ----
code=$(curl -s -m 10 --unix-socket "$G1" -o /dev/null -w '%{http_code}' \
	-H "X-Big: $(head -c 100000 /dev/zero | tr '\0' a)" http://agent/v1/x)
check "oversized headers -> 4xx ($code)" sh -c "test '$code' -ge 400 && test '$code' -lt 500"
count_before=$(curl -s --unix-socket "$UP" http://fake/__fake/count | jget '["requests"]')
bad=$(python3 - "$G1" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(10)
s.connect(sys.argv[1])
s.sendall(b"POST /v1/x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nZZZ\r\nnot chunked\r\n\r\n")
buf = b""
try:
    while True:
        d = s.recv(4096)
        if not d:
            break
        buf += d
except OSError:
    pass
print(buf.split(b" ")[1].decode() if buf.startswith(b"HTTP/") else "closed")
PY
)
count_after=$(curl -s --unix-socket "$UP" http://fake/__fake/count | jget '["requests"]')
check "invalid chunked body -> 400 or closed ($bad), nothing forwarded" \
	sh -c "{ test '$bad' = 400 || test '$bad' = closed; } && test '$count_before' = '$count_after'"
python3 - "$G1" >"$T/slow.txt" <<'PY' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
s.sendall(b"POST /v1/x HTTP/1.1\r\nHost: a\r\nX-Part")   # and then nothing
s.settimeout(30)
t = time.monotonic()
try:
    d = s.recv(4096)
except OSError:
    d = b""
print("closed" if not d or d.startswith(b"HTTP/1.1 4") else "answered")
PY
slow=$!
code=$(gw "$G1" -H 'X-Fake-Wait-Ms: 0' -d '{}' http://agent/v1/x)
check "a slowloris client does not hold others up" test "$code" = 200
wait "$slow"
check "the slowloris connection is closed (--client-timeout 2)" test "$(cat "$T/slow.txt")" = closed

# ---- a client that disconnects ends its wait ----
gone_before=$(metric client_gone_total 'vm="g1"' "$ADM")
curl -s -m 1 --unix-socket "$G1" -o /dev/null -H 'X-Fake-Wait-Ms: 5000' -d '{}' http://agent/v1/gone
mapfile -t ids < <(wait_ids g1)
last=${ids[${#ids[@]} - 1]}
gone_ready() { [ "$(lifecycle "$last")" = "start<ready<delivered" ]; }
check "client gone: its wait was made ready (before the upstream answered)" until_ok 4 gone_ready
check "client gone counted once; no completed response counted as one before" \
	test "$gone_before $(metric client_gone_total 'vm="g1"' "$ADM")" = "0 1"

# ---- a VM that vmnapd pauses: the response is held until it runs ----
api -X PATCH http://vmnapd/vms/p1 -d '{"managed": true}' >/dev/null
rm -f "$T/p1go"
curl -s -m 60 --unix-socket "$T/p1.sock" -o "$T/p1out" -w '%{http_code}' -H 'X-Fake-Step: 5' \
	-H 'X-Fake-Wait-Ms: 0' -H "X-Fake-Hold: $T/p1go" -d '{}' http://agent/v1/chat/completions >"$T/p1code" &
p1req=$!
p1_paused() { [ "$(api http://vmnapd/vms/p1 | jget '["state"]')" = PAUSED ]; }
check "paused VM: vmnapd paused it while its request waited" until_ok 30 p1_paused
touch "$T/p1go"
mapfile -t ids < <(wait_ids p1)
p1wait() { api "http://vmnapd/vms/p1/waits/${ids[0]}" | jget "$1"; }
p1_resumed_unacked() {
	[ "$(api http://vmnapd/vms/p1 | jget '["state"]')" != PAUSED ] && [ "$(p1wait '["state"]')" = ready ]
}
check "paused VM: data ready, vCPUs resumed, the guest has not acknowledged: wait still ready" \
	until_ok 30 p1_resumed_unacked
sleep 0.5	# time for a wrong release to show
check "paused VM: the response is held until vmnapd reports the wait delivered" \
	sh -c "kill -0 $p1req 2>/dev/null && test ! -s '$T/p1out'"
touch "$T/p1ack"
wait "$p1req"
direct -H 'X-Fake-Step: 5' -H 'X-Fake-Wait-Ms: 0' -d '{}' http://fake/v1/chat/completions
check "paused VM: 200, byte-exact" sh -c "test '$(cat "$T/p1code")' = 200 && cmp -s '$T/p1out' '$T/want'"
check "paused VM: its wait started, ready, delivered" test "$(lifecycle "${ids[0]}")" = "start<ready<delivered"
check "GET /vms/p1/waits/ID: delivered, started < ready < delivered (ns)" \
	test "$(p1wait '["state"], d["started_ns"] < d["ready_ns"] < d["delivered_ns"]')" = "('delivered', True)"
check "GET /vms/p1/waits lists it, delivered" \
	test "$(api http://vmnapd/vms/p1/waits | jget "[\"waits\"][-1][\"id\"] == '${ids[0]}' and d[\"waits\"][-1][\"state\"]")" = delivered
check "paused VM: the response was held until delivered (released: delivered)" \
	sh -c "test '$(metric held_total 'vm="p1"' "$ADM")' = 1 && grep -q 'released (delivered)' '$T/gw.log'"

# ---- vmnapd refuses (VM not registered) or is down: forwarded unmanaged ----
code=$(gw "$T/nope.sock" -H 'X-Fake-Wait-Ms: 0' -d '{}' http://agent/v1/x)
check "VM unknown to vmnapd: forwarded (200), counted refused" \
	sh -c "test '$code' = 200 && test '$(metric unmanaged_total 'vm="nope",reason="refused"' "$ADM")' = 1"
"$GW" --api "$T/no-such-api.sock" --listen g1="unix:$T/down.sock" --upstream http://fake \
	--upstream-unix "$UP" --admin "unix:$T/admin2.sock" >"$T/gw-down.log" 2>&1 &
PIDS+=($!)
wait_sock "$T/admin2.sock"
code=$(gw "$T/down.sock" -H 'X-Fake-Step: 4' -H 'X-Fake-Wait-Ms: 0' -d '{}' http://agent/v1/chat/completions)
direct -H 'X-Fake-Step: 4' -H 'X-Fake-Wait-Ms: 0' -d '{}' http://fake/v1/chat/completions
check "vmnapd down: forwarded unmanaged, byte-exact" sh -c "test '$code' = 200 && cmp -s '$T/out' '$T/want'"
check "vmnapd down: counted and said in the log" \
	sh -c "test '$(metric unmanaged_total 'vm="g1",reason="vmnapd_down"' "$T/admin2.sock")' = 1 && grep -q 'vmnapd unreachable' '$T/gw-down.log'"
"$GW" --api "$API" --listen x="unix:$T/refused.sock" --upstream http://fake \
	--upstream-unix "$T/nobody-listens.sock" --admin "unix:$T/admin3.sock" >"$T/gw-refused.log" 2>&1 &
PIDS+=($!)
wait_sock "$T/admin3.sock"
code=$(gw "$T/refused.sock" -d '{}' http://agent/v1/x)
check "upstream unreachable -> 502, counted connect" \
	sh -c "test '$code' = 502 && test '$(metric upstream_errors_total 'vm="x",kind="connect"' "$T/admin3.sock")' = 1"

# ---- HTTPS upstream: the certificate is checked ----
if openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 \
	-addext subjectAltName=IP:127.0.0.1 -keyout "$T/key.pem" -out "$T/cert.pem" >/dev/null 2>&1; then
	python3 - "$T/cert.pem" "$T/key.pem" >"$T/https.port" 2>"$T/https.log" <<'PY' &
import http.server, ssl, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        b = b'{"tls": "ok"}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
    def log_message(self, *a):
        pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
c.load_cert_chain(sys.argv[1], sys.argv[2])
s.socket = c.wrap_socket(s.socket, server_side=True)
print(s.server_address[1], flush=True)
s.serve_forever()
PY
	PIDS+=($!)
	until_ok 10 test -s "$T/https.port"
	port=$(cat "$T/https.port")
	"$GW" --api "$API" --listen g1="unix:$T/tls.sock" --upstream "https://127.0.0.1:$port" \
		--admin "unix:$T/admin4.sock" >"$T/gw-tls.log" 2>&1 &
	PIDS+=($!)
	"$GW" --api "$API" --listen g1="unix:$T/tls-ca.sock" --upstream "https://127.0.0.1:$port" \
		--upstream-ca "$T/cert.pem" --admin "unix:$T/admin5.sock" >"$T/gw-tls-ca.log" 2>&1 &
	PIDS+=($!)
	wait_sock "$T/admin4.sock" && wait_sock "$T/admin5.sock"
	code=$(gw "$T/tls.sock" -d '{}' http://agent/v1/x)
	check "HTTPS upstream with an untrusted certificate -> 502, counted tls" \
		sh -c "test '$code' = 502 && test '$(metric upstream_errors_total 'vm="g1",kind="tls"' "$T/admin4.sock")' = 1"
	code=$(gw "$T/tls-ca.sock" -d '{}' http://agent/v1/x)
	check "HTTPS upstream trusted through --upstream-ca -> 200" \
		sh -c "test '$code' = 200 && grep -q '\"tls\": \"ok\"' '$T/out'"
else
	ok "HTTPS upstream # SKIP openssl cannot make a test certificate"
fi

# ---- bad command lines ----
"$GW" --listen a=unix:$T/x1.sock --listen a=unix:$T/x2.sock --upstream http://u >"$T/dup.log" 2>&1
rc=$?
check "two listeners for one VM: refused (exit $rc)" sh -c "test $rc = 2 && grep -q 'has a listener already' '$T/dup.log'"
"$GW" --listen a=unix:$T/x1.sock --upstream ftp://u >/dev/null 2>&1
check "a non-HTTP upstream: refused" test $? = 2
"$GW" --listen 'a b=unix:/x' --upstream http://u >/dev/null 2>&1
check "a bad VM name: refused" test $? = 2

# ---- a hostile path reaches the log as one escaped line ----
python3 - "$G1" <<'PY' >/dev/null 2>&1
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
s.connect(sys.argv[1])
s.sendall(b"POST /v1/a\x1b[31mX\xff HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
          b"Connection: close\r\n\r\n{}")
s.recv(4096)
PY
check "a path with control bytes and invalid UTF-8 is logged escaped, on one line" \
	sh -c "LC_ALL=C grep -qa 'a\\\\x1b\[31mX' '$T/gw.log' && ! LC_ALL=C grep -qaP '\x1b|\xff' '$T/gw.log'"

# ---- no secrets in the log; the gateway survived everything ----
check "the gateway logs neither header values nor query strings" \
	sh -c "! grep -q -e SECRET -e QSECRET '$T/gw.log' '$T/gw-down.log'"
check "the gateway is still running" kill -0 "$GWPID"
curl -s -m 30 --unix-socket "$G1" -o /dev/null -H 'X-Fake-Wait-Ms: 20000' -d '{}' http://agent/v1/inflight &
inflight=$!
one_outstanding() { [ "$(api http://vmnapd/vms/g1 | jget '["waits_outstanding"]')" = 1 ]; }
until_ok 20 one_outstanding
kill "$GWPID"
wait "$GWPID"
rc=$?
wait "$inflight"
check "SIGTERM: clean exit, sockets removed" sh -c "test $rc = 0 && ! test -e '$T/g1.sock'"
mapfile -t ids < <(wait_ids g1)
check "SIGTERM: the wait of a request in flight was made ready" \
	test "$(lifecycle "${ids[${#ids[@]} - 1]}")" = "start<ready<delivered"

echo "1..$n"
[ "$failed" = 0 ]
