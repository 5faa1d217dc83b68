# SPDX-License-Identifier: Apache-2.0
"""GPU-memory quotas on MIG devices with Kueue (schedulers/kueue/mig.py, through the teams stage's render):
the counter mapping of every MIG class and its Configuration, valid as Kueue v0.19.2 validates it; the
ClusterQueues' quotas in memory; the cohort's quotas against the site's MIG memory, a bound marked as one;
the counter gate named where the site's Kueue version has it off; and what is refused, naming the setting."""

from __future__ import annotations

import copy

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import burst
from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import render as claims
from ansible_collections.aligned.dra.plugins.module_utils.controller.mig import model as mig_model
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers import mig as schedulers_mig
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kueue import checks as kueue_checks
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kueue import mig as kueue_mig
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kueue.api import KueueError
from ansible_collections.aligned.dra.plugins.module_utils.controller.stages import teams_render as teams
from ansible_collections.aligned.dra.plugins.module_utils.dra import cel as dra_cel
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra
from ansible_collections.aligned.dra.tests.support.sites.report_sites import topology_of

DYNAMIC = {"mode": "dynamic"}
STATIC = {
    "mode": "static",
    "layout": "half",
    "mig_configs": {"half": [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}]},
}
GIB = 1 << 30
GATE = "KueueDRAIntegrationPartitionableDevices"


@pytest.fixture(scope="module")
def dgx():
    """Eight H100 SXM5 80GB (0x2330); a captured tree, so the geometry NVIDIA documents (no NVML reading)."""
    return topology_of("dgx-h100")


def team(name: str, quota, tier: str = "production", **extra) -> dict:
    return {"name": name, "tier": tier, "templates": ["mig-1g-10gb", "mig-3g-40gb"], "quotas": {"mig": quota}, **extra}


def render(raw: dict, dgx: dict, mig=None, minor: str = "1.36", gates=None, claims_settings=None) -> dict:
    """The teams stage's render on a site of one DGX H100 host (``h1``) with MIG as ``mig`` says."""
    mig = {"h1": DYNAMIC} if mig is None else mig
    topologies = {host: dgx for host in mig}
    objects = burst.render(claims_settings or {}, "s", minor, gates, mig=mig, topologies=topologies)["objects"]
    site = schedulers_mig.site(mig, topologies)
    if site is not None:
        site["published"] = schedulers_mig.published_per_gpu(topologies, mig)
    keys = claims.settings(claims_settings or {})["classes"]
    return teams.render(raw, "s", objects, minor, gates, class_keys=keys, mig=site)


def kueue_site(*teams_, **kueue) -> dict:
    return {"engine": "kueue", "teams": list(teams_), **({"kueue": kueue} if kueue else {})}


# -- the mapping and the Configuration ---------------------------------------------------------------------


def test_every_mig_class_maps_to_one_memory_resource_with_a_counter_source(dgx):
    result = render(kueue_site(team("llm", "160Gi")), dgx)
    configuration = result["kueue"]["configuration"]
    assert configuration["featureGates"][GATE] is True
    (mapping,) = configuration["resources"]["deviceClassMappings"]
    assert mapping["name"] == "aligned.dev/mig-memory"
    assert mapping["deviceClassNames"][0] == "mig.aligned.dev"
    assert sorted(mapping["deviceClassNames"][1:]) == sorted(
        f"mig-{t}.aligned.dev" for t in ("1g-10gb", "1g-10gb-me", "1g-20gb", "2g-20gb", "3g-40gb", "4g-40gb", "7g-80gb")
    )
    assert mapping["sources"] == [
        {
            "counter": {
                "name": "memory",
                "driver": "dra.aligned.dev",
                "deviceSelector": {
                    "cel": {
                        "expression": 'device.driver == "dra.aligned.dev" && device.attributes["dra.aligned.dev"].kind == "mig"'
                    }
                },
            }
        }
    ]
    # valid as Kueue's config validation takes it, and every object against Kueue's CRDs
    assert kueue_checks.validate_configuration(configuration) == []
    assert teams.validate_all(result["objects"], "1.36") == []
    assert result["kueue"]["mappings"]["mig.aligned.dev"]["unit"] == "counter"


