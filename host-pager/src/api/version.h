/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * version.h - vmnapd's version: --version, the ready log line, /metrics.
 * The build passes VERSION's content as VMNAP_VERSION (scripts/pkg.mk) to
 * every file that includes this.
 */
#ifndef VMNAP_VERSION_H
#define VMNAP_VERSION_H

#ifndef VMNAP_VERSION
#define VMNAP_VERSION		"unknown"
#endif
#define VMNAPD_VERSION		VMNAP_VERSION

#endif
