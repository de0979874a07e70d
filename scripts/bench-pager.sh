#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# bench-pager.sh - the pager side by side with its peers, one run, one store
# file system, the same amount of memory; writes $BUILD/bench/pager.json.
#
#   pager   build/tests/bench/pager_bench bench: a mock VMM (through
#           libvmnap-preload.so) fills MIB of guest RAM with non-zero
#           pages; vmnapd's pager evicts it zero-copy, writing from a
#           read-only mapping of the memfd (evict_gib_s =
#           evict_zero_copy_gib_s = bytes written / offload time;
#           evict_vs_raw_write: its ratio to fio's sequential write), serves LAT_SAMPLES random single-page touches with
#           fault-around 1 (fault_p50_us/p99_us, as the VMM sees a touch),
#           restores the rest by sequential touches with fault-around 16
#           (restore_fault_gib_s), evicts again and streams everything back
#           by eager restore with no touches (restore_prefetch_gib_s),
#           then evicts the same RAM zeroed (zero_evict_gib_s: allocated zero
#           pages, zero check in the mapping + punch, no I/O).
#           Then re-offloads the RAM prefetched back, unwritten
#           (reoffload_clean_gib_s: bytes dropped / offload time;
#           reoffload_written_bytes: 0 with dirty tracking); last, the RAM
#           is filled again and evicted through a pread copy, the fallback
#           (evict_copy_gib_s).
#   dirty   pager_bench writeloop: a write-heavy loop (8 passes, a word per
#           page) over BENCH_WRITELOOP_MIB (128) of RAM restored by faults,
#           BENCH_WRITELOOP_CYCLES (17) cycles, with tracking on and off,
#           in BENCH_WRITELOOP_PAIRS (default 5) pairs run one after the
#           other, each pair's order the other way round from the last's
#           so that drift over the pairs cancels; each figure is the median
#           of the pairs' ratios of the loop's time, tracked over untracked
#           (every pair's in *_pairs): dirty_track_overhead_cold, the first
#           cycle, every page's first write a write-protect fault;
#           dirty_track_overhead, all the cycles after it - the pages come
#           back write-hot (writable), and are checked by sample once their
#           writable restores run out (4, then 8, 16, ...: a fault per
#           block's sample, the rest writable); dirty_track_overhead_hot,
#           those of them whose pages all came back write-hot (no fault);
#           writeloop_faults: the faults of the tracked loop in each cycle,
#           in its first pair (writeloop_hot_samples: the samples in all).
#   contended  pager_bench contended: a delivery's faults (from a resume
#           to its delivery; random single pages of BENCH_CONTENDED_MIB
#           (64) offloaded) while 8 threads write O_DIRECT to a file beside
#           the store, in 64 KiB writes, the other I/O a VM's own disk or
#           another VM's eviction makes; the fault thread's reads in the
#           realtime class (delivery_io_class, the default) against
#           "inherit", in BENCH_CONTENDED_PAIRS (default 5) alternating
#           pairs: delivery_fault_contended_p50_us/_p99_us (realtime) and
#           _inherit_p50_us/_p99_us (medians of the pairs),
#           delivery_fault_contended_ratio (median of each pair's p50
#           ratio, realtime over inherit) and contended_writers_ratio (what
#           the writers got meanwhile, realtime's run over inherit's).
#   host    build/tests/bench/pager_bench maptouch: what touching a page
#           costs a process (the VMM) once the page's mapping is gone,
#           without the pager: a minor fault (minor_fault_us, of it user
#           time minor_fault_user_us), and the first touch of a page the
#           kernel mapped again (remap_touch_us, remap_touch_user_us).  In
#           a nested guest with shadow paging the hypervisor's work shows
#           as the toucher's user time: every page an offload takes away
#           costs the VM that much CPU when it is used again.
#   raw     fio on the same file system, O_DIRECT: sequential write and read
#           of the same bytes in 2 MiB blocks at queue depth 8 (the pager's
#           batch and depth), 4 KiB random reads at depth 1 (clat p50).
#   swap    Linux swap to a swap file on the same file system: the same
#           bytes of anonymous memory in a memory cgroup (v1) are reclaimed
#           by lowering its limit (swap_evict_gib_s) and touched back
#           sequentially (swap_restore_gib_s).  The swap file is created and
#           removed here.
#
# usage: scripts/bench-pager.sh [MIB]     (default $BENCH_PAGER_MIB or 512)
# Environment: VMNAP_BENCH_DIR (default /var/tmp/vmnap-bench-pager) holds the
# store, the fio file and the swap file; BUILD (default build).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
MIB=${1:-${BENCH_PAGER_MIB:-512}}
DIR=${VMNAP_BENCH_DIR:-/var/tmp/vmnap-bench-pager}
OUT=$BUILD/bench/pager.json
NOTES=$BUILD/bench/pager.notes
RAW_QD=8
RAW_BS=2M
RAW_4K_IOS=4000
WL_PAIRS=${BENCH_WRITELOOP_PAIRS:-5}
WL_MIB=${BENCH_WRITELOOP_MIB:-128}
WL_CYCLES=${BENCH_WRITELOOP_CYCLES:-17}
CT_PAIRS=${BENCH_CONTENDED_PAIRS:-5}
CT_MIB=${BENCH_CONTENDED_MIB:-64}
SWAP_EXTRA_MIB=128
HARNESS=$BUILD/tests/bench/pager_bench