def test_the_counter_selector_keeps_the_mig_devices_the_driver_publishes_each_with_its_memory(dgx):
    """The deviceSelector scopes Kueue's accounting to MIG devices of the driver; every one of them consumes
    ``memory`` of its GPU's counter set (Kueue marks a matched device without it inadmissible)."""
    result = render(kueue_site(team("llm", "80Gi")), dgx)
    (mapping,) = result["kueue"]["configuration"]["resources"]["deviceClassMappings"]
    counter = mapping["sources"][0]["counter"]
    one = {"mode": "dynamic", "gpus": {"indices": [0]}}
    devices, shared = mig_model.publish(dgx, dra.devices_from_topology(dgx, None, None), one)
    selector = dra_cel.Selector(counter["deviceSelector"]["cel"]["expression"])
    chosen = [
        d
        for d in devices
        if selector.evaluate(dra_cel.cel_device(d, counter["driver"], [dra.DRIVER_NAME])) == (True, None)
    ]
    assert len(chosen) == 25 and all(d["attributes"]["dra.aligned.dev/kind"]["string"] == "mig" for d in chosen)
    for device in chosen:
        (consumed,) = device["consumesCounters"]
        assert consumed["counterSet"] in shared and counter["name"] in consumed["counters"]
    by_name = {d["name"]: d for d in chosen}
    assert next(v for k, v in by_name.items() if "-mig-1g-10gb-" in k)["consumesCounters"][0]["counters"]["memory"] == {
        "value": "10Gi"
    }


def test_a_site_split_by_kind_counts_the_mig_devices_of_its_gpu_driver(dgx):
    settings = {"gpu_driver": "dra.aligned.dev"}
    objects_site = kueue_site(team("llm", "80Gi"))
    mig = {"h1": DYNAMIC}
    topologies = {"h1": dgx}
    objects = burst.render(
        settings, "s", "1.36", mig=mig, topologies=topologies, device_options={"split_gpu_driver": "gpu.aligned.dev"}
    )
    site = schedulers_mig.site(mig, topologies)
    result = teams.render(
        objects_site, "s", objects["objects"], "1.36", class_keys=claims.settings(settings)["classes"], mig=site
    )
    counter = result["kueue"]["configuration"]["resources"]["deviceClassMappings"][0]["sources"][0]["counter"]
    assert counter["driver"] == "gpu.aligned.dev" and counter["deviceSelector"]["cel"]["expression"].startswith(
        'device.driver == "gpu.aligned.dev"'
    )


# -- quotas in memory -----------------------------------------------------------------------------------------


def test_cluster_queues_hold_gpu_memory_per_team_times_its_namespaces(dgx):
    raw = kueue_site(
        team(
            "llm", "80Gi", namespaces=["llm-a", "llm-b"], borrowing_limit={"mig": "40Gi"}, lending_limit={"mig": "20Gi"}
        ),
        team("spare", "40Gi", tier="opportunistic"),
    )
    result = render(raw, dgx)
    queues = {o["metadata"]["name"]: o for o in result["objects"] if o["kind"] == "ClusterQueue"}
    (llm,) = queues["llm"]["spec"]["resourceGroups"][0]["flavors"]
    assert queues["llm"]["spec"]["resourceGroups"][0]["coveredResources"] == ["aligned.dev/mig-memory"]
    assert llm["resources"] == [
        {"name": "aligned.dev/mig-memory", "nominalQuota": "160Gi", "borrowingLimit": "40Gi", "lendingLimit": "20Gi"}
    ]
    (spare,) = queues["spare"]["spec"]["resourceGroups"][0]["flavors"]
    assert spare["resources"] == [{"name": "aligned.dev/mig-memory", "nominalQuota": "0", "borrowingLimit": "40Gi"}]
    rows = {r["name"]: r for r in result["kueue"]["teams"]}
    assert rows["llm"]["nominal"] == {"mig.aligned.dev": "160Gi"} and rows["llm"]["lendable"] == {
        "mig.aligned.dev": "20Gi"
    }
    assert teams.validate_all(result["objects"], "1.36") == []
    # the per-profile templates the team copies ask for classes of the one mapping: admitted, charged its memory
    assert not any(o["kind"] == "ResourceQuota" for o in result["objects"])


