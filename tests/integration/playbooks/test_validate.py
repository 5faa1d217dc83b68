# SPDX-License-Identifier: Apache-2.0
"""playbooks/validate.yml: one bad value on the last host of a site stops site.yml in the
validation stage, with a message that names host, variable, value and reason, before any
node or output file changed; an unknown aligned_dra_* name fails with the closest known
name, and aligned_dra_allowed_extra_vars lets it through. The demo inventory with a driver
image Python its base image does not have stops there too, the message naming only that rule."""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import pytest

from ansible_collections.aligned.dra.tests.support.harnesses.playbook_runs import (
    PLAYBOOKS,
    run_playbook,
    tree_vars,
    write_inventory,
)
from ansible_collections.aligned.dra.tests.support.node_side.sysfs_builder import build_tree, load_layout

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[3]
DEMO = REPO / "inventories" / "demo"
LAYOUT = REPO / "tests" / "fixtures" / "network" / "sriov-lab.yml"
HOSTS = ("gpu-01", "gpu-02", "gpu-03")


def digest(root: Path) -> dict[str, str]:
    """Every path under ``root`` with its content (files), target (links) or mode (directories)."""
    found = {}
    for path in sorted(root.rglob("*")):
        key = str(path.relative_to(root))
        if path.is_symlink():
            found[key] = "link:" + os.readlink(path)
        elif path.is_file():
            found[key] = hashlib.sha256(path.read_bytes()).hexdigest() + oct(path.stat().st_mode)
        else:
            found[key] = "dir" + oct(path.stat().st_mode)
    return found


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """Three nodes of one site, each its own sysfs tree; the last one asks for 64 VFs of an 8-VF PF."""
    root = tmp_path_factory.mktemp("validate-site")
    spec = load_layout(LAYOUT)
    hosts = {}
    for name in HOSTS:
        tree = build_tree(spec, root / name)
        hosts[name] = tree_vars(tree)
    hosts[HOSTS[-1]]["aligned_dra_sriov_pfs"] = [{"pci_address": "0000:01:00.0", "numvfs": 64}]
    variables = {
        "ansible_python_interpreter": sys.executable,
        "aligned_dra_site": "lab",
        "aligned_dra_output_dir": str(root / "output"),
    }
    write_inventory(root / "hosts.yml", hosts, variables)
    return root


def test_site_stops_in_validation_and_nothing_changed(site):
    before = {name: digest(site / name) for name in HOSTS}
    result = run_playbook(site / "hosts.yml", PLAYBOOKS / "site.yml")
    text = result.stdout + result.stderr
    assert result.returncode != 0, text
    assert "Validate | Every host's settings, across hosts and stages" in text
    assert "aligned.dra validation: 1 problem in the inventory; nothing was changed." in text
    assert (
        '- gpu-03: aligned_dra_sriov_pfs[0] = {"numvfs": 64, "pci_address": "0000:01:00.0"}: '
        "pfs[0].numvfs: 64 is above sriov_totalvfs 8 of 0000:01:00.0"
    ) in text
    # No later play ran, no output file was written, no node changed.
    assert "Node network" not in text and "Configure RDMA and SR-IOV" not in text
    assert not (site / "output").exists()
    assert {name: digest(site / name) for name in HOSTS} == before


def test_unknown_extra_var_fails_with_the_closest_name_unless_allowed(site):
    typo = run_playbook(site / "hosts.yml", PLAYBOOKS / "validate.yml", "-e", "aligned_dra_sysfs_rot=/sys")
    text = typo.stdout + typo.stderr
    assert typo.returncode != 0, text
    assert 'aligned_dra_sysfs_rot = "/sys": unknown variable; did you mean aligned_dra_sysfs_root?' in text
    # Extra vars reach every host: one line for the site, with the host count.
    assert "site lab, 3 hosts (gpu-01, gpu-02, gpu-03)" in text

    allowed = run_playbook(
        site / "hosts.yml",
        PLAYBOOKS / "validate.yml",
        "-e",
        "aligned_dra_sysfs_rot=/sys",
        "-e",
        '{"aligned_dra_allowed_extra_vars": ["aligned_dra_sysfs_r*"]}',
        "-e",
        '{"aligned_dra_validate_stages": ["probe", "claims"]}',
    )
    text = allowed.stdout + allowed.stderr
    assert allowed.returncode == 0, text
    assert "unknown variable" not in text
    assert not (site / "output").exists()


def test_demo_with_a_driver_image_python_the_base_image_lacks_stops_in_validation(tmp_path):
    """The demo's DaemonSet mode with aligned_dra_driver_image_python "3.11" and the default base image
    (python:3.12-slim): refused by the validation stage, before the probe writes any output file."""
    output = tmp_path / "output"
    result = run_playbook(
        DEMO,
        PLAYBOOKS / "site.yml",
        "-e",
        f"aligned_dra_output_dir={output}",
        "-e",
        "aligned_dra_driver_image_python=3.11",
    )
    text = result.stdout + result.stderr
    assert result.returncode != 0, text
    assert "Validate | Every host's settings, across hosts and stages" in text
    reason = (
        'aligned_dra_driver_image_python = "3.11": the base image docker.io/library/python:3.12-slim '
        "(aligned_dra_driver_base_image) is Python 3.12: set '3.12', or a python:3.11 base image"
    )
    # one line per site (the extra var reaches every host), and nothing about the rules that hold
    assert "aligned.dra validation: 4 problems in the inventory; nothing was changed." in text
    assert f"6 hosts (dgx-h100-01, mi300x-01, ndv4-01 and 3 more): {reason}" in text
    assert f"2 hosts (kai-dgx-01, kai-dgx-02): {reason}" in text
    assert f"4 hosts (mic-node01, p100-vm01, r910-node01 and 1 more): {reason}" in text
    assert f"mig-dgx-01: {reason}" in text
    assert "glibc" not in text and "3.10 or newer" not in text
    # no later play ran, and no output file was written
    assert "PLAY [Write the nodes' facts" not in text and "PLAY [DRA driver" not in text
    written = sorted(str(path.relative_to(tmp_path)) for path in tmp_path.rglob("*") if path.is_file())
    assert written == [], f"{len(written)} output file(s) written: {written}"