die() { echo "bench-pager: $*" >&2; exit 1; }
[[ $WL_PAIRS =~ ^[1-9][0-9]*$ ]] || die "BENCH_WRITELOOP_PAIRS must be a positive count, not '$WL_PAIRS'"
[[ $WL_MIB =~ ^[1-9][0-9]*$ ]] || die "BENCH_WRITELOOP_MIB must be a positive size, not '$WL_MIB'"
[[ $WL_CYCLES =~ ^[0-9]+$ ]] && ((WL_CYCLES >= 2 && WL_CYCLES <= 1024)) ||
	die "BENCH_WRITELOOP_CYCLES must be 2 to 1024, not '$WL_CYCLES'"
[[ $CT_PAIRS =~ ^[1-9][0-9]*$ ]] || die "BENCH_CONTENDED_PAIRS must be a positive count, not '$CT_PAIRS'"
[[ $CT_MIB =~ ^[1-9][0-9]*$ ]] || die "BENCH_CONTENDED_MIB must be a positive size, not '$CT_MIB'"
[ "$(id -u)" = 0 ] || die "needs root (userfaultfd of another process, swapon, cgroups)"
[ -x "$HARNESS" ] || die "$HARNESS not built: make userspace"
command -v fio >/dev/null || die "fio missing: make deps"
mkdir -p "$BUILD/bench" "$DIR"
chmod 0700 "$DIR"
rm -rf "$DIR/store"
mkdir -m 0700 "$DIR/store"
fs=$(df -PT "$DIR" | awk 'NR == 2 { print $2 " on " $1 }')
bytes=$((MIB << 20))
swapfile=$DIR/swapfile
cg=
cleanup() {
	swapoff "$swapfile" 2>/dev/null || true
	rm -f "$swapfile" "$DIR/raw.fio"
	rm -rf "$DIR/store"
	[ -n "$cg" ] && rmdir "$cg" 2>/dev/null
	return 0
}
trap cleanup EXIT

echo "bench-pager: $MIB MiB, store file system $fs ($DIR)" >&2

# 1. the pager
pager=$(PAGER_STORE_DIR=$DIR/store "$HARNESS" bench "$MIB") || die "pager run failed"
echo "bench-pager: pager $pager" >&2

# alternate WHAT N RUN A B: N pairs of "RUN A" and "RUN B" (one run's JSON
# each), each pair's order the other way round from the last's (A/B,
# B/A, ...) so that drift over the pairs cancels: one pair's ratio is
# this machine's drift as much as what differs.  The runs as JSON lists
# in $pairs_a and $pairs_b.
alternate() {
	local what=$1 n=$2 run=$3 a=$4 b=$5 i ja jb
	pairs_a= pairs_b=
	for ((i = 0; i < n; i++)); do
		if ((i % 2)); then
			jb=$("$run" "$b")
			ja=$("$run" "$a")
		else
			ja=$("$run" "$a")
			jb=$("$run" "$b")
		fi
		echo "bench-pager: $what pair $((i + 1))/$n: $a $ja, $b $jb" >&2
		pairs_a=${pairs_a:+$pairs_a,}$ja
		pairs_b=${pairs_b:+$pairs_b,}$jb
	done
	pairs_a="[$pairs_a]" pairs_b="[$pairs_b]"
}

