# SPDX-License-Identifier: Apache-2.0
"""MIG in the claims catalogue (controller/claims/mig.py): which classes and templates a site with MIG gets,
what their selectors select among the devices the driver would publish, NIC alignment, prioritized lists per
minor, DRAPartitionableDevices where it is off, refused settings, and nothing at all without MIG."""

from __future__ import annotations

import copy

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import burst
from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import mig as claims_mig
from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import render as claims
from ansible_collections.aligned.dra.plugins.module_utils.controller.mig import model as mig_model
from ansible_collections.aligned.dra.plugins.module_utils.dra import cel as dra_cel
from ansible_collections.aligned.dra.plugins.module_utils.dra import gates as dra_gates
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra
from ansible_collections.aligned.dra.tests.support.sites.report_sites import topology_of

DYNAMIC = {"mode": "dynamic"}
HALF = {
    "mode": "static",
    "layout": "half",
    "mig_configs": {"half": [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}]},
}
H100_PROFILES = ["1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"]
PROFILE = 'device.attributes["dra.aligned.dev"].profile'


@pytest.fixture(scope="module")
def dgx():
    """Eight H100 SXM5 (0x2330), a NIC on each GPU's PCIe root; a captured tree: documented MIG geometry."""
    return topology_of("dgx-h100")


def a100(topology: dict) -> dict:
    """The same machine with A100 40GB GPUs (0x20b0): other profiles."""
    other = copy.deepcopy(topology)
    for device in other["devices"]:
        if device.get("kind") == "gpu":
            device["device_id"] = "0x20b0"
    return other


def render(settings=None, mig=None, topologies=None, version="1.36", **extra) -> dict:
    return claims.render(settings or {}, "s", version, mig=mig, topologies=topologies, **extra)


def by_name(rendered: dict, name: str) -> dict:
    return next(o for o in rendered["objects"] if o["metadata"]["name"] == name)


def names(rendered: dict, kind: str) -> list[str]:
    return [o["metadata"]["name"] for o in rendered["objects"] if o["kind"] == kind]


def mig_names(rendered: dict, kind: str) -> list[str]:
    return [n for n in names(rendered, kind) if n.startswith("mig")]


def expressions(obj: dict) -> list[str]:
    return [s["cel"]["expression"] for s in obj["spec"]["selectors"]]


def published(topology: dict, settings: dict, options: dict | None = None) -> list[dict]:
    """The node's devices as the driver publishes them under ``settings``, with their driver's name."""
    devices, _counters = mig_model.publish(topology, dra.devices_from_topology(topology, options, None), settings)
    for device in devices:
        kind = device["attributes"]["dra.aligned.dev/kind"]["string"]
        device["_driver"] = dra.driver_of_kind("gpu" if kind == "mig" else kind, options)
    return devices


def selected(device_class: dict, devices: list[dict]) -> list[str]:
    """The devices every selector of the class matches (as the scheduler evaluates them)."""
    chosen = []
    for device in devices:
        view = dra_cel.cel_device(device, device["_driver"], ["dra.aligned.dev"])
        if all(dra_cel.Selector(e).evaluate(view) == (True, None) for e in expressions(device_class)):
            chosen.append(device["name"])
    return chosen


# -- no MIG, nothing new ----------------------------------------------------------------------------------


@pytest.mark.parametrize("mig", [None, {}, {"h1": {"mode": "off"}}, {"h1": None}, {"h1": {}}])
def test_a_site_without_mig_renders_exactly_what_it_did(mig, dgx):
    plain = claims.render({}, "s", "1.36")
    rendered = render(mig=mig, topologies={"h1": dgx})
    assert rendered["objects"] == plain["objects"] and rendered["skipped"] == plain["skipped"]
    assert rendered["warnings"] == [] and not mig_names(rendered, "DeviceClass")


# -- classes ----------------------------------------------------------------------------------------------


def test_dynamic_h100s_get_a_class_for_every_mig_device_and_one_per_profile(dgx):
    rendered = render(mig={"h1": DYNAMIC}, topologies={"h1": dgx})
    tokens = [p.replace(".", "-").replace("+", "-") for p in H100_PROFILES]
    assert mig_names(rendered, "DeviceClass") == ["mig.aligned.dev"] + [f"mig-{t}.aligned.dev" for t in tokens]
    assert expressions(by_name(rendered, "mig.aligned.dev")) == [
        'device.driver == "dra.aligned.dev" && device.attributes["dra.aligned.dev"].kind == "mig"'
    ]
    assert expressions(by_name(rendered, "mig-3g-40gb.aligned.dev"))[0].endswith(f'&& {PROFILE} == "3g.40gb"')
    assert rendered["skipped"] == [] and rendered["warnings"] == []


