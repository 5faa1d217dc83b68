# SPDX-License-Identifier: Apache-2.0
"""``python -m aligned_dra_driver``."""

import sys

from .cli import main

sys.exit(main())
