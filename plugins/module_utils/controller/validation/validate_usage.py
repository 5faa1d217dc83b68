# SPDX-License-Identifier: Apache-2.0
"""The validation stage's check of ``aligned_dra_usage``: a setting that cannot work is refused before any run.

The check itself is the usage package's (``usage/settings``), the one the
utilization stage runs: the validation says the same, earlier, per host.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.usage import UsageError
from ansible_collections.aligned.dra.plugins.module_utils.controller.usage import settings as usage_settings

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

VARIABLE = "aligned_dra_usage"


def usage_problems(value: Any) -> list[str]:
    """The reasons ``aligned_dra_usage`` is refused (none when it can work)."""
    try:
        usage_settings.check(value, VARIABLE)
    except UsageError as exc:
        return [str(exc)]
    return []