def test_the_classes_select_the_mig_devices_the_driver_publishes_and_nothing_else(dgx):
    settings = {"mode": "dynamic", "gpus": {"indices": [0]}}
    rendered = render(mig={"h1": settings}, topologies={"h1": dgx})
    devices = published(dgx, settings)
    migs = [d["name"] for d in devices if d["attributes"]["dra.aligned.dev/kind"]["string"] == "mig"]
    assert len(migs) == 7 + 7 + 4 + 3 + 2 + 1 + 1  # every placement of every profile of one H100
    assert selected(by_name(rendered, "mig.aligned.dev"), devices) == migs
    three = selected(by_name(rendered, "mig-3g-40gb.aligned.dev"), devices)
    assert three == [n for n in migs if "-mig-3g-40gb-" in n] and len(three) == 2
    # the GPU whole (kind gpu) is the GPU class's, never a MIG class's
    assert not set(selected(by_name(rendered, "aligned-gpu"), devices)) & set(migs)


def test_a_driver_split_by_kind_publishes_the_mig_devices_under_its_gpu_name(dgx):
    split = {"split_gpu_driver": "gpu.aligned.dev"}
    rendered = render(mig={"h1": DYNAMIC}, topologies={"h1": dgx}, device_options=split)
    for name in ("mig.aligned.dev", "mig-1g-10gb.aligned.dev"):
        assert expressions(by_name(rendered, name))[0].startswith('device.driver == "gpu.aligned.dev" && ')
    devices = published(dgx, {"mode": "dynamic", "gpus": {"indices": [0]}}, split)
    assert len(selected(by_name(rendered, "mig.aligned.dev"), devices)) == 25


def test_class_names_and_selectors_follow_the_settings(dgx):
    settings = {
        "classes": {"mig": "partitions.example.com"},
        "selectors": {"mig": ['device.attributes["dra.aligned.dev"].model.startsWith("H100")']},
        "templates": {"mig": {"class_name": "mig-{profile}.example.com", "profiles": ["1g.10gb", "7g.80gb"]}},
    }
    rendered = render(settings, mig={"h1": DYNAMIC}, topologies={"h1": dgx})
    assert by_name(rendered, "partitions.example.com")["kind"] == "DeviceClass"
    classes = [n for n in names(rendered, "DeviceClass") if n.startswith("mig-")]
    # a class per profile the GPUs offer (quotas count them apart), whichever profiles get a template
    assert len(classes) == 7 and classes[0] == "mig-1g-10gb.example.com" and classes[-1] == "mig-7g-80gb.example.com"
    templates = ["mig-1g-10gb", "mig-7g-80gb", "mig-1g-10gb-nic", "mig-7g-80gb-nic"]
    assert mig_names(rendered, "ResourceClaimTemplate") == templates
    assert expressions(by_name(rendered, "mig-7g-80gb.example.com"))[1].endswith('.model.startsWith("H100")')


def test_a_site_offering_one_profile_gets_no_class_per_profile_and_asks_for_the_profile(dgx):
    rendered = render(mig={"h1": HALF}, topologies={"h1": dgx})
    assert mig_names(rendered, "DeviceClass") == ["mig.aligned.dev"]
    assert mig_names(rendered, "ResourceClaimTemplate") == ["mig-3g-40gb", "mig-3g-40gb-nic"]
    (request,) = by_name(rendered, "mig-3g-40gb")["spec"]["spec"]["devices"]["requests"]
    assert request["exactly"]["deviceClassName"] == "mig.aligned.dev"
    assert request["exactly"]["selectors"] == [{"cel": {"expression": f'{PROFILE} == "3g.40gb"'}}]


def test_an_extended_resource_name_for_the_mig_class(dgx):
    settings = {"extended_resources": {"mig": "aligned.dev/mig"}}
    rendered = render(settings, mig={"h1": HALF}, topologies={"h1": dgx})
    assert by_name(rendered, "mig.aligned.dev")["spec"]["extendedResourceName"] == "aligned.dev/mig"
    with pytest.raises(claims.ClaimsError, match="extended_resources.mig: .*DRAExtendedResource"):
        render(settings, mig={"h1": HALF}, topologies={"h1": dgx}, version="1.35")


