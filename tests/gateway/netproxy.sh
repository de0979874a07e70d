#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# netproxy.sh - vmnap-gateway's proxy mode (--proxy VM=tcp:…) between a
# download client (curl -x, tests/gateway/net_client.py) and a TCP/HTTP
# upstream (tests/gateway/net_upstream.py), with a real vmnapd.  VM n1 is
# registered without a guest (unmanaged: waits are counted, nothing
# pauses); VM p2 has a fake freezer directory and tests/api/fake_guest.py
# as its guest link peer (no pager), is managed, and is paused by its
# network wait.  TAP output.
set -u
cd "$(dirname "$0")/../.."
TAP_NAME="gateway-proxy"
. tests/gateway/common.sh
ADM=$T/admin.sock
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# net_waits VM: the network waits of VM in vmnapd's events, "ID start<ready<delivered" each
net_waits() { python3 - "$EV" "$1" <<'PY'
import json, sys
seq, order = {}, []
for l in open(sys.argv[1]):
    e = json.loads(l)
    if e.get("vm") != sys.argv[2] or "wait" not in e:
        continue
    if e["type"] == "wait_start" and e.get("kind") == "network":
        order.append(e["wait"])
    seq.setdefault(e["wait"], {}).setdefault(e["type"], e["seq"])
for w in order:
    s = seq[w]
    ok = s.get("wait_start", -1) < s.get("wait_ready", -1) < s.get("delivered", -1)
    print(w, "start<ready<delivered" if ok else str(s))
PY
}

"$VMNAPD" -r "$RUN" -s "$T/store" -e "$EV" -l debug >"$T/vmnapd.log" 2>&1 &
PIDS+=($!)
python3 tests/gateway/net_upstream.py >"$T/up.port" 2>"$T/up.log" &
PIDS+=($!)
wait_sock "$API" && until_ok 10 test -s "$T/up.port" ||
	{ not_ok "vmnapd and the upstream start"; echo "1..$n"; exit 1; }
UPP=$(cat "$T/up.port")
api -X PUT http://vmnapd/vms/n1 -d '{}' >/dev/null
CG=$T/fake-cgroup
mkdir -p "$CG" && echo THAWED >"$CG/freezer.state"
api -X PUT http://vmnapd/vms/p2 -d "{\"pause\": {\"backend\": \"freezer\", \"path\": \"$CG\"}, \"link_socket\": \"$T/p2.link\", \"policy\": {\"handoff_delay_ms\": 20}}" >/dev/null
python3 tests/api/fake_guest.py "$T/p2.link" --budget-ms 10000 >"$T/guest.log" 2>&1 &
PIDS+=($!)
N1=$(free_port)
P2=$(free_port)
"$GW" --api "$API" --proxy n1="tcp:127.0.0.1:$N1" --proxy p2="tcp:127.0.0.1:$P2" \
	--admin "unix:$ADM" --net-stall 300 --client-timeout 2 --connect-timeout 2000 \
	-l debug >"$T/gw.log" 2>&1 &
GWPID=$!
PIDS+=($GWPID)
wait_sock "$ADM" || { not_ok "the gateway starts"; echo "1..$n"; exit 1; }
nc() { python3 tests/gateway/net_client.py "$@"; }

# ---- CONNECT: a tunnel, byte-exact both ways ----
check "CONNECT tunnel: 200, 1 MB up and 1 MB down byte-exact" \
	test "$(nc "$N1" tunnel "127.0.0.1:$UPP" echo 1000000)" = "200 up-exact down-exact"
check "CONNECT tunnel: the client's bytes after the head in the same packet go first" \
	test "$(nc "$N1" raw "b'CONNECT 127.0.0.1:$UPP HTTP/1.1\\r\\n\\r\\nSLOW 1\\n'")" = 200

# ---- plain absolute-URI HTTP ----
code=$(curl -s -m 30 -x "http://127.0.0.1:$N1" -o "$T/got" -D "$T/hdr" -w '%{http_code}' \
	-H 'Proxy-Authorization: Basic c2VjcmV0' -H 'X-Keep: 1' "http://127.0.0.1:$UPP/bytes/3000000")
