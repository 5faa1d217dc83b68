# SPDX-License-Identifier: Apache-2.0
"""The thin ratio of burstable templates, worked out by hand on hand-written GPUs.

The burstable template asks for 20Gi and may use up to 40Gi (factor 2). n1 has
two 80Gi GPUs and one 30Gi GPU, all shared by capacity (memory, and compute of
which the template asks 25 %): 4 + 4 + 1 claims fit by request; the 30Gi GPU's claim is promised at most its 30Gi. n2's 80Gi GPU
is not shared: one claim takes it whole. n3's GPU publishes no memory.
"""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import burst
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import plan as planner
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import thin
from ansible_collections.aligned.dra.tests.support.sites.plan_inputs import CLASSES, exactly, split_objects, template

GI = 2**30


def gpu(node, name, memory, multi=True):
    device = {
        "name": name,
        "driver": "dra.aligned.dev",
        "pool": node,
        "allowMultipleAllocations": multi,
        "attributes": {"dra.aligned.dev/kind": {"string": "gpu"}},
        # as the bundled driver publishes a shared GPU: memory and a compute percent
        "capacity": {"memory": {"value": memory}, "compute": {"value": "100"}} if memory else {},
    }
    return device


NODES = {
    "n1": {"devices": [gpu("n1", "gpu-a", "80Gi"), gpu("n1", "gpu-b", "80Gi"), gpu("n1", "gpu-c", "30Gi")]},
    "n2": {"devices": [gpu("n2", "gpu-a", "80Gi", multi=False)]},
}


def objects(minor="1.36"):
    rendered = burst.render(
        {"templates": {"fractional_gpu": {"memory": "20Gi"}}}, "s", minor, fractional_burst={"memory": 2}
    )
    return split_objects(rendered["objects"])


def test_the_ratio_per_gpu_node_and_site():
    classes, templates = objects()
    result = planner.plan("s", NODES, classes, templates)
    (entry,) = result["thin"]
    assert entry["template"] == "fractional-gpu-burst"
    assert (entry["request_memory"], entry["limit_memory"]) == (20 * GI, 40 * GI)
    n1 = entry["nodes"]["n1"]
    assert n1["gpus"]["gpu-a"] == {"claims": 4, "memory": 80 * GI, "promised": 160 * GI, "ratio": 2.0}
    assert n1["gpus"]["gpu-c"] == {"claims": 1, "memory": 30 * GI, "promised": 30 * GI, "ratio": 1.0}
    assert n1["claims"] == 9
    assert n1["ratio"] == round(350 / 190, 4)
    assert n1["bound"] is False
    n2 = entry["nodes"]["n2"]
    assert n2["gpus"]["gpu-a"]["claims"] == 1 and n2["ratio"] == 0.5  # taken whole: 40 of 80Gi promised
    assert entry["claims"] == 10
    assert entry["ratio"] == round(390 / 270, 4)
    assert entry["bound"] is False
    # the requests count against capacity: the fractional template fits as often
    fits = {t["name"]: t["fits_total"] for t in result["templates"]}
    assert fits["fractional-gpu-burst"] == fits["fractional-gpu"] == 10


def test_unknown_memory_leaves_the_ratio_null():
    _classes, templates = objects()
    nodes = dict(NODES, n3={"devices": [gpu("n3", "gpu-a", None)]})
    burst_template = next(t for t in templates if t["metadata"]["name"] == "fractional-gpu-burst")
    # a GPU without memory takes no capacity request; a claim without one fits it once
    (entry,) = thin.thin(
        {
            "templates": [
                {"name": "fractional-gpu-burst", "nodes": {"n3": {"allocations": [{"devices": {"gpu": ["gpu-a"]}}]}}}
            ]
        },
        [burst_template],
        nodes,
    )
    n3 = entry["nodes"]["n3"]
    assert n3["gpus"]["gpu-a"] == {"claims": 1, "memory": None, "promised": None, "ratio": None}
    assert n3["ratio"] is None and entry["ratio"] is None


def test_a_node_whose_search_gave_up_is_a_bound():
    _classes, templates = objects()
    burst_template = next(t for t in templates if t["metadata"]["name"] == "fractional-gpu-burst")
    planned = {
        "templates": [
            {
                "name": "fractional-gpu-burst",
                "nodes": {"n2": {"allocations": [{"devices": {"gpu": ["gpu-a"]}}], "search_limit": "gave up"}},
            }
        ]
    }
    (entry,) = thin.thin(planned, [burst_template], NODES)
    assert entry["nodes"]["n2"]["bound"] is True and entry["bound"] is True
    assert entry["ratio"] == 0.5


def test_no_burstable_template_no_entry():
    result = planner.plan("s", NODES, CLASSES, [template("t", [exactly("gpu", "gpu")])])
    assert result["thin"] == []


def test_a_compute_limit_only_promises_the_request():
    item = template("b", [exactly("gpu", "gpu", capacity={"requests": {"memory": "20Gi"}})])
    item["spec"]["spec"]["devices"]["config"] = [
        {
            "opaque": {
                "driver": "dra.aligned.dev",
                "parameters": {"kind": "GpuConfig", "sharing": {"mps": {"limits": {"compute": 50}}}},
            }
        }
    ]
    assert thin.burst_limits(item) == (20 * GI, 20 * GI)
    assert thin.burst_limits(template("plain", [exactly("gpu", "gpu")])) is None


def test_the_summary_keeps_the_ratios_and_drops_the_nodes():
    classes, templates = objects()
    summary = planner.plan_summary(planner.plan("s", NODES, classes, templates))
    (entry,) = summary["thin"]
    assert "nodes" not in entry and entry["ratio"] == round(390 / 270, 4)
