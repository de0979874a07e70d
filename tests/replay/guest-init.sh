#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
#
# vmnap-replay-init - the replay guest's command (installed in the rootfs
# image as /usr/local/sbin/vmnap-replay-init by scripts/guest-rootfs.sh).
#
#   vmnap-replay-init          make /srv/project a git repository with one
#                              commit (fixed author and dates, so every guest
#                              holds the same objects), start the exec agent
#                              on vsock port $AGENT_PORT and, when present, on
#                              the host control line /dev/ttyS1, print
#                              VMNAP-REPLAY-READY and serve until stopped
#   vmnap-replay-init stop     (run through the agent) end the agents, so the
#                              first form returns and the guest powers off
# With VMNAP_LOAD_MODULE=1 the first form loads vmnap.ko (the guest link to
# vmnapd; the launcher leaves it in /run/vmnap) before the agents start.
set -u

AGENT=/usr/local/sbin/vmnap-exec-agent
AGENT_PORT=${VMNAP_AGENT_PORT:-1234}
CTL_TTY=/dev/ttyS1
WORKSPACE=/srv/project
PIDFILE=/run/vmnap-replay-agents
MODULE=/run/vmnap/vmnap.ko
FIXED_DATE="2026-01-01T00:00:00Z"

if [ "${1:-}" = stop ]; then
	# Reply first (the agent is serving us), then end the agents.
	( sleep 1; kill $(cat "$PIDFILE") 2>/dev/null ) >/dev/null 2>&1 &
	exit 0
fi

mountpoint -q /proc || mount -t proc proc /proc
mountpoint -q /tmp || mount -t tmpfs -o nosuid,nodev tmpfs /tmp

export HOME=/root LANG=C.UTF-8 GIT_PAGER=cat
export GIT_AUTHOR_NAME=vmnap GIT_AUTHOR_EMAIL=vmnap@localhost
export GIT_COMMITTER_NAME=vmnap GIT_COMMITTER_EMAIL=vmnap@localhost
export GIT_AUTHOR_DATE=$FIXED_DATE GIT_COMMITTER_DATE=$FIXED_DATE
cd "$WORKSPACE" || { echo "replay-init: no $WORKSPACE"; exit 1; }
if [ ! -d .git ]; then
	git init -q -b main . && git add -A && git commit -q -m "inventory: initial import" ||
		{ echo "replay-init: git set-up failed"; exit 1; }
fi
echo "replay-init: workspace $(git rev-parse HEAD)"

if [ "${VMNAP_LOAD_MODULE:-0}" = 1 ]; then
	insmod "$MODULE" || { echo "replay-init: insmod $MODULE failed"; exit 1; }
	echo "replay-init: vmnap.ko loaded"
fi

pids=
"$AGENT" --port "$AGENT_PORT" </dev/null &
pids="$pids $!"
if [ -c "$CTL_TTY" ]; then
	"$AGENT" --tty "$CTL_TTY" </dev/null &
	pids="$pids $!"
fi
echo "$pids" >"$PIDFILE"
echo "VMNAP-REPLAY-READY"
wait
echo "replay-init: agents stopped"