python3 -c 'import random, sys; sys.stdout.buffer.write(random.Random(3000000).randbytes(3000000))' >"$T/want"
check "plain GET through the proxy: 200, 3 MB byte-exact" sh -c "test '$code' = 200 && cmp -s '$T/got' '$T/want'"
check "the upstream got the request in origin form" \
	test "$(hdr X-Seen-Request)" = "GET /bytes/3000000 HTTP/1.1"
seen=$(hdr X-Seen-Headers)
check "end-to-end headers kept (Host, X-Keep), Connection: close added" \
	sh -c "echo '$seen' | tr , '\n' | grep -qx host && echo '$seen' | tr , '\n' | grep -qx x-keep && echo '$seen' | tr , '\n' | grep -qx connection"
check "Proxy-Authorization and Proxy-Connection not forwarded" \
	sh -c "! echo '$seen' | tr , '\n' | grep -qx -e proxy-authorization -e proxy-connection"
check "a fast exchange raised no network wait here (n1 has none so far)" test -z "$(net_waits n1)"

# ---- a slow upstream raises a network wait that ends when data flows ----
check "CONNECT to an upstream silent 1.5 s: its answer arrives" \
	test "$(nc "$N1" tunnel "127.0.0.1:$UPP" slow 1500)" = "200 late"
mapfile -t w < <(net_waits n1)
check "one network wait on n1, started, ready and delivered in order" \
	sh -c "test ${#w[@]} = 1 && test '${w[0]#* }' = 'start<ready<delivered'"
check "the gateway counted it" test "$(metric proxy_network_waits_total 'vm="n1"')" = 1
wid=${w[0]%% *}
check "GET /vms/n1/waits/ID: kind network, delivered, ready >= started + 300 ms" \
	test "$(api "http://vmnapd/vms/n1/waits/$wid" | jget '["kind"], d["state"], d["ready_ns"] - d["started_ns"] >= 300000000')" = "('network', 'delivered', True)"
code=$(curl -s -m 30 -x "http://127.0.0.1:$N1" -o "$T/got" -w '%{http_code}' "http://127.0.0.1:$UPP/slow/1200")
mapfile -t w < <(net_waits n1)
check "plain GET to a slow upstream: 200, a second network wait that ended" \
	sh -c "test '$code' = 200 && grep -qx late '$T/got' && test ${#w[@]} = 2 && test '${w[1]#* }' = 'start<ready<delivered'"

# ---- network waits may pause, never offload ----
check "p2's policy: network waits may pause, may not offload" \
	test "$(api http://vmnapd/vms/p2 | jget '["policy"]["kinds"]["network"]')" = "{'pause': True, 'offload': False}"
api -X PATCH http://vmnapd/vms/p2 -d '{"managed": true}' >/dev/null
nc "$P2" tunnel "127.0.0.1:$UPP" slow 4000 >"$T/p2.out" &
p2req=$!
p2_paused() { [ "$(api http://vmnapd/vms/p2 | jget '["state"]')" = PAUSED ]; }
check "a network wait paused p2" until_ok 30 p2_paused
check "p2: and offload was neither asked of the guest nor started (HANDOFF_REQ flags 0)" \
	sh -c "grep -q 'HANDOFF_REQ .* flags 0 -> READY' '$T/guest.log' && ! grep -q 'HANDOFF_REQ .* flags 1' '$T/guest.log'"
wait "$p2req"
check "p2: the answer arrived" test "$(cat "$T/p2.out")" = "200 late"
mapfile -t w < <(net_waits p2)
check "p2: its network wait started, ready, delivered" \
	sh -c "test ${#w[@]} -ge 1 && test '${w[0]#* }' = 'start<ready<delivered'"
check "p2: PAUSED, never OFFLOADING" sh -c "grep '\"vm\":\"p2\"' '$EV' | grep -q '\"to\":\"PAUSED\"' && ! grep -q '\"to\":\"OFFLOADING\"' '$EV'"

