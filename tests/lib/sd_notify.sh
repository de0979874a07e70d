# SPDX-License-Identifier: GPL-2.0-only
# shellcheck shell=bash
#
# sd_notify.sh - a datagram socket standing in for systemd's NOTIFY_SOCKET
# (source it from the repository root).
#
#   sd_notify_listen SOCK LOG
#       bind SOCK and append every datagram received to LOG, a line each,
#       in the background (it gives up after 20 s without one); returns
#       once SOCK exists, the listener's pid in $SD_NOTIFY_PID.

sd_notify_listen() {
	local i
	python3 - "$1" >"$2" <<'PY' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
s.settimeout(20)
try:
    while True:
        print(s.recv(4096).decode(), flush=True)
except OSError:
    pass
PY
	SD_NOTIFY_PID=$!
	for ((i = 0; i < 100; i++)); do [ -S "$1" ] && break; sleep 0.05; done
}
