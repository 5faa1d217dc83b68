# SPDX-License-Identifier: Apache-2.0
"""The allocation planner on hand-built and probed topologies, with hand-computed expectations.

The allocator's rules on hand-written devices (capacity, counters, taints, list-typed
attributes) and the allocator driven directly are in ``test_allocator.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import plan as planner
from ansible_collections.aligned.dra.plugins.module_utils.node.topology import probe
from ansible_collections.aligned.dra.tests.fixtures.materialize import materialize
from ansible_collections.aligned.dra.tests.support.sites.plan_inputs import (
    CLASSES,
    KIND,
    device_class,
    exactly,
    template,
)

# Fixture trees as scripts/test.sh materializes them before the run (read only).
TREES = Path(__file__).resolve().parents[6] / ".cache" / "sysfs"

ROOT = "resource.kubernetes.io/pcieRoot"
NUMA = "resource.kubernetes.io/numaNode"


def pairs(n: int) -> dict:
    requests, constraints = [], []
    for i in range(n):
        requests += [exactly(f"gpu-{i}", "gpu"), exactly(f"nic-{i}", "nic")]
        constraints.append({"requests": [f"gpu-{i}", f"nic-{i}"], "matchAttribute": ROOT})
    return template(f"pairs-{n}", requests, constraints)


def synthetic(gpus: list[tuple[str, str, int]], nics: list[tuple[str, str, int]]) -> dict:
    """A topology dict: (bdf, pcie root, numa) per GPU and NIC; levels PIX/NODE/SYS by hand rules."""
    devices = [
        {"pci_address": b, "kind": "gpu", "pcie_root": r, "numa_node": n, "vendor_id": "0x10de"} for b, r, n in gpus
    ] + [
        {"pci_address": b, "kind": "rdma", "pcie_root": r, "numa_node": n, "rdma_devices": [f"mlx5_{i}"]}
        for i, (b, r, n) in enumerate(nics)
    ]
    links = {
        g: {nb: ("PIX" if gr == nr else "NODE" if gn == nn else "SYS") for nb, nr, nn in nics} for g, gr, gn in gpus
    }
    return {"devices": devices, "links": links}


def run(topologies: dict, templates: list, **kwargs) -> dict:
    nodes = planner.nodes_from_topologies(topologies)
    result = planner.plan("test", nodes, CLASSES, templates, **kwargs)
    return {t["name"]: t for t in result["templates"]} | {"_plan": result}


# 8 GPUs and 8 NICs, one of each per host bridge, four per socket.
DGX_LIKE = synthetic(
    [(f"0000:{0x10 * (i + 1):02x}:00.0", f"pci0000:{0x10 * (i + 1) - 1:02x}", i // 4) for i in range(8)],
    [(f"0000:{0x10 * (i + 1) + 1:02x}:00.0", f"pci0000:{0x10 * (i + 1) - 1:02x}", i // 4) for i in range(8)],
)
# Same GPUs, but every NIC sits on socket 1, on host bridges of its own.
NICS_ON_SOCKET_1 = synthetic(
    [(f"0000:{0x10 * (i + 1):02x}:00.0", f"pci0000:{0x10 * (i + 1) - 1:02x}", 0) for i in range(4)]
    + [(f"0000:{0x90 + 0x10 * i:02x}:00.0", f"pci0000:{0x8F + 0x10 * i:02x}", 1) for i in range(4)],
    [(f"0000:{0x91 + 0x10 * i:02x}:00.0", f"pci0000:{0x8F + 0x10 * i:02x}", 1) for i in range(2)]
    + [(f"0000:{0xD1 + 0x10 * i:02x}:00.0", f"pci0000:{0xD0 + 0x10 * i:02x}", 1) for i in range(2)],
)


def test_dgx_like_fits_eight_single_pairs_all_pix():
    result = run({"n1": DGX_LIKE}, [pairs(1)])["pairs-1"]
    node = result["nodes"]["n1"]
    assert node["fits"] == 8
    assert [a["worst_level"] for a in node["allocations"]] == ["PIX"] * 8
    assert result["worst_level"] == "PIX" and result["satisfiable"] and result["errors"] == []
    first = node["allocations"][0]["devices"]
    assert first == {"gpu-0": ["gpu-0000-10-00-0"], "nic-0": ["nic-0000-11-00-0"]}
    used = [d for a in node["allocations"] for names in a["devices"].values() for d in names]
    assert len(used) == len(set(used)) == 16


def test_dgx_like_multi_pair_counts():
    result = run({"n1": DGX_LIKE}, [pairs(2), pairs(4), pairs(8)])
    assert [result[f"pairs-{n}"]["fits_total"] for n in (2, 4, 8)] == [4, 2, 1]
    # inside a 2-pair claim each GPU has its own NIC (PIX), the other pair is on the same socket
    alloc = result["pairs-2"]["nodes"]["n1"]["allocations"][0]
    assert alloc["aligned_level"] == "PIX" and alloc["worst_level"] == "NODE"
    assert result["pairs-8"]["worst_level"] == "SYS" and result["pairs-8"]["aligned_level"] == "PIX"


def test_nics_on_socket_1_fit_no_aligned_pairs_for_socket_0():
    socket0 = 'device.attributes["resource.kubernetes.io"].numaNode == 0'
    t = template(
        "socket0-pair",
        [exactly("gpu", "gpu", selectors=[{"cel": {"expression": socket0}}]), exactly("nic", "nic")],
        [{"requests": ["gpu", "nic"], "matchAttribute": ROOT}],
    )
    result = run({"n1": NICS_ON_SOCKET_1}, [t, pairs(1)], required=["socket0-pair"])
    node = result["socket0-pair"]["nodes"]["n1"]
    assert node["fits"] == 0 and node["allocations"] == []
    assert "no choice of them meets the constraints" in node["reason"]
    assert "matchAttribute resource.kubernetes.io/pcieRoot" in node["reason"]
    assert not result["socket0-pair"]["satisfiable"]
    assert result["_plan"]["required_unsatisfied"] == ["socket0-pair"]
    # the GPUs of socket 1 share host bridges with the first two NICs only
    assert result["pairs-1"]["fits_total"] == 2


def test_first_available_falls_back_from_root_to_numa_to_any():
    fallback = template(
        "fallback",
        [
            exactly("gpu", "gpu"),
            {
                "name": "nic",
                "firstAvailable": [
                    {"name": "same-root", "deviceClassName": "nic"},
                    {"name": "same-numa", "deviceClassName": "nic"},
                    {"name": "any", "deviceClassName": "nic"},
                ],
            },
        ],
        [
            {"requests": ["gpu", "nic/same-root"], "matchAttribute": ROOT},
            {"requests": ["gpu", "nic/same-numa"], "matchAttribute": NUMA},
        ],
    )
    node = run({"n1": NICS_ON_SOCKET_1}, [fallback])["fallback"]["nodes"]["n1"]
    # 4 NICs: GPUs are tried in order; the socket-0 GPUs get no NIC on their
    # root or node but "any"; then the socket-1 GPUs find what is left.
    assert node["fits"] == 4
    chosen = [a.get("subrequests", {}).get("nic") for a in node["allocations"]]
    assert chosen == ["any", "any", "any", "any"]
    assert [a["worst_level"] for a in node["allocations"]] == ["SYS"] * 4
    # on the aligned layout every claim gets its first choice
    node = run({"n1": DGX_LIKE}, [fallback])["fallback"]["nodes"]["n1"]
    assert [a["subrequests"]["nic"] for a in node["allocations"]] == ["same-root"] * 8


def test_all_mode_and_exact_count():
    all_gpus = template("all-gpus", [{"name": "gpus", "exactly": {"deviceClassName": "gpu", "allocationMode": "All"}}])
    three = template("three", [exactly("gpus", "gpu", count=3)])
    result = run({"n1": DGX_LIKE}, [all_gpus, three])
    assert result["all-gpus"]["nodes"]["n1"]["fits"] == 1
    assert len(result["all-gpus"]["nodes"]["n1"]["allocations"][0]["devices"]["gpus"]) == 8
    assert result["three"]["nodes"]["n1"]["fits"] == 2  # 8 // 3


def test_distinct_attribute():
    two_numa = template(
        "two-numa", [exactly("a", "gpu"), exactly("b", "gpu")], [{"requests": ["a", "b"], "distinctAttribute": NUMA}]
    )
    node = run({"n1": DGX_LIKE}, [two_numa])["two-numa"]["nodes"]["n1"]
    assert node["fits"] == 4
    assert node["allocations"][0]["devices"] == {"a": ["gpu-0000-10-00-0"], "b": ["gpu-0000-50-00-0"]}


def test_cel_error_aborts_and_is_reported():
    bad = template(
        "bad",
        [
            exactly(
                "gpu", "gpu", selectors=[{"cel": {"expression": 'device.attributes["dra.aligned.dev"].uuid == "x"'}}]
            )
        ],
    )
    result = run({"n1": DGX_LIKE}, [bad])["bad"]
    assert result["nodes"]["n1"]["fits"] == 0
    assert not result["satisfiable"]
    assert len(result["errors"]) == 8
    error = result["errors"][0]
    assert error["node"] == "n1" and error["device"] == "gpu-0000-10-00-0" and error["request"] == "gpu"
    assert "uuid" in error["expression"] and "uuid" in error["message"]


def test_what_if_on_another_layout():
    """The same templates on a probed node that is not part of the site."""
    root = materialize("dgx-h100", TREES)
    topology = probe(str(root / "sys"), str(root / "proc"))
    result = run({"dgx": topology}, [pairs(1)])["pairs-1"]["nodes"]["dgx"]
    # each GPU and its ConnectX-7 share a host bridge, two switches apart (PXB);
    # the two management ports have no GPU on their host bridge
    assert result["fits"] == 8
    assert {a["worst_level"] for a in result["allocations"]} == {"PXB"}


@pytest.mark.parametrize(
    ("templates", "message"),
    [
        ([template("t", [exactly("x", "nope")])], "DeviceClass 'nope'"),
        ([template("t", [])], "no requests"),
        ([template("t", [{"name": "x"}])], "neither exactly nor firstAvailable"),
        ([template("t", [exactly("x", "gpu", count=0)])], "count 0"),
    ],
)
def test_bad_templates_are_refused(templates, message):
    with pytest.raises(planner.PlanError, match=message):
        planner.plan("s", {}, CLASSES, templates)


def test_required_template_must_exist():
    with pytest.raises(planner.PlanError, match="required templates that are not given: ghost"):
        planner.plan("s", {}, CLASSES, [pairs(1)], required=["ghost"])


def test_plan_keeps_the_contract_keys():
    result = run({"n1": DGX_LIKE}, [pairs(1)], kubernetes_version="v1.36.1")["_plan"]
    assert {"schema_version", "site", "kubernetes_version", "driver", "templates"} <= set(result)
    assert result["kubernetes_version"] == "1.36"
    entry = result["templates"][0]
    assert {"name", "required", "fits_total", "worst_level", "satisfiable", "errors", "nodes"} <= set(entry)
    assert {"fits", "worst_level", "allocations"} <= set(entry["nodes"]["n1"])
    assert {"devices", "worst_level"} <= set(entry["nodes"]["n1"]["allocations"][0])


def test_nodes_of_one_shape_share_a_plan_with_the_same_result():
    topologies = {"a": DGX_LIKE, "b": NICS_ON_SOCKET_1, "c": DGX_LIKE}
    bad = template(
        "bad",
        [
            exactly(
                "gpu", "gpu", selectors=[{"cel": {"expression": 'device.attributes["dra.aligned.dev"].uuid == "x"'}}]
            )
        ],
    )
    templates = [pairs(1), pairs(2), bad]
    nodes = planner.nodes_from_topologies(topologies)
    cached = planner.plan("s", nodes, CLASSES, templates)
    uncached = planner.plan("s", nodes, CLASSES, templates, shape_cache=False)
    assert cached == uncached
    errors = cached["templates"][2]["errors"]
    assert {e["node"] for e in errors} == {"a", "b", "c"}


def test_plan_counts_the_devices_each_class_selects_per_node():
    result = run({"n1": DGX_LIKE, "n2": NICS_ON_SOCKET_1}, [pairs(1)])["_plan"]
    assert result["classes"] == {
        "gpu": {"devices": 16, "nodes": {"n1": 8, "n2": 8}},
        "nic": {"devices": 12, "nodes": {"n1": 8, "n2": 4}},
        "vf": {"devices": 0, "nodes": {"n1": 0, "n2": 0}},
    }
    members = planner.class_members(planner.nodes_from_topologies({"n2": NICS_ON_SOCKET_1}), CLASSES)
    assert members["nic"]["n2"] == ["nic-0000-91-00-0", "nic-0000-a1-00-0", "nic-0000-d1-00-0", "nic-0000-e1-00-0"]


def test_a_shared_resource_claim_is_allocated_once_per_site():
    shared = template("shared-gpu", [exactly("gpu", "gpu")])
    shared["kind"] = "ResourceClaim"
    shared["spec"] = shared["spec"]["spec"]
    result = run({"a": DGX_LIKE, "b": DGX_LIKE}, [shared])["shared-gpu"]
    assert result["kind"] == "ResourceClaim"
    assert result["fits_total"] == 1
    assert result["nodes_possible"] == ["a", "b"]
    assert [n["fits"] for n in result["nodes"].values()] == [1, 1]
    assert "capped" not in result["nodes"]["a"]


def test_admin_access_uses_devices_in_use_and_takes_nothing():
    admin = template("admin", [exactly("gpus", "gpu", count=8, adminAccess=True)])
    gpu = template("gpu", [exactly("gpu", "gpu")])
    result = run({"n1": DGX_LIKE}, [admin, gpu])
    node = result["admin"]["nodes"]["n1"]
    assert node["fits"] == 1 and "admin_access" in node
    assert result["gpu"]["nodes"]["n1"]["fits"] == 8


def test_the_plan_lists_the_tainted_devices_of_its_input():
    unhealthy = {
        "key": "dra.aligned.dev/unhealthy",
        "value": "rdma-port-down",
        "effect": "NoSchedule",
        "timeAdded": "2026-11-23T18:41:01Z",
    }
    devices = [
        {"name": "gpu-0", "attributes": {"dra.aligned.dev/kind": {"string": "gpu"}}, "taints": [unhealthy]},
        {"name": "gpu-1", "attributes": {"dra.aligned.dev/kind": {"string": "gpu"}}},
        {"name": "gpu-2", "driver": "gpu.nvidia.com", "taints": [{"key": "maintenance", "effect": "None"}]},
    ]
    result = planner.plan(
        "s", {"n1": {"devices": devices, "links": {}}}, CLASSES, [template("t", [exactly("g", "gpu")])]
    )
    assert result["tainted_devices"] == [
        {"node": "n1", "device": "gpu-0", **unhealthy, "keeps_out": True},
        {"node": "n1", "device": "gpu.nvidia.com/gpu-2", "key": "maintenance", "effect": "None", "keeps_out": False},
    ]
    assert result["templates"][0]["fits_total"] == 1  # the tainted GPU is kept out
    untainted = [dict(d, taints=[]) for d in devices]
    assert planner.plan("s", {"n1": {"devices": untainted, "links": {}}}, CLASSES, [])["tainted_devices"] == []


def test_the_reason_names_an_attribute_that_no_candidate_has():
    no_roots = synthetic([("0000:10:00.0", None, 0)], [("0000:11:00.0", None, 0)])
    node = run({"n1": no_roots}, [pairs(1)])["pairs-1"]["nodes"]["n1"]
    assert node["fits"] == 0
    assert node["reason"] == (
        "request gpu-0: none of its matching devices has resource.kubernetes.io/pcieRoot, "
        "which a matchAttribute constraint compares"
    )


def test_real_snapshot_of_eight_vector_engines():
    """hwloc's 32intel64-2p8co2t+8ve: two host bridges, each with four NEC vector
    engines (accelerators) and one ConnectX-4 without an RDMA device (a plain NIC),
    plus a dual-port X722 on a third bridge with no accelerator."""
    root = materialize("hwloc-32intel64-8ve", TREES)
    topology = probe(str(root / "sys"), str(root / "proc"))
    nodes = planner.nodes_from_topologies({"ve": topology}, {"plain_nics": True})
    accelerators = device_class("gpu", f'{KIND} in ["gpu", "accelerator"]')
    result = planner.plan("s", nodes, [accelerators, CLASSES[1]], [pairs(1)])["templates"][0]
    node = result["nodes"]["ve"]
    # one aligned pair per bridge that has both: pci0000:17 and pci0000:3a
    assert node["fits"] == 2
    chosen = [a["devices"]["nic-0"][0] for a in node["allocations"]]
    assert chosen == ["nic-0000-1a-00-0", "nic-0000-3e-00-0"]
    # without plain NICs nothing is published for these cards, and nothing fits
    bare = planner.nodes_from_topologies({"ve": topology})
    assert planner.plan("s", bare, [accelerators, CLASSES[1]], [pairs(1)])["templates"][0]["fits_total"] == 0


def test_node_accounting_lists_the_left_out_nodes_and_counts():
    failed = {
        "n3": {"state": "failed", "stage": "probe", "task": "t", "error": "e", "stale_facts": None},
        "n4": {"state": "unreachable", "stage": "probe", "task": None, "error": "e", "stale_facts": None},
    }
    got = planner.node_accounting(["n1", "n2"], failed)
    assert got["node_counts"] == {"ok": 2, "failed": 1, "unreachable": 1}
    assert list(got["nodes_failed"]) == ["n3", "n4"]
    given = {"ok": 5, "failed": 1, "unreachable": 1}
    assert planner.node_accounting(["n1"], failed, given)["node_counts"] == given


@pytest.mark.parametrize(
    ("planned", "failed", "counts", "message"),
    [
        (["n1"], {"n1": {"state": "failed", "stage": "probe"}}, None, "are planned too"),
        ([], {"n2": {"state": "gone", "stage": "probe"}}, None, "nodes_failed.n2: needs 'state'"),
        ([], {"n2": {"state": "failed"}}, None, "nodes_failed.n2: needs 'state'"),
        ([], {}, {"ok": 1}, "node_counts: needs counts"),
        ([], {}, {"ok": -1, "failed": 0, "unreachable": 0}, "node_counts: needs counts"),
    ],
)
def test_node_accounting_names_bad_input(planned, failed, counts, message):
    with pytest.raises(planner.PlanError, match=message):
        planner.node_accounting(planned, failed, counts)


def test_nodes_converted_one_at_a_time_share_equal_attribute_values_and_plan_the_same():
    topologies = {"a": DGX_LIKE, "b": NICS_ON_SOCKET_1, "c": DGX_LIKE}
    shared: dict = {}
    one_by_one: dict = {}
    for name in sorted(topologies):
        one_by_one.update(planner.nodes_from_topologies({name: topologies[name]}, shared=shared))
    at_once = planner.nodes_from_topologies(topologies)
    assert one_by_one == at_once
    first, third = one_by_one["a"]["devices"][0]["attributes"], one_by_one["c"]["devices"][0]["attributes"]
    assert first[ROOT] is third[ROOT]  # one object for the value both nodes have
    unshared = planner.nodes_from_topologies({"c": DGX_LIKE})["c"]["devices"][0]["attributes"]
    assert unshared[ROOT] == first[ROOT] and unshared[ROOT] is not first[ROOT]
    # a value equal in Python but not in kind stays apart (True == 1)
    assert planner._shared_value({"bool": True}, shared) is not planner._shared_value({"bool": 1}, shared)
    templates = [pairs(1), pairs(2)]
    assert planner.plan("s", one_by_one, CLASSES, templates) == planner.plan("s", at_once, CLASSES, templates)
