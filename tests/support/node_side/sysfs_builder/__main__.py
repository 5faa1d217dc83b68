# SPDX-License-Identifier: Apache-2.0
"""``python tests/support/node_side/sysfs_builder LAYOUT OUTDIR [--list]``: build one tree (see the package's docstring)."""

import os
import sys

if not __package__:
    # Run as a directory: its parent (tests/support/node_side/) holds the package.
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    from sysfs_builder import main
else:
    from . import main

sys.exit(main())