def test_engine_both_keeps_mig_memory_out_of_the_namespaces_resource_quotas(dgx):
    raw = {"engine": "both", "teams": [dict(team("llm", "80Gi"), quotas={"mig": "80Gi", "gpu": 1})]}
    result = render(raw, dgx)
    (quota,) = [o for o in result["objects"] if o["kind"] == "ResourceQuota"]
    assert quota["spec"]["hard"] == {"aligned-gpu.deviceclass.resource.k8s.io/devices": "1"}
    assert any("pods that bypass Kueue are not capped on MIG devices" in n for n in result["kueue"]["notes"])
    assert teams.validate_all(result["objects"], "1.36") == []


def test_a_device_count_on_the_mig_class_stays_a_device_mapping_and_says_what_it_charges(dgx):
    result = render(kueue_site(team("llm", 4, templates=[])), dgx)
    (mapping,) = result["kueue"]["configuration"]["resources"]["deviceClassMappings"]
    assert mapping == {"name": "aligned.dev/mig-aligned-dev", "deviceClassNames": ["mig.aligned.dev"]}
    assert GATE not in result["kueue"]["configuration"]["featureGates"]
    assert any("charges a 1g MIG device as much as a 7g one" in n for n in result["kueue"]["notes"])
    assert kueue_checks.validate_configuration(result["kueue"]["configuration"]) == []


# -- quotas against the site's MIG memory ---------------------------------------------------------------------


def test_nominal_memory_is_checked_against_the_site_mig_memory_marked_a_bound(dgx):
    result = render(kueue_site(team("a", "320Gi"), team("b", "320Gi")), dgx)
    (row,) = result["kueue"]["capacity"]
    # eight H100 80GB, each a memory counter of 80Gi (the documented 1g.10gb x 8 slices): 640Gi
    assert (row["capacity"], row["nominal"], row["status"]) == ("640Gi", "640Gi", "ok")
    assert row["bound"] is True and row["sources"] == {"documented": 8}
    assert "upper bound" in row["capacity_is"] and "NVIDIA documents (no NVML reading)" in row["capacity_is"]
    assert result["problems"] == []
    assert result["mig"]["capacity"]["memory"] == "640Gi" and result["mig"]["capacity"]["gpus"] == 8


def test_guaranteed_memory_above_the_site_mig_memory_is_refused_naming_both(dgx):
    result = render(kueue_site(team("a", "320Gi"), team("b", "321Gi")), dgx)
    (problem,) = result["problems"]
    assert problem.startswith(
        "DeviceClass mig.aligned.dev: the ClusterQueues' nominal GPU-memory quotas in cohort add up"
    )
    assert "641Gi" in problem and "640Gi" in problem and "upper bound" in problem
    assert "aligned_dra_teams.oversubscription" in problem
    assert result["kueue"]["capacity"][0]["status"] == "over_limit"
    # opportunistic teams hold no nominal quota: not counted against the hardware
    assert render(kueue_site(team("a", "640Gi"), team("b", "640Gi", tier="opportunistic")), dgx)["problems"] == []
    # a factor allows it, reported
    allowed = render(dict(kueue_site(team("a", "320Gi"), team("b", "400Gi")), oversubscription={"mig": 1.25}), dgx)
    assert allowed["problems"] == [] and allowed["kueue"]["capacity"][0]["status"] == "oversubscribed"


def test_the_stage_fails_before_writing_anything_when_memory_exceeds_the_site(dgx, tmp_path):
    params = {k: v.get("default") for k, v in teams.MODULE_SPEC["argument_spec"].items()}
    dest = tmp_path / "teams.json"
    params.update(
        site="s",
        kubernetes_version="1.36",
        mig={"h1": DYNAMIC},
        topologies={"h1": dgx},
        settings=kueue_site(team("a", "700Gi")),
        dest=str(dest),
    )
    with pytest.raises(
        teams.StageError, match=r"quotas exceed the site's capacity: DeviceClass mig\.aligned\.dev: .*700Gi.*640Gi"
    ):
        teams.run(params, False, False)
    assert not dest.exists()


