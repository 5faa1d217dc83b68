# SPDX-License-Identifier: Apache-2.0
"""The controller's MIG model: profiles from NVML or the documented table, what the driver would publish, the
site's capacity, the smallest profile and the layout snippet."""

from __future__ import annotations

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.mig import checks, model
from ansible_collections.aligned.dra.plugins.module_utils.dra import mig as dra_mig
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra
from ansible_collections.aligned.dra.plugins.module_utils.node.mig import nvml_state
from ansible_collections.aligned.dra.tests.support.fakes.nvml import FakeNvml
from ansible_collections.aligned.dra.tests.support.sites.report_sites import topology_of

GIB = 1 << 30
A100 = "0000:07:00.0"
HALF = {"half": [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}]}


@pytest.fixture(scope="module")
def dgx():
    """The DGX H100 fixture's probe: eight H100 SXM5 (0x2330), no NVML on the controller."""
    return topology_of("dgx-h100")


def test_without_nvml_the_documented_geometry_is_used_and_marked(dgx):
    gpus = model.node_gpus(dgx, {"mode": "dynamic"})
    assert len(gpus) == 8 and {g["source"] for g in gpus} == {"documented"}
    first = gpus[0]
    assert first["device"] == dra.device_name("gpu", first["pci_address"])
    assert first["memory_slices"] == 8 and first["model"] == "H100-SXM5-80GB"
    sizes = {p["name"]: p["memory_bytes"] for p in first["state"]["profiles"]}
    assert sizes["1g.10gb"] == 10 * GIB and sizes["7g.80gb"] == 80 * GIB


def test_mode_off_or_no_settings_takes_no_gpu(dgx):
    assert model.node_gpus(dgx, {"mode": "off"}) == [] == model.node_gpus(dgx, None)
    devices = dra.devices_from_topology(dgx, None, None)
    assert model.publish(dgx, devices, {}) == (devices, {})


def test_the_selector_picks_the_gpus(dgx):
    addresses = [g["pci_address"] for g in model.node_gpus(dgx, {"mode": "dynamic"})]
    picked = model.node_gpus(dgx, {"mode": "dynamic", "gpus": {"indices": [1, 3]}})
    assert [g["pci_address"] for g in picked] == [addresses[1], addresses[3]]


def test_dynamic_publishes_each_gpu_as_the_driver_does_in_place_with_its_counter_set(dgx):
    devices = dra.devices_from_topology(dgx, None, None)
    settings = {"mode": "dynamic", "gpus": {"indices": [0]}}
    out, counters = model.publish(dgx, devices, settings)
    gpu = model.node_gpus(dgx, settings)[0]
    position = next(i for i, d in enumerate(devices) if d["name"] == gpu["device"])
    whole = devices[position]
    expected = dra_mig.dynamic_devices(whole, gpu["state"])
    assert out[position : position + len(expected)] == expected
    assert out[:position] == devices[:position] and out[position + len(expected) :] == devices[position + 1 :]
    (name,) = counters
    assert name == dra_mig.counter_set_name(gpu["device"])
    # documented profiles give no multiprocessor or engine figures but the OFA one: those counters are unknown,
    # left out; one OFA engine (the +me profile's or the GPU whole's: the exact maximum, dra/mig.engine_capacities)
    assert counters[name] == {"memory": 80 * GIB, "ofa-engines": 1, **{f"memory-slice-{i}": 1 for i in range(8)}}
    me = [d for d in out if "-mig-1g-10gb-me-" in d["name"]]
    assert len(me) == 7 and all(d["consumesCounters"][0]["counters"]["ofa-engines"] == {"value": "1"} for d in me)


def test_static_plans_the_layouts_instances_packed_as_the_node_packs_them(dgx):
    settings = {"mode": "static", "layout": "half", "mig_configs": HALF, "gpus": {"indices": [0]}}
    gpu = model.node_gpus(dgx, settings)[0]
    assert gpu["instances"] == [
        {"profile": "3g.40gb", "start": 0, "size": 4},
        {"profile": "3g.40gb", "start": 4, "size": 4},
    ]
    devices = dra.devices_from_topology(dgx, None, None)
    out, counters = model.publish(dgx, devices, settings)
    assert counters == {}
    mig = [d for d in out if d["name"].startswith(gpu["device"] + "-mig-")]
    assert [d["name"] for d in mig] == [gpu["device"] + "-mig-3g-40gb-0", gpu["device"] + "-mig-3g-40gb-4"]
    assert all("dra.aligned.dev/migUUID" not in d["attributes"] for d in mig)  # planned: no instance yet
    assert gpu["device"] not in {d["name"] for d in out}


def test_a_static_layout_that_does_not_fit_names_the_gpu():
    dgx = topology_of("dgx-h100")
    settings = {
        "mode": "static",
        "layout": "big",
        "mig_configs": {"big": [{"devices": "all", "mig-enabled": True, "mig-devices": {"7g.80gb": 2}}]},
    }
    with pytest.raises(model.MigModelError, match="layout big on GPU 0000:"):
        model.node_gpus(dgx, settings)
    with pytest.raises(model.MigModelError, match="mode static needs layout"):
        model.node_gpus(dgx, {"mode": "static"})


