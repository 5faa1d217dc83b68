# SPDX-License-Identifier: Apache-2.0
"""TEST FIXTURE: ``aligned_dra_mig`` values the controller's MIG tests share (a dynamic host, and a static one
whose layout ``half`` gives every GPU two ``3g.40gb`` instances, an H100's halves). Never shipped."""

from __future__ import annotations

DYNAMIC = {"mode": "dynamic"}
HALF = {
    "mode": "static",
    "layout": "half",
    "mig_configs": {"half": [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}]},
}
