# SPDX-License-Identifier: Apache-2.0
"""Host-mode removal (roles/driver/tasks/absent.yml) keeps what other roles keep next to the driver.

The network roles write their boot-time state (rdma.json, sriov.json) into
/etc/aligned-dra, the driver's configuration directory by default: removing
the driver takes its kubeconfig and leaves their files, and removes the
directory only when nothing else is in it. The site's rails file goes from the
node and from the controller's output even while the rule is still set. Runs
on the controller (local connection) with every path of the role in a
temporary directory.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ansible_collections.aligned.dra.tests.support.harnesses.playbook_runs import (
    PLAYBOOKS,
    run_playbook,
    write_inventory,
)


def remove(tmp_path: Path, *args: str, **settings: object) -> subprocess.CompletedProcess:
    root = tmp_path / "node"
    host = {
        "aligned_dra_output_dir": str(tmp_path / "output"),
        "aligned_dra_site": "lab",
        "aligned_dra_driver_state": "absent",
        "aligned_dra_driver_write": False,
        "aligned_dra_driver_prefix": str(root / "opt"),
        "aligned_dra_driver_config_dir": str(root / "etc"),
        "aligned_dra_driver_state_dir": str(root / "state"),
        "aligned_dra_driver_kubelet_dir": str(root / "kubelet"),
        "aligned_dra_driver_cdi_dir": str(root / "cdi"),
        "aligned_dra_driver_mps_root": str(root / "mps"),
        **settings,
    }
    inv = write_inventory(tmp_path / "inventory.yml", {"node-a": host}, {})
    return run_playbook(inv, PLAYBOOKS / "driver.yml", *args)


@pytest.fixture
def installed(tmp_path):
    root = tmp_path / "node"
    for name in ("opt/venv", "etc", "state", "kubelet/plugins/dra.aligned.dev", "cdi", "mps"):
        (root / name).mkdir(parents=True)
    (root / "etc" / "kubeconfig").write_text("apiVersion: v1\n")
    (root / "state" / "checkpoint.json").write_text('{"version": 1, "claims": {}}\n')
    return root


@pytest.mark.slow
def test_removal_keeps_the_network_state_next_to_the_kubeconfig_and_takes_the_rails_file(tmp_path, installed):
    (installed / "etc" / "sriov.json").write_text("{}\n")
    (installed / "etc" / "rails.json").write_text('{"version": 1, "rules": [], "nodes": {}}\n')
    review = tmp_path / "output" / "lab" / "driver" / "rails.json"  # the site's file as the controller wrote it
    review.parent.mkdir(parents=True)
    review.write_text("{}\n")
    rails = {"aligned_dra_rails": {"by": "pci_order", "count": 2}}  # still set: state absent removes the file
    check = remove(tmp_path, "--check", **rails)
    assert check.returncode == 0, check.output  # type: ignore[attr-defined]
    assert (installed / "etc" / "kubeconfig").exists()
    assert (installed / "etc" / "rails.json").exists() and review.exists()

    proc = remove(tmp_path, **rails)
    assert proc.returncode == 0, proc.output  # type: ignore[attr-defined]
    assert sorted(p.name for p in (installed / "etc").iterdir()) == ["sriov.json"]
    assert not (installed / "opt").exists() and not (installed / "state").exists()
    assert not review.exists()
    again = remove(tmp_path, **rails)
    assert again.returncode == 0, again.output  # type: ignore[attr-defined]
    assert "changed=0" in again.output  # type: ignore[attr-defined]


@pytest.mark.slow
def test_removal_takes_the_directory_when_only_the_driver_used_it(tmp_path, installed):
    proc = remove(tmp_path)
    assert proc.returncode == 0, proc.output  # type: ignore[attr-defined]
    assert not (installed / "etc").exists()
    assert not (installed / "kubelet" / "plugins" / "dra.aligned.dev").exists()
