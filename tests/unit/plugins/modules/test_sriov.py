# SPDX-License-Identifier: Apache-2.0
"""aligned.dra.sriov: arguments, check mode with diff, failures naming the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.aligned.dra.plugins.modules import sriov
from ansible_collections.aligned.dra.tests.support.node_side.sysfs_builder import build_tree, load_layout

LAYOUT = Path(__file__).resolve().parents[3] / "fixtures" / "network" / "sriov-lab.yml"


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    return build_tree(load_layout(LAYOUT), tmp_path_factory.mktemp("node"))


def run(capsys, args: dict) -> dict:
    with patch_module_args(args), pytest.raises(SystemExit):
        sriov.main()
    return json.loads(capsys.readouterr().out)


def run_on(tree: Path, state_dir: Path, capsys, pfs: list, **options) -> dict:
    """The module on ``tree``'s sysfs with ``pfs``, keeping driver state in ``state_dir``."""
    return run(capsys, {"pfs": pfs, "sysfs_root": str(tree / "sys"), "driver_state_dir": str(state_dir), **options})


def test_check_mode_with_diff(tree, capsys, tmp_path, monkeypatch):
    warnings = []
    monkeypatch.setattr(sriov.AnsibleModule, "warn", lambda self, message: warnings.append(message))
    result = run(
        capsys,
        {
            "pfs": [{"pci_address": "0000:01:00.1", "numvfs": 4, "mtu": 9000}],
            "sysfs_root": str(tree / "sys"),
            "procfs_root": str(tree / "proc"),
            "driver_state_dir": str(tmp_path),
            "_ansible_check_mode": True,
            "_ansible_diff": True,
        },
    )
    assert result["changed"] and result["disruptive"]
    assert result["diff"] == {"before": {"0000:01:00.1": {"numvfs": 2}}, "after": {"0000:01:00.1": {"numvfs": 4}}}
    assert result["pfs"][0]["actions"] == ["sriov_numvfs=0", "sriov_numvfs=4"]
    assert any("MTU and VF properties not applied" in w for w in warnings)
    assert (tree / "sys/bus/pci/devices/0000:01:00.1/sriov_numvfs").read_text().strip() == "2"


def test_unchanged_has_no_diff(tree, capsys, tmp_path):
    result = run_on(tree, tmp_path, capsys, [{"netdev": "enp1s0f1np0", "numvfs": 2}], _ansible_diff=True)
    assert not result["changed"] and "diff" not in result


def test_failure_names_the_field(tree, capsys, tmp_path):
    pfs = [{"pci_address": "0000:01:00.0", "numvfs": 2, "vfs": [{"index": 0, "vlan": 5000}]}]
    result = run_on(tree, tmp_path, capsys, pfs)
    assert result["failed"] and result["msg"] == "pfs[0].vfs[0].vlan: 5000 is out of range 0-4095"


def test_ansible_validates_types_first(tree, capsys):
    result = run(capsys, {"pfs": [{"pci_address": "0000:01:00.0", "numvfs": "many"}], "sysfs_root": str(tree / "sys")})
    assert result["failed"] and "numvfs" in result["msg"]


@pytest.mark.parametrize(
    ("pf", "message"),
    [
        ({"netdev": "lo0"}, "pfs[0].netdev: no network interface lo0 on this node"),
        ({"pci_address": "0000:ff:1f.7"}, "pfs[0].pci_address: no PCI address 0000:ff:1f.7 on this node"),
        ({"vendor_id": "0x15b3", "device_id": "0x1021", "index": 5}, "pfs[0].index: no PF 5 with vendor"),
    ],
)
def test_a_pf_that_is_not_there_names_its_selector(tree, capsys, tmp_path, pf, message):
    result = run_on(tree, tmp_path, capsys, [pf])
    assert result["failed"] and result["msg"].startswith(message)


@pytest.mark.parametrize("timeout", [-1, "nan", "inf"])
def test_settle_timeout_must_be_a_sane_number_of_seconds(tree, capsys, tmp_path, timeout):
    result = run_on(tree, tmp_path, capsys, [{"pci_address": "0000:01:00.0", "numvfs": 1}], settle_timeout=timeout)
    assert result["failed"] and result["msg"].startswith("settle_timeout: ")
    assert (tree / "sys/bus/pci/devices/0000:01:00.0/sriov_numvfs").read_text().strip() == "0"


def test_vfs_on_a_pf_without_sriov_name_the_selector(tree, capsys, tmp_path):
    pf = {"pci_address": "0000:02:00.0", "vfs": [{"index": 0, "vlan": 5}]}
    result = run_on(tree, tmp_path, capsys, [pf])
    assert result["failed"] and result["msg"].startswith("pfs[0].vfs: 0000:02:00.0 has no SR-IOV capability")
    assert result["msg"].endswith("pfs[0].pci_address selects it")
