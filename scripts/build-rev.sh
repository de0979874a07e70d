#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
#
# build-rev.sh REV: build vmnapd and the preload shim of a git revision of
# this repository, for the replay benchmark's offload-alt cohort (the
# offload cohort with that build, run beside this tree's: an A/B of two
# builds on the same machine at the same moments).
#
# The revision is exported with `git archive` (the working tree and the
# repository's worktrees are not touched) into a scratch directory and
# built there; the two binaries and a REV file (the commit, its one-line
# subject) go to $VMNAP_CACHE/builds/<commit>/, which is printed on the last
# line.  A directory already there is reused: a commit's build never
# changes.
set -eu

usage() {
	echo "usage: scripts/build-rev.sh REV    (a commit, tag or branch of this repository)" >&2
	exit 2
}
case "${1:-}" in
-h|--help) echo "build vmnapd and libvmnap-preload.so of git revision REV into" \
	"\$VMNAP_CACHE/builds/<commit>/ and print that directory"; exit 0 ;;
"") usage ;;
esac
[ $# -eq 1 ] || usage

root=$(cd "$(dirname "$0")/.." && pwd)
cache=${VMNAP_CACHE:-/var/cache/vmnap}
if ! sha=$(git -C "$root" rev-parse --verify --quiet "$1^{commit}"); then
	echo "build-rev: '$1' is not a commit of $root" >&2
	exit 1
fi
out=$cache/builds/$sha
if [ -x "$out/vmnapd" ] && [ -f "$out/libvmnap-preload.so" ] && [ -f "$out/REV" ]; then
	echo "$out"
	exit 0
fi
mkdir -p "$cache/builds"
tmp=$(mktemp -d "$cache/builds/.build-$sha.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "build-rev: building vmnapd and the shim of $(git -C "$root" log -1 --format='%h %s' "$sha")" >&2
git -C "$root" archive --format=tar "$sha" | tar -x -C "$tmp/"
mkdir "$tmp/out"
# Only the two userspace targets: no module, no guest, no KDIR lookup.
if ! make -C "$tmp" -j"$(nproc)" KDIR=/nonexistent build/vmnapd build/libvmnap-preload.so \
	>"$tmp/out/make.log" 2>&1; then
	tail -20 "$tmp/out/make.log" >&2
	echo "build-rev: the build of $sha failed (log above)" >&2
	exit 1
fi
cp "$tmp/build/vmnapd" "$tmp/build/libvmnap-preload.so" "$tmp/out/"
git -C "$root" log -1 --format='%H %s' "$sha" >"$tmp/out/REV"
rm -f "$tmp/out/make.log"
# Another build of the same commit may have finished first: keep that one.
mv -T "$tmp/out" "$out" 2>/dev/null || [ -f "$out/REV" ]
echo "$out"