def test_an_unprobed_mig_host_leaves_the_capacity_unknown_never_zero(dgx):
    mig = {"h1": DYNAMIC, "h2": DYNAMIC}
    objects = burst.render({}, "s", "1.36", mig=mig, topologies={"h1": dgx})["objects"]
    site = schedulers_mig.site(mig, {"h1": dgx})
    result = teams.render(
        kueue_site(team("a", "9000Gi")), "s", objects, "1.36", class_keys=claims.settings({})["classes"], mig=site
    )
    (row,) = result["kueue"]["capacity"]
    assert (row["status"], row["capacity"]) == ("unknown", None) and "h2" in row["reason"]
    assert result["problems"] == [] and result["mig"]["capacity"]["memory_bytes"] is None


# -- the gate per Kueue version -------------------------------------------------------------------------------


def test_the_counter_gate_is_named_where_the_site_kueue_has_it_off(dgx):
    old = render(kueue_site(team("a", "80Gi"), version="v0.18.6"), dgx)
    (note,) = [n for n in old["kueue"]["notes"] if GATE in n]
    assert note.startswith(f"MIG: Kueue 0.18: {GATE} is alpha and off by default") and "aligned.dev/mig-memory" in note
    assert note in old["warnings"]
    assert old["kueue"]["configuration"]["featureGates"][GATE] is True
    new = render(kueue_site(team("a", "80Gi"), version="0.19"), dgx)
    assert not [n for n in new["kueue"]["notes"] + new["warnings"] if GATE in n]
    assert new["kueue"]["configuration"]["featureGates"][GATE] is True  # on by default in 0.19, and said
    # device counts need no counter: nothing named on 0.18 either
    assert not [
        n for n in render(kueue_site(team("a", 2, templates=[]), version="0.18"), dgx)["kueue"]["notes"] if GATE in n
    ]
    assert kueue_mig.gate_notes({}, "0.18") == []


def test_a_configuration_with_the_counter_gate_off_is_invalid():
    cfg = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "featureGates": {GATE: False},
        "resources": {
            "deviceClassMappings": [
                {
                    "name": "aligned.dev/mig-memory",
                    "deviceClassNames": ["mig.aligned.dev"],
                    "sources": [
                        {
                            "counter": {
                                "name": "memory",
                                "driver": "dra.aligned.dev",
                                "deviceSelector": {"cel": {"expression": "true"}},
                            }
                        }
                    ],
                }
            ]
        },
    }
    assert kueue_checks.validate_configuration(cfg) == [
        f"resources.deviceClassMappings[0].sources[0].counter: counter sources require {GATE} to be enabled"
    ]
    bad = copy.deepcopy(cfg)
    bad["featureGates"] = {}
    bad["resources"]["deviceClassMappings"][0]["sources"][0]["counter"]["name"] = "gpu/memory"
    assert kueue_checks.validate_configuration(bad) == [
        "resources.deviceClassMappings[0].sources[0].counter.name: 'gpu/memory' is not a DNS label"
    ]


@pytest.mark.parametrize("version", ["0.17", "1", 0.19, "latest"])
def test_a_kueue_version_outside_the_supported_minors_is_refused(dgx, version):
    with pytest.raises(KueueError, match=r"aligned_dra_teams\.kueue\.version .*one of 0\.18, 0\.19"):
        render(kueue_site(team("a", "80Gi"), version=version), dgx)


# -- refused ---------------------------------------------------------------------------------------------------


def test_static_hosts_publish_no_counters_so_memory_quotas_are_refused(dgx):
    with pytest.raises(
        KueueError, match=r"teams\[a\]\.quotas\.mig\.aligned\.dev: h1 run MIG in mode static.*without consumesCounters"
    ):
        render(kueue_site(team("a", "80Gi", templates=[])), dgx, mig={"h1": STATIC})
    # device counts count the instances that exist
    counted = render(kueue_site(team("a", 2, templates=[])), dgx, mig={"h1": STATIC})
    assert counted["kueue"]["mappings"]["mig.aligned.dev"]["unit"] == "devices"


def test_memory_on_a_per_profile_class_is_refused_naming_the_pool(dgx):
    raw = kueue_site({"name": "a", "quotas": {"mig": "80Gi", "mig-3g-40gb.aligned.dev": "40Gi"}})
    with pytest.raises(
        KueueError,
        match=r"mig-3g-40gb\.aligned\.dev: mig-3g-40gb\.aligned\.dev selects the MIG profile 3g\.40gb.*\(mig\.aligned\.dev\)",
    ):
        render(raw, dgx)
    # a device count on it beside memory on the pool: the class would be in two mappings of one counter
    raw = kueue_site({"name": "a", "quotas": {"mig": "80Gi", "mig-3g-40gb.aligned.dev": 2}})
    with pytest.raises(KueueError, match=r"mig-3g-40gb\.aligned\.dev is counted in GPU memory with every MIG class"):
        render(raw, dgx)


