#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# Run every test layer; see scripts/check.py for the protocol.
exec python3 "$(dirname "$0")/check.py" "$@"
