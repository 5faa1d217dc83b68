# SPDX-License-Identifier: Apache-2.0
"""The plan's ``mig`` section (planner/mig.py) and the plan stage's ``mig`` option.

The node is the DGX H100 fixture (eight H100 SXM5, one RDMA NIC on each GPU's PCIe root; no NVML on the
controller: the documented geometry). The counts are worked out by hand from the H100's placements
(memory slices 0-7; 1g.10gb at 0-6, 2g.20gb at 0, 2, 4, 3g.40gb at 0 and 4, 4g.40gb and 7g.80gb at 0) and
the driver's order (``dra/mig.publish_order``).
"""

from __future__ import annotations

import copy

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import inputs as planner_inputs
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import mig as planner_mig
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import plan as planner
from ansible_collections.aligned.dra.plugins.module_utils.controller.stages import plan as plan_stage
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra
from ansible_collections.aligned.dra.plugins.module_utils.dra import slices as dra_slices
from ansible_collections.aligned.dra.tests.support.sites.plan_inputs import (
    CLASSES,
    device_class,
    exactly,
    pair_objects,
    template,
)
from ansible_collections.aligned.dra.tests.support.sites.report_sites import topology_of

GIB = 1 << 30
KIND = 'device.attributes["dra.aligned.dev"]'
MIG_CLASSES = CLASSES + [device_class("mig", f'device.driver == "dra.aligned.dev" && {KIND}.kind == "mig"')]
ROOT = "resource.kubernetes.io/pcieRoot"
FIRST = "gpu-0000-1a-00-0"  # the fixture's first GPU
DYNAMIC_FIRST = {"mode": "dynamic", "gpus": {"indices": [0]}}
HALF = {"half": [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}]}


def profile(name: str, wanted: str, nic: bool = False) -> dict:
    """A template of one MIG device of profile ``wanted`` (and a NIC on its parent's PCIe root)."""
    requests = [exactly("mig", "mig", selectors=[{"cel": {"expression": f'{KIND}.profile == "{wanted}"'}}])]
    if nic:
        return template(name, requests + [exactly("nic", "nic")], [{"matchAttribute": ROOT}])
    return template(name, requests)


TEMPLATES = [
    profile("mig-1g", "1g.10gb"),
    profile("mig-3g", "3g.40gb"),
    profile("mig-2g", "2g.20gb"),
    template("gpu-1", [exactly("gpu", "gpu")]),
]


@pytest.fixture(scope="module")
def dgx():
    return topology_of("dgx-h100")


def run_plan(topologies: dict, mig: dict | None, templates: list | None = None, **extra) -> dict:
    params = {"site": "s", "objects": MIG_CLASSES + (templates or TEMPLATES), "topologies": topologies,
              "required": [], "dest": None, "return_plan": "full", "fail_on_unsatisfied": False,
              "kubernetes_version": "1.36", **extra}  # fmt: skip
    if mig is not None:
        params["mig"] = mig
    return plan_stage.run(params, check_mode=False, diff=False)["plan"]


def gpu_of(plan: dict, node: str = "n1", device: str = FIRST) -> dict:
    return next(g for g in plan["mig"]["nodes"][node]["gpus"] if g["device"] == device)


def starts(layout: list) -> list:
    return [(p["profile"], p["start"]) for p in layout]


def test_a_site_without_mig_has_no_section_and_the_same_plan(dgx):
    without = run_plan({"n1": dgx}, None)
    assert "mig" not in without
    assert run_plan({"n1": dgx}, {}) == without == run_plan({"n1": dgx}, {"n1": {"mode": "off"}})
    nodes = planner.nodes_from_topologies({"n1": dgx})
    assert planner_mig.section(nodes, MIG_CLASSES, TEMPLATES) is None


def test_a_dynamic_gpu_says_where_it_is_its_profiles_and_their_documented_source(dgx):
    gpu = gpu_of(run_plan({"n1": dgx}, {"n1": DYNAMIC_FIRST}))
    assert (gpu["pci_address"], gpu["model"], gpu["mode"], gpu["source"]) == (
        "0000:1a:00.0", "H100-SXM5-80GB", "dynamic", "documented")  # fmt: skip
    assert gpu["memory_slices"] == 8 and "GPU driver may set it a little lower" in gpu["note"]
    # the driver's order: memory slices, then compute slices
    assert [p["name"] for p in gpu["profiles"]] == [
        "1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"]  # fmt: skip
    assert gpu["profiles"][0] == {"name": "1g.10gb", "memory_bytes": 10 * GIB, "compute_slices": 1, "memory_slices": 1}