def test_nvmls_profiles_and_instances_from_the_probe_decide_over_the_table():
    nvml = FakeNvml()
    nvml.add_gpu(A100, model="A100-SXM4-40GB")
    nvml.enable_mig(A100)
    nvml.create(A100, "3g.20gb", 4)
    nvml.nvmlInit()
    state = nvml_state.read_gpu(nvml, A100)
    device = {"kind": "gpu", "vendor_id": "0x10de", "device_id": "0x20b0", "pci_address": A100}
    device["mig"] = {"readable": True, **{k: v for k, v in state.items() if k not in ("pci_address", "error")}}
    got = model.gpu_state(device)
    assert got["source"] == "nvml"
    sizes = {p["name"]: p["memory_bytes"] for p in got["profiles"]}
    assert sizes == {p["name"]: p["memory_bytes"] for p in state["profiles"]}
    assert sizes["1g.5gb"] < 5 * GIB  # NVML's figure, not the name's
    # static: the instances NVML reports are the plan's, whatever the layout says
    settings = {"mode": "static", "layout": "half", "mig_configs": HALF}
    (gpu,) = model.node_gpus({"devices": [device]}, settings)
    assert gpu["instances"] == [{"profile": "3g.20gb", "start": 4, "size": 4}]


def test_the_site_capacity_counts_gpus_memory_and_profiles_and_says_when_it_is_a_bound(dgx):
    topologies = {"a": dgx, "b": dgx}
    mig = {"a": {"mode": "dynamic"}, "b": {"mode": "static", "layout": "half", "mig_configs": HALF}}
    capacity = model.site_capacity(topologies, mig)
    assert capacity["gpus"] == 16
    assert capacity["memory_bytes"] == 8 * 80 * GIB + 8 * 2 * 40 * GIB
    assert capacity["sources"] == {"documented": 16} and capacity["bound"] is True
    assert capacity["by_profile"]["1g.10gb"] == {"gpus": 8, "max_per_gpu": 7, "memory_bytes": 10 * GIB}
    assert capacity["by_profile"]["3g.40gb"] == {"gpus": 16, "max_per_gpu": 2, "memory_bytes": 40 * GIB}
    assert model.site_capacity(topologies, {}) == {
        "gpus": 0,
        "memory_bytes": 0,
        "by_profile": {},
        "sources": {},
        "bound": False,
    }


def test_the_smallest_profile_by_memory_and_by_compute_share(dgx):
    profiles = model.node_gpus(dgx, {"mode": "dynamic"})[0]["state"]["profiles"]
    assert model.smallest_profile(profiles, memory_bytes=8 * GIB)["name"] == "1g.10gb"
    assert model.smallest_profile(profiles, memory_bytes=15 * GIB)["name"] == "1g.20gb"
    assert model.smallest_profile(profiles, compute_fraction=0.25)["name"] == "2g.20gb"
    assert model.smallest_profile(profiles, compute_fraction=0.5)["name"] == "4g.40gb"
    assert model.smallest_profile(profiles, memory_bytes=30 * GIB, compute_fraction=1.0)["name"] == "7g.80gb"
    assert model.smallest_profile(profiles, memory_bytes=81 * GIB) is None
    # Headroom: 9.6 GiB fills 96% of a 1g.10gb; with 5% kept free it needs the 1g.20gb.
    assert model.smallest_profile(profiles, memory_bytes=int(9.6 * GIB))["name"] == "1g.10gb"
    assert model.smallest_profile(profiles, memory_bytes=int(9.6 * GIB), headroom=0.05)["name"] == "1g.20gb"
    with pytest.raises(ValueError, match="headroom"):
        model.smallest_profile(profiles, memory_bytes=GIB, headroom=1.0)
    # Which need picked the profile (the replay's and the advice's decided_by, one rule).
    assert model.decided_by(profiles, 30 * GIB, 0.25, 0.0, "3g.40gb") == "memory"  # compute alone: a 2g
    assert model.decided_by(profiles, 4 * GIB, 0.5, 0.0, "4g.40gb") == "compute"  # memory alone: a 1g
    assert model.decided_by(profiles, 35 * GIB, 0.5, 0.0, "4g.40gb") == "compute"  # memory alone: a 3g
    assert model.decided_by(profiles, 30 * GIB, 0.4, 0.0, "3g.40gb") == "both"  # each alone picks the 3g
    assert model.decided_by(profiles, 8 * GIB, None, 0.0, "1g.10gb") == "memory"
    assert model.decided_by(profiles, None, 0.25, 0.0, "2g.20gb") == "compute"
    assert model.decided_by(profiles, 81 * GIB, 0.25, 0.0, None) == "memory"  # no profile holds the memory


def test_the_layout_snippet_is_a_layout_the_validation_accepts(dgx):
    snippet = model.layout_snippet({"1g.10gb": 3, "2g.20gb": 2, "3g.40gb": 0}, {"indices": [0, 1]})
    assert snippet["mode"] == "static" and snippet["gpus"] == {"indices": [0, 1]}
    assert snippet["mig_configs"]["aligned-advice"][0]["mig-devices"] == {"1g.10gb": 3, "2g.20gb": 2}
    assert checks.layout_problems(snippet, dgx) == []
    placed = model.node_gpus(dgx, snippet)
    assert len(placed) == 2 and len(placed[0]["instances"]) == 5
