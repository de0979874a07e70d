#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""replay.py - the vmnap trajectory replay benchmark; the code is the
package scripts/replay/ (see its __init__.py), the usage in replay/cli.py.

    scripts/replay.py {run,record,probe,table} ...
"""
import sys

from replay.cli import main  # the package scripts/replay/, next to this file

if __name__ == "__main__":
    sys.exit(main())
