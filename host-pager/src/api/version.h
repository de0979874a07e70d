/* SPDX-License-Identifier: GPL-2.0-only */
/* version.h - vmnapd's version: --version, the ready log line, /metrics. */
#ifndef VMNAP_VERSION_H
#define VMNAP_VERSION_H

#define VMNAPD_VERSION		"0.1.0"

#endif
