#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# api.sh - the control API through `curl --unix-socket` and vmnapctl, against
# a real vmnapd.  The VM is not a real VM: its pause backend is the cgroup
# v1 freezer on a FAKE cgroupfs directory (a plain freezer.state file that
# reads back what was written) and its guest link peer is fake_guest.py
# (the wire protocol, not the module).  What is real: vmnapd, its event
# loop, libmicrohttpd, the coordinator, the guest link code, the event log.
# TAP output.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
VMNAPD=$BUILD/vmnapd
CTL=$BUILD/vmnapctl
for p in "$VMNAPD" "$CTL"; do
	[ -x "$p" ] || { echo "1..0 # SKIP $p not built"; exit 0; }
done
command -v curl >/dev/null || { echo "1..0 # SKIP curl not installed"; exit 0; }

T=$(mktemp -d /tmp/vmnap-api.XXXXXX)
RUN=$T/run
SOCK=$RUN/api.sock
EV=$T/events.jsonl
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	rm -rf "$T"
}
trap cleanup EXIT

. tests/lib/tap.sh
# curl: print "STATUS BODY"
req() { local m=$1 u=$2; shift 2; curl -s -m 10 --unix-socket "$SOCK" -X "$m" -w ' %{http_code}' "$@" "http://localhost$u"; }
status_of() { local m=$1 u=$2; shift 2; curl -s -m 10 -o /dev/null --unix-socket "$SOCK" -X "$m" -w '%{http_code}' "$@" "http://localhost$u"; }
jget() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(eval("d"+sys.argv[1]))' "$1"; }
vm_state() { curl -s --unix-socket "$SOCK" "http://localhost/vms/$1" | jget '["state"]'; }
wait_state() { # VM STATE TIMEOUT_S
	local i
	for ((i = 0; i < $3 * 20; i++)); do
		[ "$(vm_state "$1")" = "$2" ] && return 0
		sleep 0.05
	done
	echo "# $1 is $(vm_state "$1"), wanted $2"; return 1
}

# sd_notify readiness: a datagram socket standing in for systemd's
# shellcheck source=tests/lib/sd_notify.sh
. tests/lib/sd_notify.sh
sd_notify_listen "$T/notify.sock" "$T/notify.log"
PIDS+=("$SD_NOTIFY_PID")
NOTIFY_SOCKET=$T/notify.sock "$VMNAPD" -r "$RUN" -s "$T/store" -e "$EV" -l debug >"$T/vmnapd.log" 2>&1 &
PIDS+=($!)
VMNAPD_PID=$!
for ((i = 0; i < 100; i++)); do [ -S "$SOCK" ] && grep -q READY=1 "$T/notify.log" && break; sleep 0.05; done
check "sd_notify READY=1 once the API listens" grep -qx READY=1 "$T/notify.log"

check "api socket exists with mode 0600" test "$(stat -c %a "$SOCK")" = 600
check "GET / is 200" test "$(status_of GET /)" = 200
check "GET /metrics is Prometheus text" sh -c "curl -s --unix-socket '$SOCK' http://localhost/metrics | grep -q '^# TYPE vmnap_vms gauge'"