def test_memory_quotas_need_partitionable_devices_on_the_minor(dgx):
    with pytest.raises(
        KueueError,
        match=r"partitionable devices, and on h1: mode dynamic publishes partitionable devices \(DRAPartitionableDevices\)",
    ):
        render(kueue_site(team("a", "80Gi", templates=[])), dgx, minor="1.35")
    assert (
        render(kueue_site(team("a", "80Gi", templates=[])), dgx, minor="1.35", gates={"DRAPartitionableDevices": True})[
            "problems"
        ]
        == []
    )


def test_memory_on_the_mig_class_needs_a_kueue_engine(dgx):
    with pytest.raises(
        Exception,
        match=r"quotas\.mig: '80Gi' is GPU memory on the MIG class mig\.aligned\.dev, which only Kueue counts",
    ):
        render({"teams": [team("a", "80Gi", templates=[])]}, dgx)


def test_capacity_amounts_need_kueue_019(dgx):
    """Kueue 0.18 has no consumable-capacity gate: a fragment naming it would stop Kueue from starting."""
    settings = {"engine": "kueue", "kueue": {"version": "0.18"}, "teams": [{"name": "a", "quotas": {"gpu": "80Gi"}}]}
    objects = claims.render({}, "s", "1.36")["objects"]
    with pytest.raises(KueueError, match=r"KueueDRAIntegrationConsumableCapacity, which Kueue 0\.18 .*does not have"):
        teams.render(settings, "s", objects, "1.36", class_keys=claims.settings({})["classes"])


def test_a_mig_class_with_an_extended_resource_name_is_refused_for_memory(dgx):
    claims_settings = {"extended_resources": {"mig": "example.com/mig"}}
    with pytest.raises(
        KueueError, match=r"DeviceClass mig\.aligned\.dev has the extended resource name 'example\.com/mig'"
    ):
        render({"engine": "both", "teams": [team("a", "80Gi", templates=[])]}, dgx, claims_settings=claims_settings)


def test_a_site_with_more_mig_classes_than_a_mapping_lists_maps_those_the_teams_use(dgx):
    """An H100 and an A100 host: 14 MIG profiles, a class each. One mapping lists at most 8 classes: the class
    of every MIG device and those the teams' templates ask for; more than that is refused, naming them."""
    a100 = copy.deepcopy(dgx)
    for device in a100["devices"]:
        if device.get("kind") == "gpu":
            device["device_id"] = "0x20b0"  # A100 40GB: other profiles, so more per-profile classes
    mig = {"h1": DYNAMIC, "h2": DYNAMIC}
    topologies = {"h1": dgx, "h2": a100}
    objects = burst.render({}, "s", "1.36", mig=mig, topologies=topologies)["objects"]
    site = schedulers_mig.site(mig, topologies)
    assert len(schedulers_mig.mig_classes(objects)) > 8
    keys = claims.settings({})["classes"]
    used = ["mig-1g-5gb", "mig-3g-40gb", "mig-7g-80gb"]
    result = teams.render(
        kueue_site(team("a", "80Gi", templates=used)), "s", objects, "1.36", class_keys=keys, mig=site
    )
    (mapping,) = result["kueue"]["configuration"]["resources"]["deviceClassMappings"]
    assert mapping["deviceClassNames"] == [
        "mig.aligned.dev",
        "mig-1g-5gb.aligned.dev",
        "mig-3g-40gb.aligned.dev",
        "mig-7g-80gb.aligned.dev",
    ]
    assert kueue_checks.validate_configuration(result["kueue"]["configuration"]) == []
    templates = [o["metadata"]["name"] for o in objects if o["kind"] == "ResourceClaimTemplate"]
    every = [n for n in templates if n.startswith("mig-") and not n.endswith("-nic") and "-or-" not in n]
    with pytest.raises(
        KueueError,
        match=r"the teams' templates ask for 1[0-9] MIG DeviceClasses .* at most 8; give the teams templates of fewer profiles",
    ):
        teams.render(kueue_site(team("a", "80Gi", templates=every)), "s", objects, "1.36", class_keys=keys, mig=site)