# -- templates --------------------------------------------------------------------------------------------


def test_static_hosts_offer_their_layouts_profiles_and_dynamic_ones_every_profile(dgx):
    h100 = render(mig={"h1": HALF, "h2": DYNAMIC}, topologies={"h1": dgx, "h2": dgx})
    assert claims_mig.site_profiles({"h1": dgx}, {"h1": HALF}) == {"profiles": ["3g.40gb"], "gpus": 8, "unknown": []}
    singles = [n for n in mig_names(h100, "ResourceClaimTemplate") if not n.endswith("-nic")]
    assert singles == [f"mig-{p.replace('.', '-').replace('+', '-')}" for p in H100_PROFILES]
    mixed = claims_mig.site_profiles({"h1": a100(dgx), "h2": dgx}, {"h1": DYNAMIC, "h2": HALF})
    # A100 40GB's profiles and the H100s' static 3g.40gb, smallest first
    assert mixed["profiles"] == [
        "1g.5gb",
        "1g.5gb+me",
        "1g.10gb",
        "2g.10gb",
        "3g.20gb",
        "3g.40gb",
        "4g.20gb",
        "7g.40gb",
    ]


def test_a_mig_template_asks_for_one_device_of_its_profile(dgx):
    rendered = render(mig={"h1": DYNAMIC}, topologies={"h1": dgx})
    template = by_name(rendered, "mig-1g-10gb-me")
    assert template["spec"]["metadata"]["labels"] == {"aligned.dev/template": "mig-1g-10gb-me"}
    assert template["spec"]["spec"]["devices"] == {
        "requests": [
            {
                "name": "mig",
                "exactly": {
                    "deviceClassName": "mig-1g-10gb-me.aligned.dev",
                    "allocationMode": "ExactCount",
                    "count": 1,
                },
            }
        ]
    }


def test_the_nic_template_aligns_the_nic_on_the_parent_gpus_pcie_root(dgx):
    rendered = render(mig={"h1": DYNAMIC}, topologies={"h1": dgx})
    devices = by_name(rendered, "mig-2g-20gb-nic")["spec"]["spec"]["devices"]
    assert [(r["name"], r["exactly"]["deviceClassName"]) for r in devices["requests"]] == [
        ("mig", "mig-2g-20gb.aligned.dev"),
        ("nic", "aligned-nic"),
    ]
    assert devices["constraints"] == [{"requests": ["mig", "nic"], "matchAttribute": "resource.kubernetes.io/pcieRoot"}]
    # every MIG device carries its parent's root, and on this machine a NIC shares each GPU's root
    node = published(dgx, {"mode": "dynamic", "gpus": {"indices": [0]}})
    roots = {d["name"]: d["attributes"].get(dra.ATTR_PCIE_ROOT) for d in node}
    two = selected(by_name(rendered, "mig-2g-20gb.aligned.dev"), node)
    nics = selected(by_name(rendered, "aligned-nic"), node)
    assert two and all(any(roots[m] == roots[n] for n in nics) for m in two)


def test_nic_off_or_dranet_nics(dgx):
    rendered = render({"templates": {"mig": {"nic": False}}}, mig={"h1": HALF}, topologies={"h1": dgx})
    assert mig_names(rendered, "ResourceClaimTemplate") == ["mig-3g-40gb"]
    dranet = {"drivers": ["dra.aligned.dev", "dra.net"], "nic_driver": "dra.net"}
    rendered = render(dranet, mig={"h1": HALF}, topologies={"h1": dgx})
    nic = by_name(rendered, "mig-3g-40gb-nic")["spec"]["spec"]["devices"]["requests"][1]
    assert nic["exactly"]["deviceClassName"] == "dranet-nic"


def test_a_prioritized_list_takes_the_profiles_in_order(dgx):
    settings = {"templates": {"mig": {"prioritized": [["3g.40gb", "4g.40gb"], ["1g.10gb", "1g.20gb", "2g.20gb"]]}}}
    rendered = render(settings, mig={"h1": DYNAMIC}, topologies={"h1": dgx})
    (request,) = by_name(rendered, "mig-3g-40gb-or-4g-40gb")["spec"]["spec"]["devices"]["requests"]
    assert request == {
        "name": "mig",
        "firstAvailable": [
            {"name": "3g-40gb", "deviceClassName": "mig-3g-40gb.aligned.dev"},
            {"name": "4g-40gb", "deviceClassName": "mig-4g-40gb.aligned.dev"},
        ],
    }
    assert "mig-1g-10gb-or-1g-20gb-or-2g-20gb" in names(rendered, "ResourceClaimTemplate")


