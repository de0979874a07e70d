# SPDX-License-Identifier: GPL-2.0-only
# shellcheck shell=bash
#
# tests/lib/guest.sh - drive background vmnap guests from bash test scripts.
# Source it from the repository root:  . tests/lib/guest.sh
#
#   guest_start NAME [run-guest options] -- CMD   boot in the background
#   guest_wait_console NAME REGEX TIMEOUT         wait for a console line (ERE)
#   guest_wait_ctl NAME REGEX TIMEOUT             wait for a line the guest
#                                                 wrote to /dev/ttyS1
#   guest_send NAME LINE                          LINE to the guest's /dev/ttyS1
#                                                 (after its command started)
#   guest_qmp NAME JSON...                        QMP commands (scripts/qmp.py)
#   guest_wait NAME                               wait; returns run-guest's status
#   guest_output NAME                             the command's console output
#   guest_kill NAME                               stop it now (QEMU included)
#   guest_cleanup                                 kill every guest still running
#
# Every wait is bounded.  Sourcing installs an EXIT trap that calls
# guest_cleanup (and makes INT/TERM exit through it); a test that sets its
# own EXIT trap must call guest_cleanup from it.  Functions must run in the
# shell that sourced this file (not in a $(...) subshell): they keep the
# guests' pids in it.  Files of guest NAME: $BUILD/guest/NAME.{log,qmp,ctl,
# ctl.log,ctl.in,out,err,pid}.

GUEST_LIB_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
GUEST_DIR=${BUILD:-build}/guest
GUEST_POLL_SEC=0.2		# console/socket polling interval
GUEST_SOCKET_WAIT_SEC=30	# QEMU creates its sockets right after start
GUEST_READY_WAIT_SEC=300	# boot until the command runs (TCG, loaded host)
GUEST_KILL_GRACE_SEC=10		# TERM -> KILL

declare -A _guest_pid _guest_log _guest_qmp _guest_ctl _guest_feeder

_guest_err() { echo "guest: $*" >&2; }

_guest_known() {
	[ -n "${_guest_pid[$1]+x}" ] || { _guest_err "$1: no such guest (guest_start it first)"; return 1; }
}

_guest_alive() { kill -0 "${_guest_pid[$1]}" 2>/dev/null; }

# guest_start NAME [run-guest options] -- CMD
guest_start() {
	local name=$1 log qmp ctl a prev=
	shift
	[ -z "${_guest_pid[$name]+x}" ] || { _guest_err "$name: already started"; return 1; }
	log=$GUEST_DIR/$name.log qmp=$GUEST_DIR/$name.qmp ctl=$GUEST_DIR/$name.ctl
	for a in "$@"; do
		[ "$a" = -- ] && break
		case $prev in
		--log) log=$a ;; --qmp) qmp=$a ;; --ctl) ctl=$a ;;
		esac
		prev=$a
	done
	mkdir -p "$GUEST_DIR"
	rm -f "$log" "$qmp" "$ctl" "$ctl.log" "$GUEST_DIR/$name.pid"
	"$GUEST_LIB_ROOT/scripts/run-guest.sh" --name "$name" --log "$log" --qmp "$qmp" \
		--ctl "$ctl" "$@" >"$GUEST_DIR/$name.out" 2>"$GUEST_DIR/$name.err" &
	_guest_pid[$name]=$!
	_guest_log[$name]=$log _guest_qmp[$name]=$qmp _guest_ctl[$name]=$ctl
}

# _guest_wait_file NAME REGEX TIMEOUT FILE WHAT
_guest_wait_file() {
	local name=$1 re=$2 timeout=$3 file=$4 what=$5 deadline
	deadline=$((SECONDS + timeout))
	while [ "$SECONDS" -lt "$deadline" ]; do
		if [ -f "$file" ] && tr -d '\r' <"$file" | grep -Eq -- "$re"; then
			return 0
		fi
		if ! _guest_alive "$name"; then
			# One last look: the line may have come just before exit.
			[ -f "$file" ] && tr -d '\r' <"$file" | grep -Eq -- "$re" && return 0
			_guest_err "$name: ended before its $what showed /$re/"
			return 1
		fi
		sleep "$GUEST_POLL_SEC"
	done
	_guest_err "$name: no /$re/ on its $what within ${timeout}s"
	return 1
}

# guest_wait_console NAME REGEX TIMEOUT
guest_wait_console() {
	_guest_known "$1" || return 1
	_guest_wait_file "$1" "$2" "$3" "${_guest_log[$1]}" console
}

# guest_wait_ctl NAME REGEX TIMEOUT: what the guest wrote to /dev/ttyS1
guest_wait_ctl() {
	_guest_known "$1" || return 1
	_guest_wait_file "$1" "$2" "$3" "${_guest_ctl[$1]}.log" "control channel"
}

