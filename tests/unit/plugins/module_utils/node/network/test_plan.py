# SPDX-License-Identifier: Apache-2.0
"""The network plan the network_plan module and the validation probe share (``node.network.plan``).

Planned on the SR-IOV lab tree (tests/fixtures/network/sriov-lab.yml): read-only, so no fake kernel
is needed; a VF count change is a pending, disruptive plan, a count above sriov_totalvfs is refused.
GPUDirect RDMA is planned on the GPUDirect test node (gpudirect_node): an ACS change alone is pending,
a refusal of the gpudirect module is a refused plan, and every part keep plans as without GPUDirect.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.node.network import netconf, plan
from ansible_collections.aligned.dra.tests.support.node_side.sysfs_builder import build_tree, load_layout
from ansible_collections.aligned.dra.tests.unit.plugins.module_utils.node.network import gpudirect_node

LAYOUT = Path(__file__).resolve().parents[5] / "fixtures" / "network" / "sriov-lab.yml"
CX0 = "0000:01:00.0"


@pytest.fixture
def roots(tmp_path):
    root = build_tree(load_layout(LAYOUT), tmp_path / "node")
    return {"sysfs_root": str(root / "sys"), "procfs_root": str(root / "proc"), "driver_state_dir": str(tmp_path)}


def test_probe_plans_what_the_module_plans(roots):
    options = dict(roots, pfs=[{"pci_address": CX0, "numvfs": 4}])
    planned = plan.for_probe(options)
    # the module's defaults filled in, as AnsibleModule fills them
    assert planned["module_args"]["modprobe_dir"] == "/etc/modprobe.d"
    assert planned["module_args"]["pfs"][0]["missing"] == "fail"
    assert planned["result"]["pending"] and planned["result"]["disruptive"]
    assert planned["result"]["rdma"] is not None and "diff" not in planned["result"]["sriov"]
    assert [diff["before_header"] for diff in planned["diffs"]] == ["sriov now"]
    direct = plan.outcome(planned["module_args"])
    assert direct == {key: planned[key] for key in ("result", "warnings", "diffs")}


def test_nothing_to_change_is_not_pending(roots):
    planned = plan.for_probe(dict(roots, pfs=[{"pci_address": CX0}]))
    assert planned["result"]["pending"] is False and planned["diffs"] == []


def test_a_refused_plan_keeps_the_module_message(roots):
    planned = plan.for_probe(dict(roots, pfs=[{"pci_address": CX0, "numvfs": 99}]))
    assert planned["refused"] == f"pfs[0].numvfs: 99 is above sriov_totalvfs 8 of {CX0}"
    assert "result" not in planned


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"netns_mode": "private"}, "netns_mode"),
        ({"pfs": [{"pci_address": CX0, "numvfs": "many"}]}, "numvfs"),
        ({"nonsense": 1}, "nonsense"),
    ],
)
def test_options_the_module_would_refuse_are_left_to_the_module(roots, options, message):
    planned = plan.for_probe(dict(roots, **options))
    assert list(planned) == ["not_planned"] and message in planned["not_planned"]


# -- GPUDirect RDMA: the gpudirect module's check mode as the third part ----------------------------


def gpudirect_options(root, **settings):
    """The plan's options on a GPUDirect node (gpudirect_node: a GPU and a NIC below one switch, ACS redirecting)."""
    options = {"sysfs_root": f"{root}/sys", "procfs_root": f"{root}/proc", "modules_load_dir": f"{root}/modules-load.d"}
    return dict(options, gpudirect=settings) if settings else options


def test_a_node_whose_only_change_is_gpudirect_is_pending(tmp_path):
    root = gpudirect_node.build(tmp_path)
    before = gpudirect_node.snapshot(root)
    planned = plan.for_probe(gpudirect_options(root, acs="disable"))
    result = planned["result"]
    assert result["rdma"]["changed"] is False and result["sriov"] is None
    # pending puts the node in the roll group (playbooks/network.yml); clearing ACS redirect drains it first
    assert result["pending"] is True and result["disruptive"] is True
    functions = [item["function"] for item in result["gpudirect"]["acs"]]
    assert functions == [gpudirect_node.DOWN_GPU, gpudirect_node.DOWN_NIC]
    assert "path" not in result["gpudirect"]["acs"][0] and "diff" not in result["gpudirect"]
    assert [diff["before_header"] for diff in planned["diffs"]] == ["gpudirect now"]
    control = f"{gpudirect_node.DOWN_GPU} ACS Control @0x14e"  # the ACS capability at 0x148, its Control at +6
    assert planned["diffs"][0]["after"][control] == f"0x{gpudirect_node.CLEARED:04x}"
    assert planned["warnings"] == []  # the IOMMU is in passthrough
    assert gpudirect_node.snapshot(root) == before  # a plan writes nothing


def test_every_gpudirect_part_keep_plans_as_without_gpudirect_and_reads_nothing_more(roots, monkeypatch):
    def never(state, check_mode=False):
        raise AssertionError("the GPUDirect part was read")

    monkeypatch.setattr(netconf, "run_gpudirect", never)
    options = dict(roots, pfs=[{"pci_address": CX0, "numvfs": 4}])
    without = plan.for_probe(options)
    keep = plan.for_probe(dict(options, gpudirect={"acs": "keep", "iommu": "keep", "peer_memory": "keep"}))
    assert keep["module_args"]["gpudirect"] == without["module_args"]["gpudirect"]
    assert without["module_args"]["gpudirect"]["acs"] == "keep"  # the gpudirect module's defaults
    for planned in (without, keep):
        assert sorted(planned["result"]) == ["disruptive", "pending", "rdma", "sriov"]
    assert {key: keep[key] for key in ("result", "warnings", "diffs")} == {
        key: without[key] for key in ("result", "warnings", "diffs")
    }


def refused_node(tmp_path, monkeypatch, what):
    """The GPUDirect node with a GPU bound to vfio-pci, every IOMMU group translating, or an ACS state unreadable."""
    if what == "translated":
        spec = gpudirect_node.spec
        monkeypatch.setattr(gpudirect_node, "spec", lambda gpu_driver: dict(spec(gpu_driver), iommu={"type": "DMA"}))
    root = gpudirect_node.build(tmp_path, gpu_driver="vfio-pci" if what == "vfio" else "nvidia")
    if what == "unreadable":  # 64 bytes of a bridge on the aligned path, as a reader without root gets them
        path = gpudirect_node.config_file(root, gpudirect_node.DOWN_NIC)
        with open(path, "rb") as fh:
            header = fh.read(64)
        with open(path, "wb") as fh:
            fh.write(header)
    return root


@pytest.mark.parametrize(
    ("what", "message"),
    [
        ("vfio", rf"^gpudirect\.acs: refusing to clear ACS redirect on {gpudirect_node.DOWN_GPU} \(device "),
        ("translated", r"^gpudirect\.acs: disable is refused while the IOMMU translates \(groups: .*=DMA"),
        ("unreadable", rf"^gpudirect\.acs: the ACS state of {gpudirect_node.DOWN_NIC} .* cannot be read"),
    ],
)
def test_a_gpudirect_refusal_shows_as_a_refused_plan(tmp_path, monkeypatch, what, message):
    root = refused_node(tmp_path, monkeypatch, what)
    planned = plan.for_probe(gpudirect_options(root, acs="disable"))
    assert list(planned) == ["module_args", "refused"]
    assert re.match(message, planned["refused"]), planned["refused"]