def test_a_prioritized_list_beside_one_profiles_templates_asks_for_each_profiles_class(dgx):
    settings = {"templates": {"mig": {"profiles": ["3g.40gb"], "prioritized": [["3g.40gb", "7g.80gb"]]}}}
    rendered = render(settings, mig={"h1": DYNAMIC}, topologies={"h1": dgx})
    assert mig_names(rendered, "ResourceClaimTemplate") == ["mig-3g-40gb", "mig-3g-40gb-nic", "mig-3g-40gb-or-7g-80gb"]
    (request,) = by_name(rendered, "mig-3g-40gb-or-7g-80gb")["spec"]["spec"]["devices"]["requests"]
    classes = [sub["deviceClassName"] for sub in request["firstAvailable"]]
    assert classes == ["mig-3g-40gb.aligned.dev", "mig-7g-80gb.aligned.dev"]


def test_profiles_no_gpu_offers_are_left_out_with_the_reason(dgx):
    settings = {"templates": {"mig": {"profiles": ["1g.5gb", "3g.40gb"], "prioritized": [["3g.20gb", "3g.40gb"]]}}}
    rendered = render(settings, mig={"h1": DYNAMIC}, topologies={"h1": dgx})
    left = {s["name"]: s["reason"] for s in rendered["skipped"]}
    assert left["mig-1g-5gb"].startswith("aligned_dra_claims.templates.mig.profiles names 1g.5gb, which no MIG GPU")
    assert "offered: 1g.10gb, 1g.10gb+me" in left["mig-1g-5gb"]
    assert left["mig-3g-20gb-or-3g-40gb"].startswith("aligned_dra_claims.templates.mig.prioritized names 3g.20gb")
    assert mig_names(rendered, "ResourceClaimTemplate") == ["mig-3g-40gb", "mig-3g-40gb-nic"]
    with pytest.raises(claims.ClaimsError, match="'mig-1g-5gb' is not rendered for Kubernetes 1.36: .*1g.5gb"):
        render(dict(settings, required=["mig-1g-5gb"]), mig={"h1": DYNAMIC}, topologies={"h1": dgx})


def test_a_mig_host_without_a_topology_is_said_and_the_others_render(dgx):
    rendered = render(mig={"h1": HALF, "h2": DYNAMIC}, topologies={"h1": dgx})
    assert mig_names(rendered, "ResourceClaimTemplate") == ["mig-3g-40gb", "mig-3g-40gb-nic"]
    (note,) = rendered["skipped"]
    assert note["name"] == "mig-*" and note["reason"].startswith("h2: no probed topology")


def test_mig_hosts_whose_gpus_mig_does_not_take_are_said(dgx):
    v100 = copy.deepcopy(dgx)  # V100s (0x1db4): no MIG
    for device in v100["devices"]:
        if device.get("kind") == "gpu":
            device["device_id"] = "0x1db4"
    rendered = render(mig={"vm1": DYNAMIC}, topologies={"vm1": v100})
    assert mig_names(rendered, "DeviceClass") == ["mig.aligned.dev"] and not mig_names(
        rendered, "ResourceClaimTemplate"
    )
    (note,) = rendered["skipped"]
    assert note["name"] == "mig-*" and note["reason"].startswith("vm1: aligned_dra_mig takes none of their GPUs")


def test_disabled_templates_keep_the_classes_and_other_drivers_render_nothing(dgx):
    off = render({"templates": {"mig": {"enabled": False}}}, mig={"h1": HALF}, topologies={"h1": dgx})
    assert mig_names(off, "DeviceClass") == ["mig.aligned.dev"] and not mig_names(off, "ResourceClaimTemplate")
    off = render({"templates": {"mig": {"enabled": False}}}, mig={"h1": DYNAMIC}, topologies={"h1": dgx})
    assert len(mig_names(off, "DeviceClass")) == 8 and not mig_names(off, "ResourceClaimTemplate")
    nvidia = {"drivers": ["gpu.nvidia.com", "dra.net"], "gpu_driver": "gpu.nvidia.com", "nic_driver": "dra.net"}
    rendered = render(nvidia, mig={"h1": HALF}, topologies={"h1": dgx})
    assert not mig_names(rendered, "DeviceClass") and not mig_names(rendered, "ResourceClaimTemplate")
    assert "aligned_dra_claims.drivers does not name dra.aligned.dev" in rendered["skipped"][-1]["reason"]