# 1b. dirty tracking's cost to the VMM: a write-heavy loop (8 passes, a word
# per page) over RAM restored by faults, tracking on vs off, in alternating
# pairs
writeloop() {	# writeloop on|off: one run's JSON
	if [ "$1" = on ]; then
		PAGER_STORE_DIR=$DIR/store "$HARNESS" writeloop "$WL_MIB" 8 "$WL_CYCLES"
	else
		VMNAPD_DIRTY_TRACKING=none PAGER_STORE_DIR=$DIR/store \
			"$HARNESS" writeloop "$WL_MIB" 8 "$WL_CYCLES"
	fi || die "writeloop run (tracking $1) failed"
}
alternate writeloop "$WL_PAIRS" writeloop on off
wl_on=$pairs_a wl_off=$pairs_b

# 1c. a delivery's faults under other I/O: realtime reads against inherit,
# in alternating pairs
contended() {	# contended realtime|inherit: one run's JSON
	PAGER_STORE_DIR=$DIR/store "$HARNESS" contended "$1" "$CT_MIB" ||
		die "contended run ($1) failed"
}
alternate contended "$CT_PAIRS" contended realtime inherit
ct_rt=$pairs_a ct_in=$pairs_b

# 1d. the host's own cost of mapping a page again
host=$("$HARNESS" maptouch "$MIB") || die "maptouch run failed"
echo "bench-pager: host $host" >&2

# 2. raw device figures with fio
fio_json() { fio --output-format=json --filename="$DIR/raw.fio" --direct=1 "$@"; }
raw_w=$(fio_json --name=w --rw=write --bs=$RAW_BS --iodepth=$RAW_QD --ioengine=io_uring \
	--size="$bytes" --end_fsync=1)
raw_r=$(fio_json --name=r --rw=read --bs=$RAW_BS --iodepth=$RAW_QD --ioengine=io_uring \
	--size="$bytes")
raw_4k=$(fio_json --name=r4k --rw=randread --bs=4k --iodepth=1 --ioengine=psync \
	--size="$bytes" --number_ios=$RAW_4K_IOS)

# 3. Linux swap
swap='{"swap_evict_gib_s": null, "swap_restore_gib_s": null}'
swap_note=
if fallocate -l $(((MIB + SWAP_EXTRA_MIB) << 20)) "$swapfile" && chmod 600 "$swapfile" &&
	mkswap "$swapfile" >/dev/null && swapon "$swapfile" 2>"$DIR/swapon.err"; then
	cg=/sys/fs/cgroup/memory$(sed -n 's/^[0-9]*:memory:\(.*\)$/\1/p' /proc/self/cgroup)
	cg=${cg%/}/vmnap-bench-swap
	if mkdir -p "$cg" 2>/dev/null; then
		swap=$("$HARNESS" swap "$MIB" "$cg") || { swap_note="swap run failed"; swap='{"swap_evict_gib_s": null, "swap_restore_gib_s": null}'; }
	else
		swap_note="no memory cgroup (v1) to reclaim in"
	fi
	swapoff "$swapfile"
else
	swap_note="swapon impossible here: $(cat "$DIR/swapon.err" 2>/dev/null)"
fi
rm -f "$DIR/swapon.err"
echo "bench-pager: swap $swap ${swap_note}" >&2

python3 - "$OUT" "$pager" "$raw_w" "$raw_r" "$raw_4k" "$swap" "$wl_on" "$wl_off" "$host" \
	"$ct_rt" "$ct_in" <<'EOF'
import json, statistics, sys
out, pager, w, r, r4k, swap, wl_on, wl_off, host, ct_rt, ct_in = \
    sys.argv[1], *[json.loads(a) for a in sys.argv[2:]]
GIB = float(1 << 30)


def ratios(cycles):
    """Each pair's tracked / untracked loop time over the cycles
    cycles(tracked run) picks."""
    out = []
    for a, b in zip(wl_on, wl_off):
        cs = cycles(a)
        out.append(round(sum(a["writeloop_ns"][c] for c in cs) /
                         sum(b["writeloop_ns"][c] for c in cs), 3) if cs else None)
    return out


def median(xs):
    xs = [x for x in xs if x is not None]
    return round(statistics.median(xs), 3) if xs else None


def cold(run):
    return [0]


def steady(run):
    return range(1, len(run["writeloop_ns"]))


def hot(run):
    return [c for c in steady(run) if run["writeloop_faults"][c] == 0]