# The host end of /dev/ttyS1: one connection held for the guest's lifetime
# (QEMU drops what a client sent if the client hangs up right away), fed
# through a FIFO.  Started by the first guest_send.
_guest_ctl_feeder() {
	local name=$1 fifo=$GUEST_DIR/$1.ctl.in
	rm -f "$fifo"
	mkfifo "$fifo" || return 1
	python3 - "${_guest_ctl[$name]}" "$fifo" <<'EOF' &
import os, socket, sys
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.connect(sys.argv[1])
fifo = os.open(sys.argv[2], os.O_RDWR)  # never sees EOF between writers
while True:
    data = os.read(fifo, 4096)
    try:
        sock.sendall(data)
    except OSError:
        sys.exit(0)  # the guest is gone
EOF
	_guest_feeder[$name]=$!
}

_guest_stop_feeder() {
	local pid=${_guest_feeder[$1]:-}
	[ -n "$pid" ] || return 0
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	unset "_guest_feeder[$1]"
	rm -f "$GUEST_DIR/$1.ctl.in"
}

# guest_send NAME LINE: waits until the guest command runs (the guest keeps
# /dev/ttyS1 open from then on, so nothing sent is lost), then sends.
guest_send() {
	local name=$1 line=$2
	_guest_known "$name" || return 1
	guest_wait_console "$name" '^VMNAP-READY ' "$GUEST_READY_WAIT_SEC" || return 1
	if [ -z "${_guest_feeder[$name]:-}" ]; then
		_guest_ctl_feeder "$name" || return 1
	fi
	kill -0 "${_guest_feeder[$name]}" 2>/dev/null ||
		{ _guest_err "$name: control channel closed"; return 1; }
	printf '%s\n' "$line" | timeout "$GUEST_SOCKET_WAIT_SEC" \
		dd of="$GUEST_DIR/$name.ctl.in" status=none ||
		{ _guest_err "$name: cannot write to the control channel"; return 1; }
}

# guest_qmp NAME JSON...: prints each reply's return value, one line each.
guest_qmp() {
	local name=$1
	shift
	_guest_known "$name" || return 1
	local sock=${_guest_qmp[$name]} deadline=$((SECONDS + GUEST_SOCKET_WAIT_SEC))
	while [ ! -S "$sock" ]; do
		_guest_alive "$name" && [ "$SECONDS" -lt "$deadline" ] ||
			{ _guest_err "$name: no QMP socket $sock"; return 1; }
		sleep "$GUEST_POLL_SEC"
	done
	python3 "$GUEST_LIB_ROOT/scripts/qmp.py" "$sock" "$@"
}

# guest_wait NAME: run-guest.sh's status (the guest command's, or 124/125/123).
# Bounded by the guest's own --timeout.
guest_wait() {
	local name=$1 rc=0
	_guest_known "$name" || return 1
	wait "${_guest_pid[$name]}" || rc=$?
	unset "_guest_pid[$name]"
	_guest_stop_feeder "$name"
	return "$rc"
}

# guest_output NAME: stdout of run-guest.sh (the command's console output).
guest_output() { cat "$GUEST_DIR/$1.out"; }

# guest_kill NAME
guest_kill() {
	local name=$1 pid qpid i
	_guest_known "$name" || return 1
	pid=${_guest_pid[$name]}
	kill -TERM "$pid" 2>/dev/null
	for ((i = 0; i < GUEST_KILL_GRACE_SEC * 5; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep "$GUEST_POLL_SEC"
	done
	if kill -0 "$pid" 2>/dev/null; then
		kill -KILL "$pid" 2>/dev/null
		# run-guest.sh could not clean up: stop its QEMU by pidfile, if
		# that pid still is this guest's QEMU.
		qpid=$(cat "$GUEST_DIR/$name.pid" 2>/dev/null)
		if [ -n "$qpid" ] && tr '\0' ' ' <"/proc/$qpid/cmdline" 2>/dev/null |
			grep -q -- "guest=$name "; then
			kill -KILL "$qpid" 2>/dev/null
		fi
	fi
	wait "$pid" 2>/dev/null
	unset "_guest_pid[$name]"
	_guest_stop_feeder "$name"
	return 0
}

guest_cleanup() {
	local name
	for name in "${!_guest_pid[@]}"; do
		guest_kill "$name"
	done
}

trap guest_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# What every QEMU test needs before it boots: QEMU, each built artefact
# named (a file), and the guest kernel.  Skips the whole test (tap.sh's
# skip, sourced first) with the reason when one is missing.
guest_require() {
	local f

	command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 not installed"
	for f; do
		[ -e "$f" ] || skip "$f not built (make all)"
	done
	"$GUEST_LIB_ROOT/scripts/guest-kernel.sh" >/dev/null 2>&1 ||
		skip "guest kernel unavailable (scripts/guest-kernel.sh)"
}