# ---- hostile clients: a clear status each, counted ----
rej0=$(metric proxy_rejected_total 'vm="n1"')
big=$(python3 -c 'print("X-Big: " + "a" * 20000)')
check "oversized head -> 431" test "$(nc "$N1" raw "b'GET http://127.0.0.1:$UPP/ HTTP/1.1\\r\\n$big\\r\\n\\r\\n'")" = 431
check "slowloris (a head never finished) -> 408 after --client-timeout" \
	test "$(nc "$N1" raw "b'GET http://127.0.0.1:$UPP/ HTTP/1.1\\r\\nX-Part'" 3)" = 408
bad=0
for req in "CONNECT nohost HTTP/1.1" "CONNECT 127.0.0.1:0 HTTP/1.1" "CONNECT 127.0.0.1:99999 HTTP/1.1" \
	"CONNECT a:b:80 HTTP/1.1" "CONNECT [::1 HTTP/1.1" "CONNECT user@127.0.0.1:$UPP HTTP/1.1" \
	"CONNECT 127.0.0.1:$UPP/x HTTP/1.1"; do
	got=$(nc "$N1" raw "b'$req\\r\\n\\r\\n'")
	[ "$got" = 400 ] || { echo "# $req -> $got"; bad=1; }
done
check "bad CONNECT targets (no port, port 0 or > 65535, junk, userinfo, a path) -> 400 each" test $bad = 0
check "an origin-form request (not a proxy request) -> 400" \
	test "$(nc "$N1" raw "b'GET /x HTTP/1.1\\r\\nHost: a\\r\\n\\r\\n'")" = 400
check "https:// without CONNECT -> 400" \
	test "$(nc "$N1" raw "b'GET https://127.0.0.1:$UPP/ HTTP/1.1\\r\\n\\r\\n'")" = 400
check "obsolete header folding -> 400" \
	test "$(nc "$N1" raw "b'GET http://127.0.0.1:$UPP/ HTTP/1.1\\r\\nX-A: 1\\r\\n folded\\r\\n\\r\\n'")" = 400
check "a NUL byte in the head -> 400" \
	test "$(nc "$N1" raw "b'GET http://127.0.0.1:$UPP/ HTTP/1.1\\r\\nX-A: \\x00\\r\\n\\r\\n'")" = 400
check "HTTP/2.0 request line -> 400" \
	test "$(nc "$N1" raw "b'GET http://127.0.0.1:$UPP/ HTTP/2.0\\r\\n\\r\\n'")" = 400
check "every refusal counted (14)" test "$(metric proxy_rejected_total 'vm="n1"')" = $((rej0 + 14))
dead=$(free_port)
check "CONNECT to a port nobody listens on -> 502, counted connect" \
	sh -c "test \"\$(python3 tests/gateway/net_client.py $N1 tunnel 127.0.0.1:$dead slow 1)\" = 502 && test \"\$(curl -s --unix-socket '$ADM' http://gw/metrics | grep -c 'proxy_upstream_errors_total{vm=\"n1\",kind=\"connect\"} 1')\" = 1"
check "a name that does not resolve -> 502" \
	test "$(nc "$N1" raw "b'GET http://no-such-host.invalid/ HTTP/1.1\\r\\n\\r\\n'")" = 502
check "after all that the proxy still tunnels byte-exact" \
	test "$(nc "$N1" tunnel "127.0.0.1:$UPP" echo 100000)" = "200 up-exact down-exact"
check "the proxy logs no header values and no paths" \
	sh -c "! grep -q -e c2VjcmV0 -e bytes/3000000 '$T/gw.log'"
check "the gateway is still running" kill -0 "$GWPID"

# ---- stopping ends a network wait that is still open ----
nc "$N1" tunnel "127.0.0.1:$UPP" slow 20000 >/dev/null 2>&1 &
PIDS+=($!)
before=$(net_waits n1 | wc -l)
more_waits() { [ "$(net_waits n1 | wc -l)" -gt "$before" ]; }
until_ok 20 more_waits
kill "$GWPID"
wait "$GWPID"
last_done() { [ "$(net_waits n1 | tail -1 | cut -d' ' -f2)" = "start<ready<delivered" ]; }
check "SIGTERM: the gateway made its open network wait ready before it left" until_ok 10 last_done
echo "1..$n"
