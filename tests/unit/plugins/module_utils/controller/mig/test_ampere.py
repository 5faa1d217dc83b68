# SPDX-License-Identifier: Apache-2.0
"""An A100 site in dynamic MIG against an H100 one: Ampere changes MIG mode only with a GPU reset, so the
driver publishes no GPU whole there (``dra/mig.publishes_whole``), and the controller counts the same way in
the plan, the site's whole-GPU capacity, the quota checks (teams, Kueue, KAI) and the replay.

The architecture comes from the probe where it read NVML (``devices[].mig.architecture``), else from the
documented geometry of the GPU's PCI device ID."""

from __future__ import annotations

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.mig import geometry, model
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import plan as planner
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers import mig as schedulers_mig
from ansible_collections.aligned.dra.plugins.module_utils.controller.stages import plan as plan_stage
from ansible_collections.aligned.dra.plugins.module_utils.controller.teams import render as teams_render
from ansible_collections.aligned.dra.plugins.module_utils.dra import mig as dra_mig
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra
from ansible_collections.aligned.dra.tests.support.sites.mig_ampere import A100_40GB, H100, as_model, probed
from ansible_collections.aligned.dra.tests.support.sites.plan_inputs import CLASSES, device_class, exactly, template
from ansible_collections.aligned.dra.tests.support.sites.report_sites import topology_of

KIND = 'device.attributes["dra.aligned.dev"]'
MIG_CLASSES = CLASSES + [device_class("mig", f'device.driver == "dra.aligned.dev" && {KIND}.kind == "mig"')]
DYNAMIC = {"mode": "dynamic"}
GPUS = 8  # the DGX fixture's GPUs
TEMPLATES = [
    template("gpu-1", [exactly("gpu", "gpu")]),
    template("mig-any", [exactly("mig", "mig")]),
    template("whole-or-mig", [{"name": "g", "firstAvailable": [
        {"name": "whole", "deviceClassName": "gpu"}, {"name": "part", "deviceClassName": "mig"}]}]),
]  # fmt: skip


@pytest.fixture(scope="module")
def dgx():
    return topology_of("dgx-h100")


@pytest.fixture(scope="module")
def sites(dgx):
    """``{label: topology}``: the H100 fixture, the same as A100 40GB before the first probe (documented) and
    as the probe reads an A100 through NVML."""
    return {"h100": dgx, "a100": as_model(dgx, A100_40GB), "a100-nvml": probed(dgx, A100_40GB)}


def run_plan(topology: dict) -> dict:
    params = {"site": "s", "objects": MIG_CLASSES + TEMPLATES, "topologies": {"n1": topology}, "required": [],
              "dest": None, "return_plan": "full", "fail_on_unsatisfied": False, "kubernetes_version": "1.36",
              "mig": {"n1": DYNAMIC}}  # fmt: skip
    return plan_stage.run(params, check_mode=False, diff=False)["plan"]


def fits(plan: dict, name: str) -> int:
    return next(t for t in plan["templates"] if t["name"] == name)["fits_total"]


def test_the_architecture_comes_from_the_probe_else_the_documented_geometry(sites, dgx):
    for label, architecture, source in (
        ("h100", "hopper", "documented"),
        ("a100", "ampere", "documented"),
        ("a100-nvml", "ampere", "nvml"),
    ):
        (gpu, *_rest) = model.node_gpus(sites[label], DYNAMIC)
        assert (gpu["state"]["architecture"], gpu["source"]) == (architecture, source), label
    # a probe that read NVML with MIG mode off lists no profiles: the table's, NVML's architecture
    off = probed(dgx, A100_40GB, mig_mode=False)
    (gpu, *_rest) = model.node_gpus(off, DYNAMIC)
    assert gpu["source"] == "documented" and gpu["state"]["architecture"] == "ampere"
    assert gpu["state"]["mig_mode"]["current"]  # planned as MIG leaves it: MIG mode on
    # NVML's name wins over the table's (a device ID the probe reads as another architecture)
    device = {"device_id": H100, "mig": {"readable": True, "mig_capable": True, "architecture": "ampere"}}
    assert geometry.of_gpu(device)["architecture"] == "ampere"
    assert geometry.of_gpu({"device_id": H100})["architecture"] == "hopper"
    assert geometry.documented("0x20b7")["architecture"] == "ampere"  # A30
    assert geometry.documented("0x2901")["architecture"] == "blackwell"  # B200


