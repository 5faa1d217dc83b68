# SPDX-License-Identifier: Apache-2.0
"""Devices this run's utilization shows held: per inventory host, shared and spanning claims counted."""

from __future__ import annotations

import json

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import held


def row(node, **devices):
    return {"claim": "ns/c", "node": node, "devices": devices}


def test_no_measurement_is_an_empty_site():
    assert held.held_devices(None) == {"held": None, "shared": 0, "spanning": 0}


def test_labels_per_host_through_the_node_names():
    used = {
        "allocations": [row("k8s-a", gpu=["gpu-0"], nic=["nic-0"]), row("k8s-a", gpu=["gpu-1"]), row("b", x=["o/d"])]
    }
    found = held.held_devices(used, {"host-a": "k8s-a"})
    assert found["held"] == {"host-a": {"gpu-0", "gpu-1", "nic-0"}, "b": {"o/d"}}
    assert found["shared"] == 0 and found["spanning"] == 0


def test_shared_devices_and_claims_across_nodes_are_counted_apart():
    used = {
        "allocations": [row(None, gpu=["gpu-0"]), row(None), row("a", gpu=["gpu-0"])],
        "shared": [{"node": "a", "device": "gpu-0", "claims": 2}],
    }
    found = held.held_devices(used)
    assert found == {"held": {"a": {"gpu-0"}}, "shared": 1, "spanning": 1}


def test_malformed_rows_and_files_name_the_input(tmp_path):
    with pytest.raises(held.HeldError, match=r"allocations\[1\]"):
        held.held_devices({"allocations": [row("a"), "x"]})
    bad = tmp_path / "utilization.json"
    bad.write_text("{")
    with pytest.raises(held.HeldError, match="utilization_file: cannot read .*utilization.json"):
        held.read_utilization(str(bad))
    bad.write_text(json.dumps({"allocations": {}}))
    with pytest.raises(held.HeldError, match="not a utilization.json"):
        held.read_utilization(str(bad))
    bad.write_text(json.dumps({"allocations": [row("a", gpu=["g"])]}))
    assert held.read_utilization(str(bad))["allocations"][0]["node"] == "a"