def test_alone_each_template_fills_the_gpu_in_the_drivers_order(dgx):
    plan = run_plan({"n1": dgx}, {"n1": DYNAMIC_FIRST})
    gpu = gpu_of(plan)
    # the whole-GPU template lands on no MIG device: not in the section
    assert sorted(gpu["templates"]) == ["mig-1g", "mig-2g", "mig-3g"]
    alone = gpu["templates"]
    assert alone["mig-1g"]["claims"] == 7
    assert starts(alone["mig-1g"]["layout"]) == [("1g.10gb", s) for s in (6, 5, 4, 3, 2, 1, 0)]
    assert starts(alone["mig-3g"]["layout"]) == [("3g.40gb", 4), ("3g.40gb", 0)]
    assert starts(alone["mig-2g"]["layout"]) == [("2g.20gb", 4), ("2g.20gb", 2), ("2g.20gb", 0)]
    assert all(entry["whole_gpu"] == 0 and "bound" not in entry for entry in alone.values())
    # the main plan counts the same devices: 7 x 1g on the MIG GPU, none elsewhere; 8 whole GPUs (one partitionable)
    by_name = {t["name"]: t for t in plan["templates"]}
    assert by_name["mig-1g"]["fits_total"] == 7 and by_name["gpu-1"]["fits_total"] == 8


def test_the_catalogue_mix_is_round_robin_first_fit(dgx):
    """1g at 6 (first in the driver's order), then the 3g: at 4 it would overlap 6, so at 0; the 2g at 4 (4-5);
    the next 1g finds only slice 7, where no 1g.10gb placement is: three claims, one of each."""
    gpu = gpu_of(run_plan({"n1": dgx}, {"n1": DYNAMIC_FIRST}))
    mix = gpu["mix"]
    assert mix["claims"] == {"mig-1g": 1, "mig-3g": 1, "mig-2g": 1} and mix["total"] == 3
    assert [(p["template"], p["profile"], p["start"]) for p in mix["layout"]] == [
        ("mig-1g", "1g.10gb", 6), ("mig-3g", "3g.40gb", 0), ("mig-2g", "2g.20gb", 4)]  # fmt: skip


def test_site_totals_sum_the_gpus(dgx):
    mig = {"n1": {"mode": "dynamic", "gpus": {"indices": [0, 1]}}, "n2": DYNAMIC_FIRST}
    plan = run_plan({"n1": dgx, "n2": dgx}, mig)
    section = plan["mig"]
    assert section["gpus"] == 3 and section["sources"] == {"documented": 3} and section["notes"]
    assert section["mix"] == ["mig-1g", "mig-3g", "mig-2g"]  # catalogue order
    assert section["templates"]["mig-1g"] == {"gpus": 3, "alone": 21, "mix": 3, "bound": False}
    assert section["templates"]["mig-3g"] == {"gpus": 3, "alone": 6, "mix": 3, "bound": False}
    # the summary the role registers leaves the per-node entries in plan.json
    summary = planner.plan_summary(plan)
    assert "nodes" not in summary["mig"] and summary["mig"]["templates"] == section["templates"]


def test_a_static_gpu_plans_on_the_instances_its_layout_declares(dgx):
    static = {"mode": "static", "layout": "half", "mig_configs": HALF, "gpus": {"indices": [0]}}
    plan = run_plan({"n1": dgx}, {"n1": static})
    gpu = gpu_of(plan)
    assert gpu["mode"] == "static"
    assert gpu["instances"] == [
        {"profile": "3g.40gb", "start": 0, "size": 4},
        {"profile": "3g.40gb", "start": 4, "size": 4},
    ]
    # only the 3g template lands (no 1g or 2g instance exists); the GPU whole is not published
    assert list(gpu["templates"]) == ["mig-3g"]
    assert starts(gpu["templates"]["mig-3g"]["layout"]) == [("3g.40gb", 0), ("3g.40gb", 4)]
    assert {t["name"]: t["fits_total"] for t in plan["templates"]}["gpu-1"] == 7


def test_a_mig_and_nic_template_counts_the_nics_of_the_gpus_root(dgx):
    """One NIC on each GPU's root: one claim per GPU, whatever the partitions left."""
    templates = TEMPLATES + [profile("mig-1g-nic", "1g.10gb", nic=True)]
    gpu = gpu_of(run_plan({"n1": dgx}, {"n1": DYNAMIC_FIRST}, templates))
    entry = gpu["templates"]["mig-1g-nic"]
    assert entry["claims"] == 1 and starts(entry["layout"]) == [("1g.10gb", 6)]