res = {
    "bytes": pager["bytes"],
    "nonzero_bytes": pager["nonzero_bytes"],
    "evict_gib_s": pager["evict_gib_s"],
    "evict_zero_copy_gib_s": pager["evict_zero_copy_gib_s"],
    "evict_copy_gib_s": pager["evict_copy_gib_s"],
    "raw_write_gib_s": round(w["jobs"][0]["write"]["bw_bytes"] / GIB, 3),
    "zero_evict_gib_s": pager["zero_evict_gib_s"],
    "fault_p50_us": pager["fault_p50_us"],
    "fault_p99_us": pager["fault_p99_us"],
    "raw_read4k_p50_us": round(r4k["jobs"][0]["read"]["clat_ns"]["percentile"]["50.000000"] / 1000.0, 1),
    "restore_fault_gib_s": pager["restore_fault_gib_s"],
    "restore_prefetch_gib_s": pager["restore_prefetch_gib_s"],
    "raw_seq_read_gib_s": round(r["jobs"][0]["read"]["bw_bytes"] / GIB, 3),
    "swap_evict_gib_s": swap["swap_evict_gib_s"],
    "swap_restore_gib_s": swap["swap_restore_gib_s"],
    "reoffload_clean_gib_s": pager["reoffload_clean_gib_s"],
    "reoffload_written_bytes": pager["reoffload_written_bytes"],
    "dirty_tracking": wl_on[0]["dirty_tracking"],
    "dirty_track_overhead": median(ratios(steady)),
    "dirty_track_overhead_pairs": ratios(steady),
    "dirty_track_overhead_hot": median(ratios(hot)),
    "dirty_track_overhead_hot_pairs": ratios(hot),
    "dirty_track_overhead_cold": median(ratios(cold)),
    "dirty_track_overhead_cold_pairs": ratios(cold),
    "writeloop_mib": wl_on[0]["mib"],
    "writeloop_faults": wl_on[0]["writeloop_faults"],
    "writeloop_hot_again_pages": wl_on[0]["hot_again_pages"],
    "writeloop_hot_samples": wl_on[0]["hot_samples"],
    "writeloop_hot_vouch_renewed_pages": wl_on[0]["hot_vouch_renewed_pages"],
    "minor_fault_us": host["minor_fault_us"],
    "minor_fault_user_us": host["minor_fault_user_us"],
    "remap_touch_us": host["remap_touch_us"],
    "remap_touch_user_us": host["remap_touch_user_us"],
}
if any(a["delivery_io_class"] != "realtime" for a in ct_rt):
    sys.exit("bench-pager: the realtime runs' reads were not realtime: "
             + ", ".join(a["delivery_io_class"] for a in ct_rt))
res.update({
    "delivery_fault_contended_p50_us": median(a["fault_p50_us"] for a in ct_rt),
    "delivery_fault_contended_p99_us": median(a["fault_p99_us"] for a in ct_rt),
    "delivery_fault_contended_inherit_p50_us": median(b["fault_p50_us"] for b in ct_in),
    "delivery_fault_contended_inherit_p99_us": median(b["fault_p99_us"] for b in ct_in),
    "delivery_fault_contended_ratio": median(a["fault_p50_us"] / b["fault_p50_us"]
                                             for a, b in zip(ct_rt, ct_in) if b["fault_p50_us"]),
    "delivery_fault_contended_ratio_pairs": [round(a["fault_p50_us"] / b["fault_p50_us"], 3)
                                             if b["fault_p50_us"] else None
                                             for a, b in zip(ct_rt, ct_in)],
    "contended_writers_ratio": median(a["writers_mib_s"] / b["writers_mib_s"]
                                      for a, b in zip(ct_rt, ct_in) if b["writers_mib_s"]),
    "delivery_fault_contended_faults": ct_rt[0]["faults"],
})
res["evict_vs_raw_write"] = round(res["evict_zero_copy_gib_s"] / res["raw_write_gib_s"], 3) \
    if res["raw_write_gib_s"] else None
with open(out, "w") as f:
    json.dump(res, f, indent=1)
    f.write("\n")
print(json.dumps(res, indent=1))
EOF
{
	echo "bench-pager $(date -u +%FT%TZ): $MIB MiB on $fs; $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
	[ -n "$swap_note" ] && echo "swap: $swap_note"
} >"$NOTES"
echo "bench-pager: wrote $OUT" >&2