def test_without_the_sites_mig_facts_the_mig_classes_still_count_memory(dgx):
    """A caller that renders the catalogue with MIG but knows nothing of the hosts (the validation's render):
    the mapping is the same, the capacity unknown."""
    mig = {"h1": DYNAMIC}
    objects = burst.render({}, "s", "1.36", mig=mig, topologies={"h1": dgx})["objects"]
    keys = claims.settings({})["classes"]
    bare = teams.render(kueue_site(team("a", "80Gi")), "s", objects, "1.36", class_keys=keys)
    full = render(kueue_site(team("a", "80Gi")), dgx)
    assert bare["kueue"]["configuration"] == full["kueue"]["configuration"]
    assert bare["kueue"]["capacity"][0]["status"] == "unknown" and "mig" not in bare


# -- Kueue's minimum and Kueue's charge ------------------------------------------------------------------


def test_memory_quotas_on_kubernetes_134_are_refused_naming_kueues_135_minimum(dgx):
    with pytest.raises(KueueError, match=r"only on Kubernetes 1\.35 or later .*the site runs 1\.34"):
        render(kueue_site(team("a", "80Gi", templates=[])), dgx, minor="1.34", gates={"DRAPartitionableDevices": True})
    # device counts on the MIG classes stay possible on 1.34
    counted = render(kueue_site(team("a", 7, templates=[])), dgx, minor="1.34", gates={"DRAPartitionableDevices": True})
    assert counted["problems"] == []


def _probed(dgx: dict) -> dict:
    """The DGX with every GPU read by NVML (the fake's H100 80GB: the GPU driver's own profile sizes)."""
    from ansible_collections.aligned.dra.plugins.module_utils.node.mig import nvml_state
    from ansible_collections.aligned.dra.tests.support.fakes.nvml import FakeNvml

    probed = copy.deepcopy(dgx)
    nvml = FakeNvml()
    gpus = [d for d in probed["devices"] if d.get("kind") == "gpu"]
    for device in gpus:
        nvml.add_gpu(device["pci_address"], model="H100-SXM5-80GB")
        nvml.enable_mig(device["pci_address"])
    nvml.nvmlInit()
    for device in gpus:
        state = nvml_state.read_gpu(nvml, device["pci_address"])
        device["mig"] = {"readable": True, **{k: v for k, v in state.items() if k not in ("pci_address", "error")}}
    return probed


def test_the_charge_is_the_memory_the_driver_publishes_nvmls_where_probed_documented_else(dgx):
    probed = _probed(dgx)
    first = next(d for d in probed["devices"] if d.get("kind") == "gpu")
    sizes = {p["name"]: p["memory_bytes"] for p in mig_model.gpu_state(first)["profiles"]}
    result = render(kueue_site(team("a", "160Gi")), probed)
    (row,) = result["kueue"]["capacity"]
    charge = row["charges"]["1g.10gb"]
    assert charge["charge_bytes"] == sizes["1g.10gb"] and charge["source"] == "nvml"
    assert charge["charge_bytes"] < 10 * GIB and charge["charge"] == dra_mig_quantity(sizes["1g.10gb"])
    # the capacity is what Kueue charges at once: per GPU the largest sum of partitions that exist together
    (gpu_set,) = result["mig"]["sets"]
    assert row["capacity"] == dra_mig_quantity(8 * gpu_set["per_gpu"]["charge_bytes"])
    assert gpu_set["per_gpu"]["charge_bytes"] >= 7 * sizes["1g.10gb"]
    assert "NVML's sizes" in row["capacity_is"]
    documented = render(kueue_site(team("a", "160Gi")), dgx)["kueue"]["capacity"][0]
    assert documented["charges"]["1g.10gb"] == {"charge": "10Gi", "charge_bytes": 10 * GIB, "source": "documented"}


def dra_mig_quantity(value: int) -> str:
    from ansible_collections.aligned.dra.plugins.module_utils.dra import mig as dra_mig

    return dra_mig.quantity(value)
