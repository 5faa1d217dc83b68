# SPDX-License-Identifier: Apache-2.0
"""The nodes of a replay: an openb node list, or a site's plan (its GPUs, its fractional template, no CPU limit)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.replay import ReplayError, nodes

FIXTURES = Path(__file__).resolve().parents[5] / "fixtures" / "replay"


def test_the_openb_node_list_is_read():
    specs, info = nodes.read_openb_nodes(str(FIXTURES / "openb-nodes.csv"))
    assert [(s.name, s.cpu_milli, s.memory_mib, s.gpus, s.model) for s in specs] == [
        ("node-a", 32000, 131072, 2, "V100M32"),
        ("node-b", 32000, 131072, 4, "V100M16"),
        ("node-c", 16000, 65536, 1, "T4"),
        ("cpu-1", 64000, 262144, 0, None),
    ]
    assert info["limits"] == {"cpu": True, "memory": True, "gpu_model": True} and info["source"] == "openb"


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (["sn,cpu_milli,memory_mib,gpu,model"], "lists no node"),
        (["sn,cpu_milli,memory_mib,gpu"], "nodes: line 1: missing column(s) model"),
        (
            ["sn,cpu_milli,memory_mib,gpu,model", "a,1,1,65,X"],
            "nodes: line 2, column gpu: 65 is out of range (0 to 64)",
        ),
        (["sn,cpu_milli,memory_mib,gpu,model", "a,1,1,1,X", "a,1,1,1,X"], "nodes: line 3, column sn: 'a' is on line 2"),
        (["sn,cpu_milli,memory_mib,gpu,model", ",1,1,1,X"], "nodes: line 2, column sn: is empty"),
    ],
)
def test_openb_node_list_errors(tmp_path, lines, message):
    path = tmp_path / "nodes.csv"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ReplayError) as raised:
        nodes.read_openb_nodes(str(path))
    assert message in str(raised.value)


def test_a_plan_gives_its_nodes_gpus_and_fractional_template():
    specs, info = nodes.plan_nodes(str(FIXTURES / "plan-1.36.json"), "aligned-gpu", "fractional-gpu")
    assert [(s.name, s.gpus, s.cpu_milli, s.memory_mib, s.model) for s in specs] == [
        ("cpu-c", 0, None, None, None),
        ("gpu-a", 4, None, None, None),
        ("gpu-b", 2, None, None, None),
    ]
    assert info["limits"] == {"cpu": False, "memory": False, "gpu_model": False}
    assert info["fractional_template"] == {"name": "fractional-gpu", "kind": "ResourceClaimTemplate"}
    assert info["fractional_reason"] is None and info["kubernetes_version"] == "1.36" and info["site"] == "lab"
    assert any("CPU and memory are not limited" in note for note in info["notes"])


def test_a_minor_without_consumable_capacity_renders_no_share():
    _specs, info = nodes.plan_nodes(str(FIXTURES / "plan-1.35.json"), "aligned-gpu", "fractional-gpu")
    assert info["fractional_template"] == {"name": "fractional-gpu-shared", "kind": "ResourceClaim"}
    assert "Kubernetes 1.35 renders fractional-gpu as the shared ResourceClaim" in info["fractional_reason"]
    _specs, info = nodes.plan_nodes(str(FIXTURES / "plan-1.36.json"), "aligned-gpu", "tiny-gpu")
    assert info["fractional_template"] is None
    assert info["fractional_reason"] == "the plan (Kubernetes 1.36) has no fractional GPU template 'tiny-gpu'"


def write_plan(tmp_path: Path, change) -> str:
    plan = json.loads((FIXTURES / "plan-1.36.json").read_text())
    change(plan)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    return str(path)


def test_failed_nodes_are_said(tmp_path):
    def failed(plan):
        plan["nodes_failed"] = {"gone": {"state": "unreachable", "stage": "probe"}}

    _specs, info = nodes.plan_nodes(write_plan(tmp_path, failed), "aligned-gpu", "x")
    assert "1 node(s) of the site failed or were unreachable and are not in the plan" in info["notes"]


@pytest.mark.parametrize(
    ("change", "gpu_class", "message"),
    [
        (
            lambda p: None,
            "nvidia-gpu",
            "gpu_class: the plan .* has no DeviceClass 'nvidia-gpu' \\(its classes: aligned-gpu, aligned-nic\\)",
        ),
        (lambda p: p.pop("classes"), "aligned-gpu", "plan: .* has no 'classes' .* run the claims stage again"),
        (lambda p: p.update(schema_version=2), "aligned-gpu", "plan: .* is not a plan"),
        (lambda p: p.update(nodes="gpu-a"), "aligned-gpu", "plan: .*'nodes' must be a list of node names"),
        (lambda p: p.update(templates={}), "aligned-gpu", "plan: .*'templates' must be a list"),
        (lambda p: p.update(nodes=[]), "aligned-gpu", "classes.aligned-gpu.nodes names nodes the plan does not"),
        (
            lambda p: p["classes"]["aligned-gpu"]["nodes"].update({"gpu-a": -1}),
            "aligned-gpu",
            "gpu-a -1 is not a count",
        ),
        (lambda p: p["classes"]["aligned-gpu"].pop("nodes"), "aligned-gpu", "classes.aligned-gpu.nodes must map"),
    ],
)
def test_plan_errors_name_the_option(tmp_path, change, gpu_class, message):
    with pytest.raises(ReplayError, match=message):
        nodes.plan_nodes(write_plan(tmp_path, change), gpu_class, "fractional-gpu")


def test_an_unreadable_plan(tmp_path):
    with pytest.raises(ReplayError, match=r"^plan: cannot read .*nope.json"):
        nodes.plan_nodes(str(tmp_path / "nope.json"), "aligned-gpu", "fractional-gpu")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ReplayError, match=r"^plan: .*bad.json is not JSON"):
        nodes.plan_nodes(str(tmp_path / "bad.json"), "aligned-gpu", "fractional-gpu")