@pytest.mark.parametrize("label", ["a100", "a100-nvml"])
def test_an_a100_publishes_its_partitions_and_no_gpu_whole_an_h100_both(sites, label):
    devices = dra.devices_from_topology(sites[label], None, None)
    published, counters = model.publish(sites[label], devices, DYNAMIC)
    names = {d["name"] for d in published}
    gpus = [g["device"] for g in model.node_gpus(sites[label], DYNAMIC)]
    assert len(gpus) == GPUS and not names & set(gpus)
    assert all(any(n.startswith(f"{g}-mig-") for n in names) for g in gpus)
    assert len(counters) == GPUS  # the counter sets stay: the partitions consume them
    h100, _counters = model.publish(sites["h100"], dra.devices_from_topology(sites["h100"], None, None), DYNAMIC)
    assert {g["device"] for g in model.node_gpus(sites["h100"], DYNAMIC)} <= {d["name"] for d in h100}


@pytest.mark.parametrize("label", ["a100", "a100-nvml"])
def test_the_plan_fits_no_whole_gpu_claim_on_an_a100_and_counts_no_whole_gpu(sites, label):
    h100, a100 = run_plan(sites["h100"]), run_plan(sites[label])
    assert h100["classes"]["gpu"]["devices"] == GPUS and fits(h100, "gpu-1") == GPUS
    assert a100["classes"]["gpu"]["devices"] == 0 and fits(a100, "gpu-1") == 0
    assert fits(a100, "mig-any") > 0 and a100["classes"]["mig"]["devices"] > 0
    # firstAvailable: the GPU whole first, else a partition: the H100 gives the whole, the A100 a partition
    h100_gpu = h100["mig"]["nodes"]["n1"]["gpus"][0]["templates"]["whole-or-mig"]
    a100_gpu = a100["mig"]["nodes"]["n1"]["gpus"][0]["templates"]["whole-or-mig"]
    assert h100_gpu["whole_gpu"] == 1 and h100_gpu["claims"] == 1
    assert a100_gpu["whole_gpu"] == 0 and a100_gpu["claims"] > 1 and a100_gpu["layout"]


def test_whole_gpu_quotas_are_checked_against_no_a100_gpus(sites):
    conf = {
        "teams": [{"name": "t", "tier": "g", "quotas": {"gpu": 4}, "namespaces": ["t"]}],
        "tiers": {"g": {"guaranteed": True}},
        "oversubscription": {},
    }
    (row,), problems = teams_render.capacity_check(conf, run_plan(sites["h100"]))
    assert (row["capacity"], row["status"], problems) == (GPUS, "ok", [])
    (row,), problems = teams_render.capacity_check(conf, run_plan(sites["a100"]))
    assert (row["capacity"], row["status"]) == (0, "over_limit")
    assert problems == [
        "DeviceClass gpu: guaranteed quotas add up to 4 devices, the site has 0 and no oversubscription is allowed "
        "(aligned_dra_teams.oversubscription)"
    ]


def test_kai_counts_the_devices_the_driver_publishes_no_whole_on_an_a100(sites):
    for label, whole in (("h100", 1), ("a100", 0), ("a100-nvml", 0)):
        published = schedulers_mig.published_per_gpu({"n1": sites[label]}, {"n1": DYNAMIC})
        gpus = model.node_gpus(sites[label], DYNAMIC)
        partitions = sum(len(dra_mig.publish_order(g["state"])) for g in gpus)
        assert published == {"n1": {"gpus": GPUS, "devices": partitions + GPUS * whole}}, label
        nodes = planner.nodes_from_topologies({"n1": sites[label]}, mig={"n1": DYNAMIC})
        mig_names = [d["name"] for d in nodes["n1"]["devices"] if any(d["name"].startswith(g["device"]) for g in gpus)]
        assert published["n1"]["devices"] == len(mig_names), label  # the plan's devices, counted the same


def test_the_site_mig_memory_and_the_kueue_counter_stay_the_gpus_whole_mig_memory(sites):
    """Leaving the whole out changes no partition's counters nor the ``memory`` counter Kueue charges."""
    h100 = model.site_capacity({"n1": sites["h100"]}, {"n1": DYNAMIC})
    a100 = model.site_capacity({"n1": sites["a100"]}, {"n1": DYNAMIC})
    assert h100["gpus"] == a100["gpus"] == GPUS
    assert a100["memory_bytes"] == GPUS * 40 * (1 << 30) and h100["memory_bytes"] == GPUS * 80 * (1 << 30)
    _published, counters = model.publish(sites["a100"], dra.devices_from_topology(sites["a100"], None, None), DYNAMIC)
    assert all(values["memory"] == 40 * (1 << 30) for values in counters.values())
