# SPDX-License-Identifier: Apache-2.0
"""Site report layouts: fingerprints, grouping of nodes and the level matrix."""

from __future__ import annotations

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.report import layouts
from ansible_collections.aligned.dra.tests.support.sites.report_sites import (
    DEMO_FIXTURES,
    identical_site,
    topology_of,
    with_identity,
)

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


# ---------------------------------------------------------------- rails


def _rails(pairs: dict[str, int | None], why: str = "map entry") -> dict:
    return {
        "rule": "by map",
        "nics": [
            {"pci_address": a, "netdevs": [], "rail": r, "why": why if r is not None else "not in the map"}
            for a, r in pairs.items()
        ],
    }


def test_rail_labels_say_the_rail_only_where_every_node_of_the_layout_agrees():
    by_host = {
        "a": _rails({"0000:1d:00.0": 0, "0000:2e:00.0": 1, "0000:5a:00.0": None}),
        "b": _rails({"0000:1d:00.0": 0, "0000:2e:00.0": 2, "0000:5a:00.0": None}),
    }
    labels = layouts.rail_labels(["a", "b"], by_host)
    assert labels["0000:1d:00.0"] == {"rail": 0, "text": "rail 0", "why": ""}
    assert labels["0000:2e:00.0"] == {"rail": None, "text": "rail varies", "why": "rail 1 on a; rail 2 on b"}
    assert labels["0000:5a:00.0"] == {"rail": None, "text": "no rail", "why": "not in the map"}


def test_rail_labels_a_node_without_a_rule_makes_the_rail_vary_and_none_gives_no_labels():
    by_host = {"a": _rails({"0000:1d:00.0": 0}), "b": None}
    assert layouts.rail_labels(["a", "b"], by_host)["0000:1d:00.0"]["why"] == "no rail on b; rail 0 on a"
    assert layouts.rail_labels(["a", "b"], {"a": None}) == {}
    many = {f"n{i}": _rails({"0000:1d:00.0": i % 2}) for i in range(8)}
    assert layouts.rail_labels(sorted(many), many)["0000:1d:00.0"]["why"] == (
        "rail 0 on 4 nodes (n0 \u2026 n6); rail 1 on 4 nodes (n1 \u2026 n7)"
    )


def test_rail_labels_an_unknown_rail_is_never_no_rail():
    unknown = {"pci_address": "0000:1d:00.0", "netdevs": [], "rail": None, "why": "addresses not read", "unknown": True}
    captured = {"rule": "by subnet (2 subnets)", "nics": [unknown]}
    labels = layouts.rail_labels(["a", "b"], {"a": captured, "b": captured})
    assert labels["0000:1d:00.0"] == {"rail": None, "text": "rail unknown", "why": "addresses not read"}
    # one node unknown, one on no rail, one on rail 1: the rail varies, and each is said as it is
    mixed = {"a": captured, "b": _rails({"0000:1d:00.0": None}), "c": _rails({"0000:1d:00.0": 1})}
    assert layouts.rail_labels(["a", "b", "c"], mixed)["0000:1d:00.0"]["why"] == (
        "no rail on b; rail unknown on a; rail 1 on c"
    )
    # a summary.json written before the flag: the reason still says unknown
    older = {"rule": "by subnet (2 subnets)", "nics": [{k: v for k, v in unknown.items() if k != "unknown"}]}
    assert layouts.rail_labels(["a"], {"a": older})["0000:1d:00.0"]["text"] == "rail unknown"


def test_the_matrix_columns_carry_the_rail_a_vf_column_its_pfs():
    topology = topology_of("sriov-8x64")
    gpu = sorted(topology["links"])[0]
    vf = next(d for d in topology["devices"] if d.get("physfn"))
    topology["links"][gpu][vf["pci_address"]] = "SYS"  # a column of its own
    labels = {vf["physfn"]: {"rail": 5, "text": "rail 5", "why": ""}}
    matrix = layouts.level_matrix(layouts.layout_model(topology), rails=labels)
    columns = {c["pci_address"]: c["rail"] for c in matrix["nics"]}
    assert columns[vf["physfn"]] == columns[vf["pci_address"]] == labels[vf["physfn"]]
    assert sum(1 for rail in columns.values() if rail is None) == 7
    assert all(c["rail"] is None for c in layouts.level_matrix(layouts.layout_model(topology))["nics"])