def test_tolerations_reach_every_mig_request_and_subrequest(dgx):
    tolerate = [{"key": "dra.aligned.dev/unhealthy", "operator": "Exists", "effect": "NoSchedule"}]
    settings = {"templates": {"mig": {"prioritized": [["3g.40gb", "4g.40gb"]]}}}
    rendered = render(settings, mig={"h1": DYNAMIC}, topologies={"h1": dgx}, tolerations=tolerate)
    (request,) = by_name(rendered, "mig-3g-40gb-or-4g-40gb")["spec"]["spec"]["devices"]["requests"]
    assert all(sub["tolerations"] == tolerate for sub in request["firstAvailable"])
    assert by_name(rendered, "mig-1g-10gb")["spec"]["spec"]["devices"]["requests"][0]["exactly"]["tolerations"]


# -- per minor --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("minor", dra_gates.SUPPORTED_MINORS)
def test_every_mig_object_is_valid_on_every_minor(minor, dgx):
    settings = {"templates": {"mig": {"prioritized": [["3g.40gb", "4g.40gb"]]}}}
    gates = {"DRAPartitionableDevices": True}
    rendered = render(settings, mig={"h1": DYNAMIC, "h2": HALF}, topologies={"h1": dgx, "h2": dgx}, version=minor)
    objects = [o for o in rendered["objects"] if o["metadata"]["name"].startswith("mig")]
    assert len(objects) == 8 + 7 + 7 + 1
    assert claims.validate_all(objects, minor, gates) == []


def test_without_prioritized_lists_the_list_templates_are_left_out_naming_the_gate(dgx):
    settings = {"templates": {"mig": {"prioritized": [["3g.40gb", "4g.40gb"]]}}}
    gates = {"DRAPrioritizedList": False}
    rendered = render(settings, mig={"h1": DYNAMIC}, topologies={"h1": dgx}, feature_gates=gates)
    assert "mig-3g-40gb-or-4g-40gb" not in names(rendered, "ResourceClaimTemplate")
    (left,) = [s for s in rendered["skipped"] if s["name"] == "mig-3g-40gb-or-4g-40gb"]
    assert "DRAPrioritizedList" in left["reason"]
    assert "mig-3g-40gb" in names(rendered, "ResourceClaimTemplate")


@pytest.mark.parametrize("minor", ["1.34", "1.35"])
def test_dynamic_mig_where_partitionable_devices_are_off_is_said_in_the_deploy_words(minor, dgx):
    rendered = render(mig={"a1": DYNAMIC, "a2": DYNAMIC, "s1": HALF}, topologies={"a1": dgx}, version=minor)
    (warning,) = rendered["warnings"]
    assert warning.startswith("a1, a2: aligned_dra_mig: mode dynamic publishes partitionable devices ")
    assert f"(DRAPartitionableDevices), off by default on Kubernetes {minor}" in warning
    # the site says the gate is on: nothing to say
    said = {"a1": dict(DYNAMIC, partitionable_devices_gate=True)}
    assert render(mig=said, topologies={"a1": dgx}, version=minor)["warnings"] == []
    gates = {"DRAPartitionableDevices": True}
    assert render(mig={"a1": DYNAMIC}, topologies={"a1": dgx}, version=minor, feature_gates=gates)["warnings"] == []


def test_static_mig_needs_no_gate_and_newer_minors_say_nothing(dgx):
    assert render(mig={"s1": HALF}, topologies={"s1": dgx}, version="1.34")["warnings"] == []
    assert render(mig={"a1": DYNAMIC}, topologies={"a1": dgx}, version="1.36")["warnings"] == []


def test_the_burstable_render_passes_mig_on(dgx):
    rendered = burst.render({}, "s", "1.36", mig={"h1": HALF}, topologies={"h1": dgx}, fractional_burst={"memory": 2.0})
    assert "mig-3g-40gb" in names(rendered, "ResourceClaimTemplate") and "fractional-gpu-burst" in names(
        rendered, "ResourceClaimTemplate"
    )


