#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# bench-vsock.sh - throughput of vmnapd's vhost-user-vsock device against
# another QEMU path on this machine, side by side in one guest boot.
#
#   vsock  guest AF_VSOCK -> vmnapd (vhost-user-vsock) -> host unix socket
#          <uds>_P (Firecracker-style bridging), and back
#   net    guest TCP -> virtio-net -> QEMU user networking (slirp) -> host
#          TCP socket on 127.0.0.1, and back
#
# Both directions are guest-initiated streams of BYTES (default 256 MiB)
# whose every byte the receiver checks (vsock_xfer).  The two paths run
# interleaved, ROUNDS times (default 2), in the same guest; the summary is
# the median MiB/s per path and direction and the ratio vsock / net.
# Writes $BUILD/bench/vsock.json.  TCG here (no KVM): absolute numbers are
# about this machine; the ratio is the figure to compare.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
export BUILD
BYTES=${BYTES:-$((256 << 20))}
ROUNDS=${ROUNDS:-2}
XFER=$BUILD/tests/selftests/vsock_xfer
VMNAPD=$BUILD/vmnapd
OUT=$BUILD/bench/vsock.json
CID=3
STEP_TIMEOUT=900
GUEST_TIMEOUT=$((STEP_TIMEOUT * 2))
VSOCK_PORT_SINK=7100 VSOCK_PORT_SOURCE=7101
SLIRP_HOST=10.0.2.2		# the host as the guest sees it (user networking)

for f in "$XFER" "$VMNAPD"; do
	[ -x "$f" ] || { echo "bench-vsock: $f missing; run make" >&2; exit 1; }
done
W=$(mktemp -d /tmp/vmnap-bench-vsock.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$W"
}
trap cleanup EXIT

# Free TCP ports on the host for the net path.
read -r TCP_SINK TCP_SOURCE < <(python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')

"$VMNAPD" -r "$W/run" -s "$W/store" --vsock "bench:$W/vu.sock:$CID:$W/v.sock" \
	>"$W/vmnapd.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do [ -S "$W/vu.sock" ] && break; sleep 0.1; done

n=$ROUNDS
"$XFER" serve "unix:$W/v.sock_$VSOCK_PORT_SINK" sink -n "$n" -t $GUEST_TIMEOUT >"$W/s1.log" 2>&1 &
pids+=($!)
"$XFER" serve "unix:$W/v.sock_$VSOCK_PORT_SOURCE" "source:$BYTES" -n "$n" -t $GUEST_TIMEOUT >"$W/s2.log" 2>&1 &
pids+=($!)
"$XFER" serve "tcp:127.0.0.1:$TCP_SINK" sink -n "$n" -t $GUEST_TIMEOUT >"$W/s3.log" 2>&1 &
pids+=($!)
"$XFER" serve "tcp:127.0.0.1:$TCP_SOURCE" "source:$BYTES" -n "$n" -t $GUEST_TIMEOUT >"$W/s4.log" 2>&1 &
pids+=($!)
sleep 0.5

guest_cmd="
X='vsock_xfer client'
for r in \$(seq $ROUNDS); do
  \$X vsock:2:$VSOCK_PORT_SINK send:$BYTES -t $STEP_TIMEOUT | sed 's/^/BENCH vsock g2h /'
  \$X tcp:$SLIRP_HOST:$TCP_SINK send:$BYTES -t $STEP_TIMEOUT | sed 's/^/BENCH net g2h /'
  \$X vsock:2:$VSOCK_PORT_SOURCE recv:$BYTES -t $STEP_TIMEOUT | sed 's/^/BENCH vsock h2g /'
  \$X tcp:$SLIRP_HOST:$TCP_SOURCE recv:$BYTES -t $STEP_TIMEOUT | sed 's/^/BENCH net h2g /'
done 2>/dev/null
"
echo "bench-vsock: $ROUNDS rounds of $((BYTES >> 20)) MiB each way, vsock and user networking (TCG)"
scripts/run-guest.sh --name bench-vsock --timeout $GUEST_TIMEOUT --mem 512 --net \
	--vsock-user "$W/vu.sock" -- "$guest_cmd" >"$W/guest.out" 2>"$W/guest.err" || {
	echo "bench-vsock: guest failed" >&2
	tail -20 "$W/guest.err" "$W/guest.out" >&2
	exit 1
}
mkdir -p "$(dirname "$OUT")"
python3 - "$W/guest.out" "$OUT" "$BYTES" "$ROUNDS" <<'PY'
import json, re, statistics, sys
out, dest, nbytes, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
runs = {}
line_re = re.compile(r"BENCH (\w+) (\w+) vsock_xfer: client \S+ x1: (ok|FAIL) "
                     r"\(elapsed ([\d.]+) s, ([\d.]+) MiB/s\)")
for line in open(out, errors="replace"):
    m = line_re.search(line)
    if m:
        path, d, status, secs, mibps = m.groups()
        runs.setdefault(path, {}).setdefault(d, []).append(
            {"ok": status == "ok", "seconds": float(secs), "mib_per_s": float(mibps)})
res = {"bytes": nbytes, "rounds": rounds, "accel": "tcg",
       "paths": {"vsock": "vhost-user-vsock (vmnapd) -> unix socket <uds>_P",
                 "net": "virtio-net + QEMU user networking (slirp) -> TCP 127.0.0.1"},
       "runs": runs, "median_mib_per_s": {}, "ratio_vsock_over_net": {}}
ok = True
for path in ("vsock", "net"):
    for d in ("g2h", "h2g"):
        r = runs.get(path, {}).get(d, [])
        if len(r) != rounds or not all(x["ok"] for x in r):
            ok = False
            continue
        res["median_mib_per_s"].setdefault(path, {})[d] = statistics.median(x["mib_per_s"] for x in r)
for d in ("g2h", "h2g"):
    try:
        res["ratio_vsock_over_net"][d] = round(
            res["median_mib_per_s"]["vsock"][d] / res["median_mib_per_s"]["net"][d], 3)
    except (KeyError, ZeroDivisionError):
        ok = False
res["all_transfers_verified"] = ok
json.dump(res, open(dest, "w"), indent=2)
for path, v in res["median_mib_per_s"].items():
    print(f"bench-vsock: {path:5s} guest->host {v.get('g2h', 0):7.1f} MiB/s  "
          f"host->guest {v.get('h2g', 0):7.1f} MiB/s")
print(f"bench-vsock: vsock/net ratio {res['ratio_vsock_over_net']}; wrote {dest}")
sys.exit(0 if ok else 1)
PY
