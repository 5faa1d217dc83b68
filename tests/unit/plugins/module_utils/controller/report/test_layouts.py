# SPDX-License-Identifier: Apache-2.0
"""Site report layouts: fingerprints, grouping of nodes and the level matrix."""

from __future__ import annotations

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.report import layouts
from ansible_collections.aligned.dra.tests.report_sites import DEMO_FIXTURES, identical_site, topology_of, with_identity

# ---------------------------------------------------------------- fingerprints


def test_identifiers_do_not_change_the_fingerprint():
    base = topology_of("dgx-h100")
    other = with_identity(base, 42)
    assert other["hostname"] != base["hostname"]
    assert other["rdma_devices"][0]["node_guid"] != base["rdma_devices"][0]["node_guid"]
    assert layouts.layout_fingerprint(base) == layouts.layout_fingerprint(other)


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda t: t["devices"].pop(), id="a device less"),
        pytest.param(lambda t: _gpu(t).update(numa_node=1 - _gpu(t)["numa_node"]), id="GPU on another NUMA node"),
        pytest.param(lambda t: _gpu(t).update(pcie_root=None), id="GPU without pcieRoot"),
        pytest.param(lambda t: _first_link(t, "SYS"), id="a level"),
        pytest.param(lambda t: t["numa_nodes"][0].update(cpulist="0-3"), id="CPUs of a NUMA node"),
        pytest.param(lambda t: _gpu(t)["gpu"].update(model="NVIDIA H200"), id="GPU model"),
    ],
)
def test_layout_changes_change_the_fingerprint(change):
    base = topology_of("dgx-h100")
    other = topology_of("dgx-h100")
    change(other)
    assert layouts.layout_fingerprint(base) != layouts.layout_fingerprint(other)


def test_sriov_vf_count_is_part_of_the_layout():
    base = topology_of("sriov-8x64")
    other = topology_of("sriov-8x64")
    pf = next(d for d in other["devices"] if d.get("sriov"))
    pf["sriov"]["numvfs"] = 8
    assert layouts.layout_fingerprint(base) != layouts.layout_fingerprint(other)


def _gpu(topology):
    return next(d for d in topology["devices"] if d["kind"] == "gpu")


def _first_link(topology, level):
    gpu = next(iter(topology["links"]))
    nic = next(iter(topology["links"][gpu]))
    topology["links"][gpu][nic] = level if topology["links"][gpu][nic] != level else "PIX"


def test_identical_machines_share_one_layout_and_others_do_not():
    nodes = identical_site("dgx-h100", 5)
    nodes["odd-one"] = topology_of("mi300x")
    groups = layouts.group_layouts(nodes)
    assert [g["hosts"] for g in groups] == [[f"gpu-{i:04d}" for i in range(1, 6)], ["odd-one"]]
    assert groups[0]["fingerprint"] == layouts.layout_fingerprint(nodes["gpu-0003"])


# ---------------------------------------------------------------- matrix


@pytest.mark.parametrize("fixture", DEMO_FIXTURES)
def test_matrix_cells_are_the_probe_links(fixture):
    topology = topology_of(fixture)
    matrix = layouts.level_matrix(layouts.layout_model(topology))
    columns = {c["pci_address"] for c in matrix["nics"]}
    assert [g["pci_address"] for g in matrix["gpus"]] == sorted(topology["links"])
    for gpu, row in topology["links"].items():
        for nic, level in row.items():
            device = next(d for d in topology["devices"] if d["pci_address"] == nic)
            column = nic if nic in columns else device["physfn"]
            assert matrix["cells"][gpu][column] == level, (gpu, nic)


def test_vfs_are_collapsed_into_their_pf_column():
    topology = topology_of("sriov-8x64")
    matrix = layouts.level_matrix(layouts.layout_model(topology))
    assert len(matrix["nics"]) == 8
    assert all(c["collapsed_vfs"] == 64 and c["numvfs"] == 64 for c in matrix["nics"])
    assert [c["label"] for c in matrix["nics"]] == [f"NIC{i}" for i in range(8)]


def test_a_vf_with_its_own_level_gets_its_own_column():
    topology = topology_of("sriov-8x64")
    gpu = sorted(topology["links"])[0]
    vf = next(d for d in topology["devices"] if d.get("physfn"))
    topology["links"][gpu][vf["pci_address"]] = "SYS"
    matrix = layouts.level_matrix(layouts.layout_model(topology))
    own = [c for c in matrix["nics"] if c["pci_address"] == vf["pci_address"]]
    assert own and own[0]["vf"] and own[0]["physfn"] == vf["physfn"]
    assert matrix["cells"][gpu][vf["pci_address"]] == "SYS"
    pf_column = next(c for c in matrix["nics"] if c["pci_address"] == vf["physfn"])
    assert pf_column["collapsed_vfs"] == 63


def test_a_vf_without_its_pf_is_a_column():
    topology = topology_of("vm-flat")
    nic = next(d for d in topology["devices"] if d["kind"] == "nic")
    nic["physfn"] = "0000:99:00.0"  # the PF stays on the hypervisor
    matrix = layouts.level_matrix(layouts.layout_model(topology))
    assert nic["pci_address"] in [c["pci_address"] for c in matrix["nics"] if c["vf"]]
