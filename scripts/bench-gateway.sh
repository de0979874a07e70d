#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# bench-gateway.sh - vmnap-gateway's proxy overhead against nginx as a
# reverse proxy, side by side on this machine, to the same fake model
# server; unix sockets only, bounded request counts (scripts/bench-gateway.py
# says what is measured).  Writes $BUILD/bench/gateway/<run-id>/summary.json
# and links it as $BUILD/bench/gateway/latest.  Extra arguments go to
# bench-gateway.py (--rounds, --serial, --conc, --conc-requests, --sse).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
export BUILD

for f in "$BUILD/vmnap-gateway" "$BUILD/vmnapd"; do
	[ -x "$f" ] || { echo "bench-gateway: $f missing; run make" >&2; exit 1; }
done
NGINX=$(command -v nginx || true)
[ -n "$NGINX" ] || [ ! -x /usr/sbin/nginx ] || NGINX=/usr/sbin/nginx
[ -n "$NGINX" ] || { echo "bench-gateway: nginx (the peer) is not installed; run make deps" >&2; exit 1; }

RUN_ID=$(date -u +%Y%m%dT%H%M%SZ)-$$
OUT=$BUILD/bench/gateway/$RUN_ID
mkdir -p "$OUT"
ln -sfn "$RUN_ID" "$BUILD/bench/gateway/latest"
# Bounded twice: by the request counts, and by this limit should a path hang.
timeout --kill-after=10 900 python3 scripts/bench-gateway.py --out "$OUT" --nginx "$NGINX" "$@"