# ---- hostile input: 4xx with a JSON error, never a crash ----
r=$(req PUT /vms/a -d '{"managed": tru')
check "malformed JSON -> 400 + JSON error" sh -c "echo '$r' | tr -d '\n' | grep -q '\"error\".* 400\$'"
check "unknown key -> 400" test "$(status_of PUT /vms/a -d '{"bogus": 1}')" = 400
check "wrong type -> 400" test "$(status_of PUT /vms/a -d '{"managed": "yes"}')" = 400
check "bad pause backend -> 400" test "$(status_of PUT /vms/a -d '{"pause": {"backend": "xen", "path": "/x"}}')" = 400
check "missing pause target -> 400" test "$(status_of PUT /vms/a -d '{"pause": {"backend": "qmp", "path": "/nonexistent/qmp.sock"}}')" = 400
# a path held by a live socket -> 409; a symlink loop in a path -> 400
python3 - "$T/live.sock" <<'PY' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(1); time.sleep(30)
PY
PIDS+=($!)
for ((i = 0; i < 100; i++)); do [ -S "$T/live.sock" ] && break; sleep 0.05; done
ln -s "$T/loop" "$T/loop"
check "link socket path held by a live socket -> 409" test "$(status_of PUT /vms/a -d "{\"link_socket\": \"$T/live.sock\"}")" = 409
check "vsock device path held by a live socket -> 409" test "$(status_of PUT /vms/a -d "{\"vsock\": {\"vhost_user\": \"$T/live.sock\", \"cid\": 3, \"uds\": \"$T/a.v\"}}")" = 409
check "link socket path through a symlink loop -> 400" test "$(status_of PUT /vms/a -d "{\"link_socket\": \"$T/loop/x\"}")" = 400
check "hybrid link path through a symlink loop -> 400" test "$(status_of PUT /vms/a -d "{\"link\": {\"hybrid\": \"$T/loop/x\"}}")" = 400
check "vsock device path through a symlink loop -> 400" test "$(status_of PUT /vms/a -d "{\"vsock\": {\"vhost_user\": \"$T/loop/x\", \"cid\": 3, \"uds\": \"$T/a.v\"}}")" = 400
check "pause target through a symlink loop -> 400" test "$(status_of PUT /vms/a -d "{\"pause\": {\"backend\": \"freezer\", \"path\": \"$T/loop/x\"}}")" = 400
check "live socket left alone" test -S "$T/live.sock"
check "bad VM name -> 400" test "$(status_of PUT '/vms/a%20b' -d '{}')" = 400
check "body not an object -> 400" test "$(status_of PUT /vms/a -d '[1,2]')" = 400
check "unknown VM -> 404" test "$(status_of GET /vms/nope)" = 404
check "unknown route -> 404" test "$(status_of GET /nope)" = 404
check "wrong method -> 405" test "$(status_of DELETE /metrics)" = 405
head -c 200000 /dev/zero | tr '\0' 'x' >"$T/big"
check "oversized body -> 413" test "$(status_of PUT /vms/a --data-binary @"$T/big")" = 413
check "oversized header -> 4xx" sh -c "s=\$(curl -s -o /dev/null -w '%{http_code}' --unix-socket '$SOCK' -H 'X-Big: $(head -c 40000 /dev/zero | tr '\0' y)' http://localhost/); [ \"\$s\" -ge 400 ] && [ \"\$s\" -lt 500 ]"
python3 - "$SOCK" <<'PY'
import os, socket, sys
for junk in (os.urandom(4096), b"GET /" + b"A" * 100000 + b" HTTP/1.1\r\n\r\n", b"\r\n\r\n\r\n"):
    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
    try:
        s.sendall(junk); s.settimeout(2); s.recv(100)
    except OSError:
        pass
    s.close()
PY
python3 - "$SOCK" <<'PY'
# 400 random hostile requests: methods, paths, bodies (deep nesting, huge
# numbers, NUL escapes, wrong types, unknown keys) on every endpoint
import http.client, json, random, socket, sys
random.seed(6)
class C(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX); self.sock.settimeout(5); self.sock.connect(sys.argv[1])
paths = ["/", "/metrics", "/vms", "/vms/x", "/vms/x/waits", "/vms/x/waits/a/ready",
         "/vms/x/waits/a/delivered", "/vms/x/events", "/vms/x/actions/pause",
         "/vms/x/actions/zap", "/vms/" + "y" * 70, "/vms/x/waits/" + "w" * 80 + "/ready",
         "/vms/%00", "/vms/../etc", "//vms//x//", "/vms/x/a/b/c/d/e/f/g"]
vals = [None, 0, -1, 2**63, 1e308, "", "\u0000", "a\u0000b", [], {}, True, "qmp",
        "/nonexistent", "x" * 5000]
keys = ["id", "kind", "managed", "pause", "policy", "link", "vsock", "source", "confirm",
        "backend", "path", "vmm_pid", "handoff_delay_ms", "bogus"]
def rnd(d=0):
    r = random.random()
    if d < 3 and r < 0.3:
        return {random.choice(keys): rnd(d + 1) for _ in range(random.randint(0, 4))}
    if d < 3 and r < 0.4:
        return [rnd(d + 1) for _ in range(random.randint(0, 3))]
    return random.choice(vals)
bodies = lambda: random.choice([json.dumps(rnd()), "[" * 3000 + "]" * 3000, "{\"a\":",
                                '{"id": "\u0000"}', "\xff\xfe", ""])