def test_a_mig_and_nic_claim_has_the_level_of_its_parent_gpu_and_the_nic(dgx):
    """A MIG device carries its parent's pciBusID: it joins the GPU's probed function and pairs with the NIC on
    the GPU's root at the GPU's own level (PXB on a DGX H100), in the main plan as gpu-nic-pair-1 is."""
    templates = pair_objects() + [profile("mig-3g-40gb-nic", "3g.40gb", nic=True)]
    plan = run_plan({"n": dgx}, {"n": {"mode": "dynamic"}}, templates)
    by_name = {t["name"]: t for t in plan["templates"]}
    pair, mig_nic = by_name["gpu-nic-pair-1"], by_name["mig-3g-40gb-nic"]
    assert pair["aligned_level"] == "PXB" and pair["fits_total"] == mig_nic["fits_total"] == 8
    allocations = mig_nic["nodes"]["n"]["allocations"]
    assert len(allocations) == 8 and all("-mig-3g-40gb-" in a["devices"]["mig"][0] for a in allocations)
    for key in ("aligned_level", "worst_level"):
        assert {(a[key], a[key + "_exact"], a["level_source"]) for a in allocations} == {("PXB", True, "topology")}
        assert (mig_nic[key], mig_nic[key + "_exact"]) == (pair[key], pair[key + "_exact"]) == ("PXB", True)


def test_a_template_that_can_take_the_gpu_whole_says_so(dgx):
    """firstAvailable: the GPU whole first, else a 3g: alone, one claim takes the whole."""
    whole_first = {"name": "g", "firstAvailable": [
        {"name": "whole", "deviceClassName": "gpu"},
        {"name": "part", "deviceClassName": "mig",
         "selectors": [{"cel": {"expression": f'{KIND}.profile == "3g.40gb"'}}]}]}  # fmt: skip
    gpu = gpu_of(run_plan({"n1": dgx}, {"n1": DYNAMIC_FIRST}, [template("whole-or-3g", [whole_first])]))
    entry = gpu["templates"]["whole-or-3g"]
    assert entry == {"claims": 1, "layout": [], "whole_gpu": 1}


def test_nvml_profiles_are_marked_nvml_with_their_sizes(dgx):
    topology = copy.deepcopy(dgx)
    first = next(d for d in topology["devices"] if d["pci_address"] == "0000:1a:00.0")
    profiles = [
        {"id": 19, "name": "1g.10gb", "slices": 1, "instance_count": 7, "memory_bytes": 9984 * (1 << 20),
         "multiprocessors": 16, "placements": [{"start": s, "size": 1} for s in range(7)]},
        {"id": 0, "name": "7g.80gb", "slices": 7, "instance_count": 1, "memory_bytes": 81008 * (1 << 20),
         "multiprocessors": 132, "placements": [{"start": 0, "size": 8}]},
    ]  # fmt: skip
    first["mig"] = {"readable": True, "mig_capable": True, "name": "NVIDIA H100 80GB HBM3", "memory_slices": 8,
                    "mig_mode": {"current": True, "pending": True}, "profiles": profiles, "instances": []}  # fmt: skip
    plan = run_plan({"n1": topology}, {"n1": DYNAMIC_FIRST})
    gpu = gpu_of(plan)
    assert gpu["source"] == "nvml" and "note" not in gpu and plan["mig"]["notes"] == []
    assert gpu["profiles"][0]["memory_bytes"] == 9984 * (1 << 20)
    assert gpu["templates"]["mig-1g"]["claims"] == 7


def test_gpus_that_look_the_same_are_planned_once(dgx, monkeypatch):
    calls = []
    real = planner_mig.GpuPlanner.alone

    def counting(self, *args, **kwargs):
        calls.append(self.node.name)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(planner_mig.GpuPlanner, "alone", counting)
    plan = run_plan({"n1": dgx, "n2": dgx}, {"n1": DYNAMIC_FIRST, "n2": DYNAMIC_FIRST})
    assert gpu_of(plan, "n1") == gpu_of(plan, "n2")
    assert calls == [f"n1/{FIRST}"] * 3  # three templates land, planned on n1 only (n2 is the same node)
    # n3 differs (a second MIG GPU), but its first GPU looks like n1's: only the second is planned
    calls.clear()
    two = {"mode": "dynamic", "gpus": {"indices": [0, 1]}}
    plan = run_plan({"n1": dgx, "n3": dgx}, {"n1": DYNAMIC_FIRST, "n3": two})
    second = dra.device_name("gpu", "0000:2b:00.0")
    assert gpu_of(plan, "n3") == gpu_of(plan, "n1") and gpu_of(plan, "n3", second)["templates"]
    assert calls == [f"n1/{FIRST}"] * 3 + [f"n3/{second}"] * 3


