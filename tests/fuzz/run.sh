#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# run.sh - run libFuzzer targets built by tests/fuzz/build.mk.
#
#   tests/fuzz/run.sh --seconds N NAME...   fuzz each NAME for N seconds,
#                                           growing $BUILD/fuzz/corpus/NAME
#   tests/fuzz/run.sh --runs N NAME...      smoke: N inputs from a fixed seed
#                                           on a fresh corpus (make check)
#
# Seeds are regenerated from valid messages (gen_corpus) on every run.  Exit
# status 0 when every target ran clean, 1 when one crashed, leaked, hit
# undefined behaviour, timed out or broke a contract check (the input that
# did it is saved under $BUILD/fuzz/artifacts/).
set -u

BUILD=${BUILD:-build}
FUZZ_DIR=$BUILD/fuzz
TIMEOUT_PER_INPUT=10	# seconds before one input counts as a hang
RSS_LIMIT_MB=2048
MAX_LEN=196608		# a few maximal messages plus script bytes

die() { echo "fuzz: $*"; exit 1; }

[ $# -ge 3 ] || die "usage: run.sh --seconds N|--runs N NAME..."
mode=$1 count=$2
shift 2
case $mode in
--seconds) budget="-max_total_time=$count" ;;
--runs) budget="-runs=$count -seed=1" ;;
*) die "unknown mode $mode" ;;
esac

[ -x "$FUZZ_DIR/gen_corpus" ] || die "$FUZZ_DIR/gen_corpus missing: run make first"
rm -rf "$FUZZ_DIR/seeds"
"$FUZZ_DIR/gen_corpus" "$FUZZ_DIR/seeds" || die "cannot write the seed corpus"
mkdir -p "$FUZZ_DIR/artifacts"

failed=0
for name in "$@"; do
	bin=$FUZZ_DIR/$name
	[ -x "$bin" ] || die "$bin missing: run make first"
	if [ "$mode" = --runs ]; then
		corpus=$FUZZ_DIR/smoke/$name
		rm -rf "$corpus"
	else
		corpus=$FUZZ_DIR/corpus/$name
	fi
	mkdir -p "$corpus"
	# -error_exitcode: libFuzzer's default 77 would read as "skipped".
	# shellcheck disable=SC2086
	"$bin" $budget -error_exitcode=1 -timeout_exitcode=1 \
		-timeout=$TIMEOUT_PER_INPUT -rss_limit_mb=$RSS_LIMIT_MB \
		-max_len=$MAX_LEN -print_final_stats=1 \
		-artifact_prefix="$FUZZ_DIR/artifacts/$name-" \
		"$corpus" "$FUZZ_DIR/seeds/$name" 2>&1
	rc=$?
	if [ $rc -ne 0 ]; then
		echo "fuzz $name: FAILED (exit $rc), input saved in $FUZZ_DIR/artifacts/"
		failed=1
	else
		echo "fuzz $name: clean ($mode $count)"
	fi
done
[ $failed -eq 0 ] || die "a target failed"
echo "fuzz: $# target(s) clean"
