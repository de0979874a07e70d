# SPDX-License-Identifier: GPL-2.0-only
# make bench-vsock: 256 MiB each way through vmnapd's vhost-user-vsock device
# and, side by side in the same guest, through QEMU user-mode networking
# (virtio-net + slirp, TCP); writes $(BUILD)/bench/vsock.json.
BENCH_TARGETS += bench-vsock
.PHONY: bench-vsock
bench-vsock: $(BUILD)/vmnapd $(BUILD)/tests/selftests/vsock_xfer
	@BUILD=$(BUILD) scripts/bench-vsock.sh