def test_planning_on_slices_the_topologies_name_the_mig_gpus(dgx):
    nodes = planner.nodes_from_topologies({"n1": dgx}, mig={"n1": DYNAMIC_FIRST})
    devices = [{k: v for k, v in d.items() if k not in ("driver", "pool")} for d in nodes["n1"]["devices"]]
    slices = dra_slices.resource_slices("n1", devices)
    counters = [{"name": name, "counters": {k: {"value": str(v)} for k, v in values.items()}}
                for name, values in nodes["n1"]["shared_counters"].items()]  # fmt: skip
    slices[0]["spec"]["sharedCounters"] = counters
    plan = run_plan({"n1": dgx}, {"n1": DYNAMIC_FIRST}, slices=slices)
    assert gpu_of(plan)["templates"]["mig-1g"]["claims"] == 7


@pytest.mark.parametrize(
    ("mig", "message"),
    [
        (["n1"], r"^mig: a mapping of node to its aligned_dra_mig, not list"),
        ({"n1": "dynamic"}, r"^mig\.n1: aligned_dra_mig must be a mapping, not str"),
        ({"n1": {"mode": "static", "gpus": {"indices": [0]}}}, r"^mig\.n1: aligned_dra_mig: mode static needs layout"),
    ],
)
def test_bad_mig_settings_name_the_option_and_the_node(dgx, mig, message):
    with pytest.raises(planner_inputs.InputError, match=message):
        planner_inputs.load_site({"objects": MIG_CLASSES + TEMPLATES, "topologies": {"n1": dgx}, "mig": mig})


def test_a_mig_gpu_is_never_shareable(dgx):
    """Where the minor serves consumable capacity the GPUs are shareable, but not one MIG takes."""
    nodes = planner.nodes_from_topologies({"n1": dgx}, shareable_gpus=True, mig={"n1": DYNAMIC_FIRST})
    by_name = {d["name"]: d for d in nodes["n1"]["devices"]}
    assert not by_name[FIRST].get("allowMultipleAllocations")
    assert by_name[dra.device_name("gpu", "0000:2b:00.0")].get("allowMultipleAllocations")


def test_the_documented_ofa_engine_lets_one_me_partition_and_no_warning(dgx):
    """The documented +me profile exists once per GPU and has the GPU's one OFA engine (as the 7g does): the
    counter set holds one, so the scheduler places one +me, and nothing is said."""
    templates = TEMPLATES + [profile("mig-1g-me", "1g.10gb+me")]
    gpu = gpu_of(run_plan({"n1": dgx}, {"n1": DYNAMIC_FIRST}, templates))
    assert gpu["templates"]["mig-1g-me"]["claims"] == 1
    assert starts(gpu["templates"]["mig-1g-me"]["layout"]) == [("1g.10gb+me", 6)]
    assert "warnings" not in gpu


def test_more_instances_of_a_profile_than_the_gpu_makes_are_said_where_no_engine_figure_refuses_them(dgx):
    """NVML profiles without engine figures: the memory slices alone allow a +me on every 1g placement."""
    topology = copy.deepcopy(dgx)
    first = next(d for d in topology["devices"] if d["pci_address"] == "0000:1a:00.0")
    ones = [{"start": s, "size": 1} for s in range(7)]
    profiles = [
        {"id": 19, "name": "1g.10gb", "slices": 1, "instance_count": 7, "memory_bytes": 10 * GIB,
         "multiprocessors": 16, "placements": ones},
        {"id": 20, "name": "1g.10gb+me", "slices": 1, "instance_count": 1, "memory_bytes": 10 * GIB,
         "multiprocessors": 16, "placements": ones},
        {"id": 0, "name": "7g.80gb", "slices": 7, "instance_count": 1, "memory_bytes": 80 * GIB,
         "multiprocessors": 132, "placements": [{"start": 0, "size": 8}]},
    ]  # fmt: skip
    first["mig"] = {"readable": True, "mig_capable": True, "name": "NVIDIA H100 80GB HBM3", "memory_slices": 8,
                    "mig_mode": {"current": True, "pending": True}, "profiles": profiles, "instances": []}  # fmt: skip
    templates = TEMPLATES + [profile("mig-1g-me", "1g.10gb+me")]
    gpu = gpu_of(run_plan({"n1": topology}, {"n1": DYNAMIC_FIRST}, templates))
    assert gpu["templates"]["mig-1g-me"]["claims"] == 7  # what the scheduler would allocate
    said = ("the GPU makes at most 1 (instance_count); the published counters allow more, so the scheduler would "
            "allocate them and Prepare fail")  # fmt: skip
    assert gpu["warnings"] == [
        f"mig-1g-me: 7 x 1g.10gb+me planned, {said}",
        f"the catalogue mix: 3 x 1g.10gb+me planned, {said}",
    ]
    assert "warnings" not in gpu_of(run_plan({"n1": topology}, {"n1": DYNAMIC_FIRST}))
