# SPDX-License-Identifier: Apache-2.0
"""TEST HELPER: local inventories, ansible-playbook runs and their recap, for the role tests. Never shipped."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
PLAYBOOKS = REPO / "playbooks"


def write_inventory(path: Path, hosts: Iterable[str], variables: dict[str, Any]) -> Path:
    """An ``aligned_dra_nodes`` group of ``hosts`` run on this machine, with group ``variables``."""
    inventory = {
        "aligned_dra_nodes": {
            "hosts": {name: {} for name in hosts},
            "vars": {
                "ansible_connection": "local",
                "ansible_python_interpreter": "{{ ansible_playbook_python }}",
                **variables,
            },
        }
    }
    path.write_text(yaml.safe_dump(inventory))
    return path


def run_playbook(inventory: Path, play: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["ansible-playbook", "-i", str(inventory), str(play), *args], capture_output=True, text=True, check=False
    )


def recap(stdout: str) -> dict[str, int]:
    """``changed`` and ``failed`` of the PLAY RECAP, summed over its hosts."""
    found = {"changed": 0, "failed": 0}
    for key, value in re.findall(r"\b(changed|failed)=(\d+)", stdout.split("PLAY RECAP")[-1]):
        found[key] += int(value)
    return found
