# SPDX-License-Identifier: GPL-2.0-only
# make bench-gateway: vmnap-gateway's proxy overhead (1 and 64 concurrent
# streams, SSE events, req/s) against direct requests and nginx as a reverse
# proxy to the same fake model server; writes
# $(BUILD)/bench/gateway/<run-id>/summary.json (scripts/bench-gateway.sh).
# About a minute.  Bigger: make bench-gateway GATEWAY_BENCH_ARGS="--rounds 5"
GATEWAY_BENCH_ARGS	?=

BENCH_TARGETS += bench-gateway
.PHONY: bench-gateway
bench-gateway: $(BUILD)/vmnap-gateway $(BUILD)/vmnapd | deps
	@BUILD=$(BUILD) scripts/bench-gateway.sh $(GATEWAY_BENCH_ARGS)