# -- settings refused -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"enabled": "yes"}, "templates.mig.enabled must be true or false"),
        ({"nic": 1}, "templates.mig.nic must be true or false"),
        ({"profiles": "3g.40gb"}, "templates.mig.profiles must be a list of MIG profile names"),
        ({"profiles": ["3g"]}, r"templates.mig.profiles\[0\]: '3g' is not a MIG profile name"),
        ({"profiles": ["1c.3g.40gb"]}, r"templates.mig.profiles\[0\]: '1c.3g.40gb' names a compute instance"),
        ({"profiles": ["1g.10gb", "1g.10gb"]}, r"templates.mig.profiles\[1\]: '1g.10gb' is there twice"),
        ({"prioritized": ["3g.40gb"]}, r"templates.mig.prioritized\[0\] must be a list"),
        ({"prioritized": {"a": 1}}, "templates.mig.prioritized must be a list of profile lists"),
        ({"prioritized": [["3g.40gb"]]}, r"templates.mig.prioritized\[0\]: a prioritized list names at least 2"),
        (
            {"prioritized": [["1g.10gb+me", "1g.10gb-me", "1g.10gb-me"]]},
            r"templates.mig.prioritized\[0\]\[2\]: '1g.10gb-me' is there twice",
        ),
        (
            {
                "prioritized": [
                    ["1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb", "1g.20gb", "1g.5gb", "2g.10gb", "3g.20gb"]
                ]
            },
            r"templates.mig.prioritized\[0\]: 9 profiles, a firstAvailable list holds at most 8",
        ),  # fmt: skip
        ({"name": "mig"}, r"templates.mig.name: 'mig' must be a string with \{profile\}"),
        ({"prioritized_name": "x-{profile}"}, r"templates.mig.prioritized_name: .* must be a string with \{profiles\}"),
        ({"nic_name": "mig-{profile}-{n}"}, "templates.mig.nic_name: .* has a placeholder other than"),
        (
            {"class_name": "MIG_{profile}"},
            "templates.mig.class_name: 'MIG_{profile}' gives 'MIG_7g-80gb', which is not",
        ),
        ({"nic_name": "mig-{profile}"}, "templates.mig.nic_name: 'mig-{profile}' is the name pattern of the MIG-only"),
        ({"count": 2}, "templates.mig: unknown option 'count'"),
        ({"selectors": {"gpu": ["true"]}}, "templates.mig.selectors: 'gpu' is not one of mig, nic"),
    ],
)
def test_bad_settings_are_refused_naming_the_setting(options, said):
    with pytest.raises(claims.ClaimsError, match="aligned_dra_claims." + said):
        claims.settings({"templates": {"mig": options}})


def test_variants_of_one_size_are_distinct_profiles_with_distinct_names():
    """``+me`` and ``-me`` once folded to one name; each variant now has its own token, so a list may name both."""
    options = {"prioritized": [["1g.10gb+me", "1g.10gb-me", "1g.10gb+me.all", "1g.10gb+gfx"]]}
    conf = claims.settings({"templates": {"mig": options}})
    assert conf["templates"]["mig"]["prioritized"] == options["prioritized"]


def test_a_class_name_taken_by_another_class_is_refused(dgx):
    settings = {"classes": {"mig": "mig-1g-10gb.aligned.dev"}}
    with pytest.raises(claims.ClaimsError, match="class_name: 'mig-1g-10gb.aligned.dev' is the name of another"):
        render(settings, mig={"h1": DYNAMIC}, topologies={"h1": dgx})


def test_a_mig_class_name_another_class_has_is_refused(dgx):
    with pytest.raises(claims.ClaimsError, match="class_name: 'mig-3g-40gb.aligned.dev' is the name of another"):
        render({"classes": {"gpu": "mig-3g-40gb.aligned.dev"}}, mig={"h1": DYNAMIC}, topologies={"h1": dgx})
    with pytest.raises(claims.ClaimsError, match="classes.mig: 'aligned-nic' is the name of another DeviceClass"):
        render({"classes": {"mig": "aligned-nic"}}, mig={"h1": HALF}, topologies={"h1": dgx})


def test_a_layout_that_cannot_be_modelled_names_the_host(dgx):
    bad = dict(HALF, layout="nope")
    with pytest.raises(claims.ClaimsError, match="^h1: aligned_dra_mig: "):
        render(mig={"h1": bad}, topologies={"h1": dgx})
