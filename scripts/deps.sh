#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# deps.sh - install every Debian package vmnap needs to build, test and demo.
#
# Idempotent: packages already installed are skipped; `apt-get update` runs
# only when the package lists are missing or a package cannot be found.
# Must run as root on Debian bookworm (or a derivative with the same names).
set -euo pipefail

PACKAGES=(
	# toolchain and kernel module build
	build-essential clang libclang-rt-dev llvm lld pkg-config bc bison flex kmod
	linux-headers-amd64 libelf-dev
	dwarves		# pahole: 6.12 guest headers give modules BTF at link
	# KUnit on UML, built from Debian's kernel source
	linux-source-6.1 python3
	# userspace libraries (maintained libraries, not hand-written code)
	liburing-dev libnl-3-dev libnl-genl-3-dev libkmod-dev libcmocka-dev
	libmicrohttpd-dev libjansson-dev libsystemd-dev libcurl4-openssl-dev
	# guest image and launcher
	qemu-system-x86 qemu-utils busybox-static cpio zstd xz-utils e2fsprogs
	debootstrap
	# tests, demo and benchmarks
	curl jq socat fio gnuplot-nox util-linux procps iproute2
	linux-perf	# replay --sched-trace: the host's context switches
	# api/openapi.yaml and examples/ checks (tests/api/openapi.py, tests/examples)
	python3-yaml python3-jsonschema
	# packaging: make install / make deb (man pages, .debs, DKMS, lintian)
	help2man debhelper dh-dkms dkms lintian
	nginx		# bench-gateway's peer: nginx as a reverse proxy
	# replay benchmark: static in-guest exec agent (jansson + nettle)
	nettle-dev
)

die() { echo "deps: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "must run as root (packages are installed with apt-get); try: sudo make deps"
command -v apt-get >/dev/null && command -v dpkg-query >/dev/null ||
	die "apt-get/dpkg not found: vmnap's set-up needs a Debian bookworm system"

missing=()
for p in "${PACKAGES[@]}"; do
	st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
	[ "$st" = installed ] || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
	echo "deps: all ${#PACKAGES[@]} packages present"
	exit 0
fi

echo "deps: installing ${#missing[@]} package(s): ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
if ! ls /var/lib/apt/lists/*_Packages* >/dev/null 2>&1 ||
   ! apt-cache show "${missing[@]}" >/dev/null 2>&1; then
	apt-get update -q || die "apt-get update failed: check /etc/apt/sources.list and the network"
fi
apt-get install -y -q --no-install-recommends "${missing[@]}" ||
	die "apt-get install failed for: ${missing[*]}"
echo "deps: done"
