# SPDX-License-Identifier: GPL-2.0-only
# shellcheck shell=bash
#
# pager_e2e.sh - the frame of a pager test with a real QEMU guest whose RAM
# goes through libvmnap-preload.so (source it from the repository root with
# BUILD and VM set): TAP, guest.sh and vmnapd.sh, the prerequisites (skips
# without them), a temp dir $tmp (prefix $1) with RUN and store in it, and
# an EXIT trap that stops the guest and vmnapd, runs pager_e2e_cleanup if
# the test defines it, and removes $tmp (kept when a check failed or
# KEEP=1).
#
#   pager_e2e_fill PERCENT MIB_AT_LEAST READY_TIMEOUT [guest_start options]
#       start the guest running memfill PERCENT (it fills that share of its
#       RAM with a pattern and keeps its digest); wait for MEMFILL READY;
#       one check that it filled >= MIB_AT_LEAST MiB; qpid: QEMU's pid.
#       Ends the test (not_ok, plan, exit 1) when the guest never got ready.
# (memfill_verified, pager_adopted, pager_stat: tests/lib/vmnapd.sh)

TAP_NAME="test"
. tests/lib/tap.sh
# shellcheck source=tests/lib/guest.sh
. tests/lib/guest.sh
[ -e /dev/userfaultfd ] || [ "$(id -u)" = 0 ] || skip "no userfaultfd access"
guest_require "$BUILD/vmnapd" "$BUILD/libvmnap-preload.so" "$BUILD/tests/selftests/memfill"

tmp=$(mktemp -d "/tmp/$1.XXXXXX")
# shellcheck disable=SC2034  # for the sourcing test
RUN=$tmp/run store=$tmp/store

# shellcheck source=tests/lib/vmnapd.sh
. tests/lib/vmnapd.sh
_pager_e2e_finish() {
	guest_cleanup
	vmnapd_stop
	if declare -F pager_e2e_cleanup >/dev/null; then pager_e2e_cleanup; fi
	if [ "${failed:-0}" -gt 0 ] || [ -n "${KEEP:-}" ]; then
		echo "# logs kept in $tmp"
	else
		rm -rf "$tmp"
	fi
}
trap _pager_e2e_finish EXIT

pager_e2e_fill() {
	local percent=$1 least=$2 timeout=$3 line mib
	shift 3
	preload_opts
	guest_start "$VM" "$@" "${PRELOAD_OPTS[@]}" -- "memfill $percent </dev/ttyS1"
	if ! guest_wait_console "$VM" 'MEMFILL READY' "$timeout"; then
		not_ok "guest filled its RAM"
		sed 's/^/# /' "$GUEST_DIR/$VM.err" | tail -n 30
		echo "1..$n"
		exit 1
	fi
	line=$(tr -d '\r' <"$GUEST_DIR/$VM.log" | grep -o 'MEMFILL READY.*')
	mib=$(echo "$line" | sed -n 's/.*mib=\([0-9]*\).*/\1/p')
	check "guest filled ${mib:-?} MiB (>= $least) with its digest: $line" \
		test "${mib:-0}" -ge "$least"
	qpid=$(cat "$GUEST_DIR/$VM.pid" 2>/dev/null)
}
