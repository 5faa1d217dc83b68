# SPDX-License-Identifier: Apache-2.0
"""Write a JSON result file only when its content changes, for modules that
keep a result on disk (``plan.json``, ``teams.json``, ``utilization.json``).

No Ansible imports; Python >= 3.9.
"""

from __future__ import annotations

import json
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def write_json_file(dest: str, data: Any, check_mode: bool) -> tuple[bool, dict[str, str]]:
    """Write ``data`` to ``dest`` as indented JSON with sorted keys.

    Returns ``(changed, diff)``; the diff is in Ansible's before/after form
    and empty when nothing changes. In check mode nothing is written. The file
    is replaced atomically, so a reader never sees half of it.
    """
    content = json.dumps(data, indent=2, sort_keys=True) + "\n"
    old = None
    if os.path.exists(dest):
        with open(dest, encoding="utf-8") as handle:
            old = handle.read()
    if old == content:
        return False, {}
    if not check_mode:
        os.makedirs(os.path.dirname(os.path.abspath(dest)), exist_ok=True)
        tmp = dest + ".tmp"
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(content)
        os.replace(tmp, dest)
    return True, {"before": old or "", "after": content, "before_header": dest, "after_header": dest}