ok = 0
for i in range(400):
    c = C("x")
    try:
        c.request(random.choice(["GET", "PUT", "POST", "PATCH", "DELETE", "HEAD", "FOO"]),
                  random.choice(paths), body=bodies().encode("utf-8", "surrogateescape"))
        r = c.getresponse(); r.read()
        if r.status < 500 or r.status == 505:
            ok += 1
    except Exception:
        pass
    c.close()
print("# random requests answered < 500: %d/400" % ok)
PY
check "garbage on the socket: daemon alive" test "$(status_of GET /)" = 200
check "nothing registered by the bad requests" test "$(curl -s --unix-socket "$SOCK" http://localhost/ | jget '["vms"]')" = 0

# ---- a VM: fake freezer directory + fake guest peer ----
CG=$T/fake-cgroup
mkdir -p "$CG" && echo THAWED >"$CG/freezer.state"
POLICY='{"handoff_delay_ms": 20, "max_pause_ms": 20000}'
r=$(req PUT /vms/vm1 -d "{\"pause\": {\"backend\": \"freezer\", \"path\": \"$CG\"}, \"link_socket\": \"$T/vm1.link\", \"policy\": $POLICY}")
check "register -> 201" sh -c "echo '$r' | grep -q ' 201\$'"
check "registered VM is unmanaged" test "$(curl -s --unix-socket "$SOCK" http://localhost/vms/vm1 | jget '["managed"]')" = False
check "register twice -> 409" test "$(status_of PUT /vms/vm1 -d '{}')" = 409
python3 tests/api/fake_guest.py "$T/vm1.link" --budget-ms 10000 --busy 1 >"$T/guest.log" 2>&1 &
PIDS+=($!)
for ((i = 0; i < 100; i++)); do grep -q HELLO_ACK "$T/guest.log" && break; sleep 0.05; done
check "guest link up after HELLO" test "$(curl -s --unix-socket "$SOCK" http://localhost/vms/vm1 | jget '["link"]["state"]')" = up

"$CTL" -s "$SOCK" wait-start vm1 r0 >/dev/null
sleep 0.3
check "unmanaged: a wait does not pause" test "$(vm_state vm1)" = RUNNING
"$CTL" -s "$SOCK" wait-ready vm1 r0 >/dev/null
check "vmnapctl enable" sh -c "'$CTL' -s '$SOCK' enable vm1 >/dev/null"
"$CTL" -s "$SOCK" wait-start vm1 r1 >/dev/null
check "wait: BUSY then READY -> PAUSED" wait_state vm1 PAUSED 5
check "freezer.state is FROZEN" test "$(cat "$CG/freezer.state")" = FROZEN
check "guest saw a BUSY then a READY handoff" sh -c "grep -q 'BUSY' '$T/guest.log' && grep -q 'READY' '$T/guest.log'"
check "wait-ready -> RUNNING" sh -c "'$CTL' -s '$SOCK' wait-ready vm1 r1 >/dev/null && true"
check "resumed after data ready" wait_state vm1 RUNNING 5
check "freezer.state is THAWED" test "$(cat "$CG/freezer.state")" = THAWED
check "guest got RESUMED reason data_ready" sh -c "grep -q 'RESUMED .* reason 1' '$T/guest.log'"
check "delivery latency histogram counted" sh -c "curl -s --unix-socket '$SOCK' http://localhost/metrics | grep -q '^vmnap_delivery_latency_seconds_count{vm=\"vm1\"} 2'"
check "wait-ready twice -> 404 (exit 5)" sh -c "'$CTL' -s '$SOCK' wait-ready vm1 r1 2>/dev/null; [ \$? -eq 5 ]"

