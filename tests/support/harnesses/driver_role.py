# SPDX-License-Identifier: Apache-2.0
"""TEST HELPER: the driver role run by ``ansible-playbook`` without a node, and the units it renders read back.
Never shipped.

- ``inventory``, ``playbook``, ``changed``: an inventory of two nodes, playbooks/driver.yml run on it, the
  recap's count of changed tasks; ``IMAGE``: the image those runs name;
- ``render``: one template of the driver role rendered with the role's defaults;
- ``directives``, ``exec_start_argv``: a systemd unit's directives, and its ExecStart split as systemd splits it.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

from ansible_collections.aligned.dra.tests.support.harnesses.playbook_runs import (
    PLAYBOOKS,
    REPO,
    environment,
    run_on_localhost,
    run_playbook,
    write_inventory,
    write_play,
)

ROLES = REPO / "roles"


IMAGE = "registry.example.com/aligned-dra-driver:0.1.0"


def inventory(tmp_path: Path, hosts: dict[str, dict] | None = None, **common) -> Path:
    variables = {"aligned_dra_output_dir": str(tmp_path / "output"), "aligned_dra_site": "lab", **common}
    return write_inventory(tmp_path / "inventory.yml", hosts or {"node-a": {}, "node-b": {}}, variables)


def playbook(inv: Path, *args: str) -> subprocess.CompletedProcess:
    return run_playbook(inv, PLAYBOOKS / "driver.yml", *args)


def changed(proc: subprocess.CompletedProcess) -> int:
    counts = [int(n) for n in re.findall(r"changed=(\d+)", proc.output)]  # type: ignore[attr-defined]
    assert counts, proc.output  # type: ignore[attr-defined]
    return sum(counts)


def render(tmp_path: Path, template: str, **overrides) -> str:
    """One template of the driver role rendered with the role's defaults and ``overrides``."""
    settings = {
        "kubelet_dir": "/var/lib/kubelet",
        "cdi_dir": "/var/run/cdi",
        "state_dir": "/var/lib/aligned-dra",
        "mps_root": "/run/aligned-dra/mps",
        "exclude": overrides.pop("exclude", []),
        "log_level": "INFO",
    }
    out = tmp_path / template.removesuffix(".j2")
    play = [
        {
            "name": "render",
            "hosts": "localhost",
            "gather_facts": False,
            "vars_files": [str(ROLES / "driver" / "defaults" / "main.yml")],
            "tasks": [
                {
                    "ansible.builtin.template": {
                        "src": str(ROLES / "driver" / "templates" / template),
                        "dest": str(out),
                        "mode": "0644",
                    }
                }
            ],
        }
    ]
    extra = {"aligned_dra_driver_settings": settings, "aligned_dra_driver_node_name": "gpu-node-1", **overrides}
    proc = run_on_localhost(
        write_play(tmp_path / "render.yml", play),
        extra_vars=extra,
        env=environment(ANSIBLE_CONFIG=str(REPO / "ansible.cfg")),
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out.read_text()


def directives(unit: str) -> dict[str, str]:
    joined = re.sub(r"\\\n", " ", unit)
    pairs = (line.split("=", 1) for line in joined.splitlines() if "=" in line and not line.startswith("#"))
    return {k.strip(): v.strip() for k, v in pairs}


def exec_start_argv(unit: str) -> list[str]:
    """ExecStart split as systemd does for the quoting the template uses (\\\\ and \\" in double quotes)."""
    words = shlex.split(directives(unit)["ExecStart"], posix=True)
    return [w.replace("%%", "%").replace("$$", "$") for w in words]