check "/metrics lines are valid Prometheus text" sh -c "curl -s --unix-socket '$SOCK' http://localhost/metrics | python3 -c '
import re, sys
pat = re.compile(r\"^[a-zA-Z_:][a-zA-Z0-9_:]*(\\{([a-zA-Z_][a-zA-Z0-9_]*=\\\"[^\\\"]*\\\",?)*\\})? [-+0-9.eE]+(Inf)?\$\")
bad = [l for l in sys.stdin.read().splitlines() if l and not l.startswith(\"# \") and not pat.match(l)]
sys.exit(1 if bad else 0)'"
curl -s --unix-socket "$SOCK" http://localhost/metrics >"$T/metrics.txt"
check "/metrics passes the strict text-format 0.0.4 parser (base units, build_info, errors apart)" \
	sh -c "python3 tests/api/prom_check.py <'$T/metrics.txt' >'$T/prom_check.out' || { sed 's/^/# /' '$T/prom_check.out'; false; }"

# a wait whose delivery the caller confirms (e.g. the in-guest agent took it)
"$CTL" -s "$SOCK" wait-start vm1 c1 --confirm >/dev/null
"$CTL" -s "$SOCK" wait-ready vm1 c1 >/dev/null
delivered_c1() { python3 -c 'import json,sys; sys.exit(0 if any(e["type"] == "delivered" and e.get("wait") == "c1" for e in map(json.loads, open(sys.argv[1]))) else 1)' "$EV"; }
if delivered_c1; then not_ok "confirm wait: not delivered before POST .../delivered"; else ok "confirm wait: not delivered before POST .../delivered"; fi
check "GET /vms/vm1/waits lists c1 (ready, confirm, model)" sh -c "curl -s --unix-socket '$SOCK' http://localhost/v1/vms/vm1/waits | python3 -c '
import json, sys
w = [x for x in json.load(sys.stdin)[\"waits\"] if x[\"id\"] == \"c1\"]
sys.exit(0 if len(w) == 1 and w[0][\"state\"] == \"ready\" and w[0][\"confirm\"] is True and w[0][\"kind\"] == \"model\" and w[0][\"age_s\"] >= 0 else 1)'"
check "GET /vms/nope/waits -> 404, DELETE .../waits -> 405" sh -c "[ \"\$(curl -s -o /dev/null -w '%{http_code}' --unix-socket '$SOCK' http://localhost/vms/nope/waits)\" = 404 ] && [ \"\$(curl -s -o /dev/null -w '%{http_code}' -X DELETE --unix-socket '$SOCK' http://localhost/vms/vm1/waits)\" = 405 ]"
check "vmnapctl delivered" sh -c "'$CTL' -s '$SOCK' delivered vm1 c1 >/dev/null"
check "confirm wait: delivered event" delivered_c1
check "GET /vms/vm1/waits/c1 after delivery: delivered, with its three times in order" \
	sh -c "curl -s --unix-socket '$SOCK' http://localhost/vms/vm1/waits/c1 | python3 -c '
import json, sys
w = json.load(sys.stdin)
sys.exit(0 if w[\"state\"] == \"delivered\" and 0 < w[\"started_ns\"] <= w[\"ready_ns\"] <= w[\"delivered_ns\"] else 1)'"
check "POST .../delivered twice -> 409 already delivered; GET .../waits/nope -> 404" \
	sh -c "curl -s -X POST --unix-socket '$SOCK' http://localhost/vms/vm1/waits/c1/delivered | grep -q 'already delivered' && [ \"\$(curl -s -o /dev/null -w '%{http_code}' --unix-socket '$SOCK' http://localhost/vms/vm1/waits/nope)\" = 404 ]"

# manual actions and vmnapctl exit codes
check "vmnapctl resume while running -> exit 4" sh -c "'$CTL' -s '$SOCK' resume vm1 2>/dev/null; [ \$? -eq 4 ]"
check "vmnapctl pause" sh -c "'$CTL' -s '$SOCK' pause vm1 >/dev/null"
check "manual pause -> PAUSED" wait_state vm1 PAUSED 5
check "manual offload without pager -> exit 4" sh -c "'$CTL' -s '$SOCK' offload vm1 2>/dev/null; [ \$? -eq 4 ]"
check "vmnapctl resume" sh -c "'$CTL' -s '$SOCK' resume vm1 >/dev/null"
check "manual resume -> RUNNING" wait_state vm1 RUNNING 5

# a guest timer: budget 300 ms, resumed before it (margin 50 ms), and a
# second handoff follows while the request is still pending
check "policy change via vmnapctl" sh -c "'$CTL' -s '$SOCK' policy vm1 '{\"max_pause_ms\": 20000}' >/dev/null"
kill "${PIDS[-1]}"; wait "${PIDS[-1]}" 2>/dev/null
python3 tests/api/fake_guest.py "$T/vm1.link" --budget-ms 300 >"$T/guest2.log" 2>&1 &
PIDS+=($!)
for ((i = 0; i < 100; i++)); do grep -q HELLO_ACK "$T/guest2.log" && break; sleep 0.05; done
"$CTL" -s "$SOCK" wait-start vm1 r2 --kind network >/dev/null
sleep 1.5
"$CTL" -s "$SOCK" wait-ready vm1 r2 >/dev/null
wait_state vm1 RUNNING 5 >/dev/null
check "timer resumes: RESUMED reason timer" grep -q 'RESUMED .* reason 2' "$T/guest2.log"
check "several handoffs for one request" test "$(grep -c 'HANDOFF_REQ' "$T/guest2.log")" -ge 2
check "network wait: no offload intended (flags 0)" sh -c "! grep -q 'flags 1' '$T/guest2.log'"

# external event resumes, link loss resumes (fail-safe)
"$CTL" -s "$SOCK" wait-start vm1 r3 >/dev/null
"$CTL" -s "$SOCK" policy vm1 '{"max_pause_ms": 20000}' >/dev/null
kill "${PIDS[-1]}"; wait "${PIDS[-1]}" 2>/dev/null
python3 tests/api/fake_guest.py "$T/vm1.link" --budget-ms 10000 >"$T/guest3.log" 2>&1 &
PIDS+=($!)
GUEST3=$!
wait_state vm1 PAUSED 5 >/dev/null
check "external event resumes" sh -c "'$CTL' -s '$SOCK' event vm1 webhook >/dev/null && grep -q 'reason 3' '$T/guest3.log' || { sleep 0.5; grep -q 'reason 3' '$T/guest3.log'; }"
wait_state vm1 PAUSED 5 >/dev/null
kill "$GUEST3"; wait "$GUEST3" 2>/dev/null
check "guest link lost while paused -> resumed (fail-safe)" wait_state vm1 WAITING 5
check "freezer thawed after link loss" test "$(cat "$CG/freezer.state")" = THAWED
"$CTL" -s "$SOCK" wait-ready vm1 r3 >/dev/null

# vmnapctl odds and ends
check "vmnapctl list" sh -c "'$CTL' -s '$SOCK' list | grep -q '^vm1 '"
check "vmnapctl --json show is JSON" sh -c "'$CTL' -s '$SOCK' --json show vm1 | python3 -c 'import json,sys; json.load(sys.stdin)'"
check "vmnapctl --help exit 0" sh -c "'$CTL' --help >/dev/null"
check "vmnapctl usage error -> exit 2" sh -c "'$CTL' bogus-cmd 2>/dev/null; [ \$? -eq 2 ]"
check "vmnapctl unknown command says so (not 'bad VM name'), exit 2" sh -c "'$CTL' bogus-cmd 2>'$T/ctl.err'; [ \$? -eq 2 ] && grep -q \"unknown command 'bogus-cmd'\" '$T/ctl.err'"
check "vmnapctl --version matches vmnapd --version" sh -c "[ \"\$('$CTL' --version | cut -d' ' -f2)\" = \"\$('$BUILD/vmnapd' --version | cut -d' ' -f2)\" ] && '$CTL' --version | grep -Eq '^vmnapctl [0-9]+\.[0-9]+\.[0-9]+\$'"
v1_aliases() {
	[ "$(status_of GET /v1/vms/vm1)" = 200 ] && [ "$(status_of GET /v1)" = 200 ] &&
		[ "$(status_of GET /v1/metrics)" = 200 ] && [ "$(status_of GET /v1/vms/nope)" = 404 ] &&
		[ "$(status_of POST /v1/vms/vm1/events -d '{"source": "v1"}')" = "$(status_of POST /vms/vm1/events -d '{"source": "v1"}')" ] &&
		[ "$(status_of GET /v2/vms)" = 404 ] && [ "$(status_of GET /v1/v1/vms)" = 404 ]
}
check "/v1/ paths alias the unprefixed ones (one prefix, v1 only)" v1_aliases
check "vmnapctl show unknown VM -> exit 5" sh -c "'$CTL' -s '$SOCK' show nope 2>/dev/null; [ \$? -eq 5 ]"
check "vmnapctl no daemon -> exit 3" sh -c "'$CTL' -s '$T/none.sock' status 2>/dev/null; [ \$? -eq 3 ]"

# guest link over a Firecracker-style hybrid vsock socket "<uds>_5151"
check "link with two kinds -> 400" test "$(status_of PUT /vms/vm2 -d "{\"link\": {\"unix\": \"$T/a\", \"vsock_cid\": 5}}")" = 400
check "vmnapctl register with a hybrid vsock link" sh -c "'$CTL' -s '$SOCK' register vm2 --link 'hybrid:$T/vm2.v' >/dev/null"
check "vmnapctl set-pause" sh -c "'$CTL' -s '$SOCK' --json set-pause vm2 'freezer:$CG' | grep -q '\"backend\":\"freezer\"'"
python3 tests/api/fake_guest.py "$T/vm2.v_5151" >"$T/guest-vm2.log" 2>&1 &
PIDS+=($!)
for ((i = 0; i < 100; i++)); do grep -q HELLO_ACK "$T/guest-vm2.log" && break; sleep 0.05; done
check "hybrid link up" test "$(curl -s --unix-socket "$SOCK" http://localhost/vms/vm2 | jget '["link"]["state"]')" = up
check "DELETE vm2" test "$(status_of DELETE /vms/vm2)" = 204
check "hybrid socket removed with the VM" test ! -e "$T/vm2.v_5151"

# the VMM's own memory: PSS and cgroup memory of a process given by pid
sleep 60 &
SLEEPER=$!
PIDS+=($SLEEPER)
check "register with vmm_pid" test "$(status_of PUT /vms/vm3 -d "{\"vmm_pid\": $SLEEPER}")" = 201
# sampled off the loop (smaps_rollup waits on the VMM's mmap lock): the
# first sample comes at once from the sampler thread, then every second
vmm_sampled() { curl -s --unix-socket "$SOCK" http://localhost/vms/vm3 | python3 -c 'import json,sys; m=json.load(sys.stdin)["vmm"]; sys.exit(0 if m.get("pss_bytes", 0) > 0 and 0 <= m["sample_age_ms"] < 5000 else 1)'; }
for ((i = 0; i < 100; i++)); do vmm_sampled && break; sleep 0.05; done
check "VMM PSS reported, with the sample's age" vmm_sampled
check "vmnap_vmm_pss_bytes in /metrics" sh -c "curl -s --unix-socket '$SOCK' http://localhost/metrics | grep -q '^vmnap_vmm_pss_bytes{vm=\"vm3\"} [1-9]'"
check "bad vmm_pid -> 400" test "$(status_of PATCH /vms/vm3 -d '{"vmm_pid": -4}')" = 400
# restore policy after a resume: the daemon's default, then the VM's own
check "restore: the default is lazy" test "$(curl -s --unix-socket "$SOCK" http://localhost/vms/vm3 | jget '["restore"]')" = lazy
check "PATCH restore working-set -> 200" test "$(status_of PATCH /vms/vm3 -d '{"restore": "working-set"}')" = 200
check "GET shows restore working-set" test "$(curl -s --unix-socket "$SOCK" http://localhost/vms/vm3 | jget '["restore"]')" = working-set
check "PATCH restore eager -> 200" test "$(status_of PATCH /vms/vm3 -d '{"restore": "eager"}')" = 200
check "GET shows restore eager" test "$(curl -s --unix-socket "$SOCK" http://localhost/vms/vm3 | jget '["restore"]')" = eager
check "PATCH restore recurring -> 200" test "$(status_of PATCH /vms/vm3 -d '{"restore": "recurring"}')" = 200
check "GET shows restore recurring" test "$(curl -s --unix-socket "$SOCK" http://localhost/vms/vm3 | jget '["restore"]')" = recurring
check "PATCH restore eager again -> 200" test "$(status_of PATCH /vms/vm3 -d '{"restore": "eager"}')" = 200
check "bad restore -> 400" test "$(status_of PATCH /vms/vm3 -d '{"restore": "sometimes"}')" = 400
check "restore not a string -> 400" test "$(status_of PATCH /vms/vm3 -d '{"restore": 1}')" = 400
check "still eager" test "$(curl -s --unix-socket "$SOCK" http://localhost/vms/vm3 | jget '["restore"]')" = eager
status_of DELETE /vms/vm3 >/dev/null

# guest time: a backend that stops the guest clock (QMP, Cloud Hypervisor)
# is refused for a managed VM unless the operator accepts it
python3 - "$T/qmp.sock" <<'PY' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1])
s.listen(4)
time.sleep(60)
PY
PIDS+=($!)
for ((i = 0; i < 100; i++)); do [ -S "$T/qmp.sock" ] && break; sleep 0.05; done
r=$(req PUT /vms/vm4 -d "{\"pause\": {\"backend\": \"qmp\", \"path\": \"$T/qmp.sock\"}, \"managed\": true}")
check "managed + QMP (guest clock stops) -> 409 with the reason" sh -c "echo '$r' | grep -q 'stops the guest clock' && echo '$r' | grep -q ' 409\$'"
check "refused registration leaves no VM" test "$(status_of GET /vms/vm4)" = 404
check "allow_clock_stop not a boolean -> 400" test "$(status_of PUT /vms/vm4 -d "{\"pause\": {\"backend\": \"qmp\", \"path\": \"$T/qmp.sock\", \"allow_clock_stop\": 1}}")" = 400
check "unmanaged QMP registers (restore lazy)" test "$(status_of PUT /vms/vm4 -d "{\"pause\": {\"backend\": \"qmp\", \"path\": \"$T/qmp.sock\"}, \"restore\": \"lazy\"}")" = 201
check "PUT restore lazy shown" test "$(curl -s --unix-socket "$SOCK" http://localhost/vms/vm4 | jget '["restore"]')" = lazy
check "GET shows the guest clock stops and why it may not be managed" sh -c "curl -s --unix-socket '$SOCK' http://localhost/vms/vm4 | python3 -c 'import json,sys; p=json.load(sys.stdin)[\"pause\"]; sys.exit(0 if p[\"guest_clock\"] == \"stops\" and p[\"may_manage\"] is False and \"monotonic\" in p[\"refusal\"] else 1)'"
check "PATCH managed -> 409" test "$(status_of PATCH /vms/vm4 -d '{"managed": true}')" = 409
check "still unmanaged" test "$(curl -s --unix-socket "$SOCK" http://localhost/vms/vm4 | jget '["managed"]')" = False
check "PATCH a freezer backend: managed now allowed" sh -c "curl -s --unix-socket '$SOCK' -X PATCH http://localhost/vms/vm4 -d '{\"pause\": {\"backend\": \"freezer\", \"path\": \"$CG\"}, \"managed\": true}' | grep -q '\"managed\":true'"
check "managed: swapping in QMP without allow_clock_stop -> 409" test "$(status_of PATCH /vms/vm4 -d "{\"pause\": {\"backend\": \"qmp\", \"path\": \"$T/qmp.sock\"}}")" = 409
check "with allow_clock_stop -> 200" test "$(status_of PATCH /vms/vm4 -d "{\"pause\": {\"backend\": \"qmp\", \"path\": \"$T/qmp.sock\", \"allow_clock_stop\": true}}")" = 200
status_of DELETE /vms/vm4 >/dev/null
check "vmnapctl register --managed --allow-clock-stop with QMP" sh -c "'$CTL' -s '$SOCK' --json register vm5 --pause 'qmp:$T/qmp.sock' --managed --allow-clock-stop | grep -q '\"allow_clock_stop\":true'"
status_of DELETE /vms/vm5 >/dev/null

check "DELETE -> 204" test "$(status_of DELETE /vms/vm1)" = 204
check "deleted VM is gone (404)" test "$(status_of GET /vms/vm1)" = 404

# ---- the event log ----
check "events: JSONL, seq 1..N without gaps, monotonic t_ns" python3 - "$EV" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert lines, "no events"
assert [e["seq"] for e in lines] == list(range(1, len(lines) + 1))
t = [e["t_ns"] for e in lines]
assert t == sorted(t)
states = {(e["from"], e["to"]) for e in lines if e["type"] == "transition"}
for want in [("RUNNING", "WAITING"), ("WAITING", "HANDOFF"), ("HANDOFF", "PAUSED"),
             ("PAUSED", "RESUMING"), ("RESUMING", "RUNNING"), ("HANDOFF", "WAITING")]:
    assert want in states, want
PY
check "vmnapd still alive" kill -0 "$VMNAPD_PID"
# the API is AF_UNIX: libmicrohttpd's TCP-option complaints are not warnings
check "no warning about TCP options on the unix-socket API" \
	sh -c "! grep -E ' W api: (Setting TCP|Failed to push)' '$T/vmnapd.log'"
kill "$VMNAPD_PID"; wait "$VMNAPD_PID"
check "vmnapd exits 0 on SIGTERM" test $? -eq 0
check "api socket removed on exit" test ! -e "$SOCK"
tap_done
