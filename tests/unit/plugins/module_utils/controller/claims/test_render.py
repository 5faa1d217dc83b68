# SPDX-License-Identifier: Apache-2.0
"""Rendering per minor: golden files, official schemas, gates, validation, settings errors.

Golden files (YAML documents) live in tests/unit/plugins/module_utils/controller/claims/golden/; after an intended
change, regenerate them with ``ALIGNED_DRA_REGEN_GOLDEN=1`` and review the diff.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import render as claims
from ansible_collections.aligned.dra.plugins.module_utils.dra import gates as dra_gates
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra

GOLDEN = Path(__file__).parent / "golden"
ALL_DRIVERS = {
    "drivers": ["dra.aligned.dev", "gpu.nvidia.com", "dra.net", "dra.cpu"],
    "required": ["gpu-nic-pair-1"],
}


@pytest.mark.parametrize("minor", dra_gates.SUPPORTED_MINORS)
def test_golden_rendering_per_minor(minor):
    rendered = claims.render(ALL_DRIVERS, "site-a", minor)
    text = yaml.safe_dump_all(rendered["objects"] + [{"left_out": rendered["skipped"]}], sort_keys=True)
    path = GOLDEN / f"claims-{minor}.golden"  # YAML, named so that linters leave it alone
    if os.environ.get("ALIGNED_DRA_REGEN_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text()


@pytest.mark.parametrize("minor", dra_gates.SUPPORTED_MINORS)
def test_everything_rendered_is_valid_for_its_minor(minor):
    for gates in ({}, {"DRAConsumableCapacity": True}):
        rendered = claims.render(ALL_DRIVERS, "site-a", minor, gates)
        assert claims.validate_all(rendered["objects"], minor, gates) == []
        for obj in rendered["objects"]:
            kubernetes_validate.validate(obj, minor + ".0", strict=True)


def kinds_and_names(rendered):
    return {(o["kind"], o["metadata"]["name"]) for o in rendered["objects"]}


def test_catalogue_contents():
    rendered = claims.render(ALL_DRIVERS, "site-a", "1.36")
    names = kinds_and_names(rendered)
    for cls in ("aligned-gpu", "aligned-nic", "aligned-vf", "nvidia-gpu", "dranet-nic", "dra-cpu"):
        assert ("DeviceClass", cls) in names
    for n in (1, 2, 4, 8):
        assert ("ResourceClaimTemplate", f"gpu-nic-pair-{n}") in names
        assert ("ResourceClaimTemplate", f"gpu-nic-pair-{n}-fallback") in names
    for name in ("fractional-gpu", "gpu-nic-cpu", "nic-only", "gpu-only", "vf-only"):
        assert ("ResourceClaimTemplate", name) in names
    pair4 = next(o for o in rendered["objects"] if o["metadata"]["name"] == "gpu-nic-pair-4")
    devices = pair4["spec"]["spec"]["devices"]
    assert len(devices["requests"]) == 8
    assert devices["constraints"][3] == {"requests": ["gpu-3", "nic-3"], "matchAttribute": dra.ATTR_PCIE_ROOT}
    cpu = next(o for o in rendered["objects"] if o["metadata"]["name"] == "gpu-nic-cpu")
    assert cpu["spec"]["spec"]["devices"]["requests"][2]["exactly"] == {
        "deviceClassName": "dra-cpu",
        "allocationMode": "ExactCount",
        "count": 8,
    }


def test_no_cpu_driver_no_cpu_template():
    names = kinds_and_names(claims.render({}, "s", "1.36"))
    assert ("ResourceClaimTemplate", "gpu-nic-cpu") not in names
    assert ("DeviceClass", "dra-cpu") not in names
    assert ("DeviceClass", "nvidia-gpu") not in names


def test_consumable_capacity_is_off_before_1_36_and_falls_back_to_a_shared_claim():
    rendered = claims.render({}, "s", "1.35")
    names = kinds_and_names(rendered)
    assert ("ResourceClaimTemplate", "fractional-gpu") not in names
    assert ("ResourceClaim", "fractional-gpu-shared") in names
    (left,) = rendered["skipped"]
    assert left["name"] == "fractional-gpu" and "DRAConsumableCapacity" in left["reason"]
    assert "off on Kubernetes 1.35" in left["reason"]


def test_site_declares_the_gate_on():
    rendered = claims.render({}, "s", "1.35", {"DRAConsumableCapacity": True})
    assert ("ResourceClaimTemplate", "fractional-gpu") in kinds_and_names(rendered)
    assert rendered["skipped"] == []


def test_prioritized_list_off_skips_fallback_templates_with_a_message():
    rendered = claims.render({}, "s", "1.34", {"DRAPrioritizedList": False})
    names = kinds_and_names(rendered)
    assert not [n for k, n in names if n.endswith("-fallback")]
    reasons = {s["name"]: s["reason"] for s in rendered["skipped"]}
    assert "needs feature gate DRAPrioritizedList" in reasons["gpu-nic-pair-1-fallback"]


def test_sharing_config_is_attached_to_the_shared_claim():
    sharing = {
        "driver": "gpu.nvidia.com",
        "parameters": {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig"},
    }
    rendered = claims.render({"templates": {"fractional_gpu": {"sharing_config": sharing}}}, "s", "1.34")
    shared = next(o for o in rendered["objects"] if o["kind"] == "ResourceClaim")
    assert shared["spec"]["devices"]["config"] == [{"requests": ["gpu"], "opaque": sharing}]
    assert claims.validate(shared, "1.34") == []


def test_the_fractional_request_asks_for_compute_too_unless_told_not_to():
    def capacity(options):
        rendered = claims.render({"templates": {"fractional_gpu": options}}, "s", "1.36")
        template = next(o for o in rendered["objects"] if o["metadata"]["name"] == "fractional-gpu")
        return template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["capacity"]["requests"]

    # without a compute request a claim consumes the published default, all of the GPU's compute
    assert capacity({}) == {"memory": "20Gi", "compute": "25"}
    assert capacity({"memory": "10Gi", "compute": 12}) == {"memory": "10Gi", "compute": "12"}
    assert capacity({"compute": None}) == {"memory": "20Gi"}


def test_names_counts_and_selectors_are_configurable():
    settings = {
        "classes": {"gpu": "h100", "nic": "cx7"},
        "selectors": {"gpu": ['device.attributes["dra.aligned.dev"].model.startsWith("NVIDIA H100")']},
        "templates": {"pairs": {"counts": [2], "name": "h100-cx7-x{n}"}, "pairs_fallback": {"enabled": False}},
        "namespace": "ml",
    }
    rendered = claims.render(settings, "s", "1.36")
    names = kinds_and_names(rendered)
    assert ("ResourceClaimTemplate", "h100-cx7-x2") in names
    assert ("ResourceClaimTemplate", "gpu-nic-pair-1") not in names
    gpu_class = next(o for o in rendered["objects"] if o["metadata"]["name"] == "h100")
    assert len(gpu_class["spec"]["selectors"]) == 2
    template = next(o for o in rendered["objects"] if o["metadata"]["name"] == "h100-cx7-x2")
    assert template["metadata"]["namespace"] == "ml"
    assert template["spec"]["spec"]["devices"]["requests"][1]["exactly"]["deviceClassName"] == "cx7"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"bogus": 1}, "unknown key 'bogus'"),
        ({"drivers": ["acme.dev"]}, "'acme.dev' is not one of"),
        ({"templates": {"pairs": {"counts": [9]}}}, "counts must be a list of integers 1..8"),
        ({"templates": {"nope": {}}}, "unknown template kind 'nope'"),
        ({"templates": {"pairs": {"colour": 1}}}, "unknown option 'colour'"),
        ({"classes": {"gpu": "Not_Valid"}}, "not a DNS subdomain"),
        ({"gpu_driver": "gpu.nvidia.com"}, "is not in aligned_dra_claims.drivers"),
        ({"required": ["ghost"]}, "'ghost' is not rendered"),
        ({"namespace": "Bad_NS"}, "namespace"),
        ({"templates": {"pairs": {"name": "x"}, "gpu_only": {"name": "x"}}}, "two templates are named 'x'"),
        ({"templates": {"fractional_gpu": {"compute": 0}}}, r"fractional_gpu\.compute: 0 must be a percent"),
        ({"templates": {"fractional_gpu": {"compute": 101}}}, r"fractional_gpu\.compute: 101 must be a percent"),
        ({"templates": {"fractional_gpu": {"compute": "25"}}}, r"fractional_gpu\.compute: '25' must be a percent"),
        ({"templates": {"fractional_gpu": {"compute": True}}}, r"fractional_gpu\.compute: True must be a percent"),
        ({"templates": {"fractional_gpu": {"memory": "20 Gi"}}}, r"fractional_gpu\.memory: "),
        ({"templates": {"fractional_gpu": {"memory": "0"}}}, r"fractional_gpu\.memory: '0' is not a positive"),
    ],
)
def test_bad_settings_name_the_setting(settings, message):
    with pytest.raises(claims.ClaimsError, match=message):
        claims.render(settings, "s", "1.36")


def test_required_template_that_the_minor_leaves_out_is_an_error():
    with pytest.raises(claims.ClaimsError, match="DRAConsumableCapacity"):
        claims.render({"required": ["fractional-gpu"]}, "s", "1.34")


def test_unknown_gate_and_minor():
    with pytest.raises(claims.ClaimsError, match="unknown gate"):
        claims.render({}, "s", "1.36", {"DRAWhatever": True})
    with pytest.raises(dra.DeviceModelError, match="supported minors"):
        claims.render({}, "s", "1.30")


def base_template():
    rendered = claims.render({}, "s", "1.36")
    return copy.deepcopy(next(o for o in rendered["objects"] if o["metadata"]["name"] == "gpu-nic-pair-1"))


def test_validate_reports_schema_cel_limits_and_gates():
    bad_schema = base_template()
    bad_schema["spec"]["spec"]["devices"]["requests"][0]["exactly"]["colour"] = "red"
    assert any("schema:" in p for p in claims.validate(bad_schema, "1.36"))

    bad_cel = base_template()
    bad_cel["spec"]["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [
        {"cel": {"expression": 'device.attributes["dra.aligned.dev"].kidn == "gpu"'}}
    ]
    problems = claims.validate(bad_cel, "1.36")
    assert any("requests[0].exactly.selectors[0].cel" in p and "kidn" in p for p in problems)

    too_many = base_template()
    requests = too_many["spec"]["spec"]["devices"]["requests"]
    requests[0]["exactly"]["count"] = 40
    assert any("asks for 41 devices" in p for p in claims.validate(too_many, "1.36"))

    dangling = base_template()
    dangling["spec"]["spec"]["devices"]["constraints"][0]["requests"] = ["gpu-0", "nic-9"]
    assert any("request 'nic-9', which does not exist" in p for p in claims.validate(dangling, "1.36"))

    gated = base_template()
    gated["spec"]["spec"]["devices"]["requests"][0]["exactly"]["capacity"] = {"requests": {"memory": "1Gi"}}
    assert any("DRAConsumableCapacity" in p for p in claims.validate(gated, "1.35"))
    assert claims.validate(gated, "1.36") == []


def test_file_names_are_stable():
    rendered = claims.render({}, "s", "1.34")
    assert sorted(claims.file_name(o) for o in rendered["objects"])[:2] == [
        "claim-fractional-gpu-shared.yaml",
        "claimtemplate-gpu-nic-pair-1-fallback.yaml",
    ]


def test_cpu_template_needs_one_numa_attribute_for_all_three():
    settings = {"drivers": ["dra.aligned.dev", "dra.cpu"], "cpu_numa_attribute": "dra.cpu/numaNodeID"}
    rendered = claims.render(settings, "s", "1.36")
    assert ("ResourceClaimTemplate", "gpu-nic-cpu") not in kinds_and_names(rendered)
    (left,) = rendered["skipped"]
    assert left["name"] == "gpu-nic-cpu" and "dra.cpu/numaNodeID" in left["reason"]


def test_request_selectors_per_template_kind():
    h100 = 'device.attributes["dra.aligned.dev"].model.startsWith("NVIDIA H100")'
    fast = 'device.attributes["dra.aligned.dev"].linkSpeed >= 400'
    settings = {
        "templates": {
            "pairs": {"counts": [2], "selectors": {"gpu": [h100], "nic": [fast]}},
            "pairs_fallback": {"counts": [1], "selectors": {"nic": [fast]}},
            "nic_only": {"selectors": {"device": [fast]}},
        }
    }
    rendered = claims.render(settings, "s", "1.36")
    by_name = {o["metadata"]["name"]: o for o in rendered["objects"]}
    requests = by_name["gpu-nic-pair-2"]["spec"]["spec"]["devices"]["requests"]
    assert [r["exactly"].get("selectors") for r in requests] == [
        [{"cel": {"expression": h100}}],
        [{"cel": {"expression": fast}}],
    ] * 2
    subs = by_name["gpu-nic-pair-1-fallback"]["spec"]["spec"]["devices"]["requests"][1]["firstAvailable"]
    assert all(sub["selectors"] == [{"cel": {"expression": fast}}] for sub in subs)
    assert "selectors" not in by_name["gpu-nic-pair-1-fallback"]["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert (
        by_name["nic-only"]["spec"]["spec"]["devices"]["requests"][0]["exactly"]["selectors"][0]["cel"]["expression"]
        == fast
    )
    assert claims.validate_all(rendered["objects"], "1.36") == []


@pytest.mark.parametrize(
    ("selectors", "message"),
    [({"cpus": ["true"]}, "'cpus' is not one of gpu, nic"), ({"gpu": "true"}, "must be a list of CEL strings")],
)
def test_request_selectors_are_checked(selectors, message):
    with pytest.raises(claims.ClaimsError, match=message):
        claims.render({"templates": {"pairs": {"selectors": selectors}}}, "s", "1.36")


# -- device taint tolerations ---------------------------------------------------------------------

UNHEALTHY_OK = [
    {"key": "dra.aligned.dev/unhealthy", "operator": "Equal", "value": "rdma-port-down", "effect": "NoSchedule"},
    {"key": "dra.aligned.dev/unhealthy", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
]


def requests_of(obj):
    spec = obj["spec"]["spec"] if obj["kind"] == "ResourceClaimTemplate" else obj["spec"]
    for request in spec["devices"]["requests"]:
        yield from [request["exactly"]] if request.get("exactly") else request["firstAvailable"]


@pytest.mark.parametrize(("minor", "gates"), [("1.36", {}), ("1.37", {}), ("1.35", {"DRADeviceTaints": True})])
def test_tolerations_go_into_every_request_where_the_gate_is_on(minor, gates):
    rendered = claims.render(ALL_DRIVERS, "site-a", minor, gates, tolerations=UNHEALTHY_OK)
    claims_ = [o for o in rendered["objects"] if o["kind"] != "DeviceClass"]
    assert claims_ and not any(o["kind"] == "DeviceClass" and "tolerations" in str(o) for o in rendered["objects"])
    for obj in claims_:
        for spec in requests_of(obj):
            assert spec["tolerations"] == UNHEALTHY_OK
    assert claims.validate_all(rendered["objects"], minor, gates) == []
    # and the planner honours them: a device tainted rdma-port-down is tolerated by these requests
    from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import plan

    compiled = plan.Compiler([o for o in rendered["objects"] if o["kind"] == "DeviceClass"])
    requests, _constraints = compiled.template(next(o for o in claims_ if o["metadata"]["name"] == "nic-only"))
    taint = {"key": "dra.aligned.dev/unhealthy", "value": "rdma-port-down", "effect": "NoSchedule"}
    assert all(alternative.tolerates(taint) for alternative in requests[0])
    assert not all(alternative.tolerates(dict(taint, value="gone")) for alternative in requests[0])


@pytest.mark.parametrize(("minor", "gates"), [("1.34", {}), ("1.35", {}), ("1.36", {"DRADeviceTaints": False})])
def test_tolerations_are_refused_where_the_gate_is_off(minor, gates):
    with pytest.raises(claims.ClaimsError, match="aligned_dra_claims_tolerations: .*DRADeviceTaints, which is off"):
        claims.render(ALL_DRIVERS, "site-a", minor, gates, tolerations=UNHEALTHY_OK)
    # without tolerations the same site renders
    assert claims.render(ALL_DRIVERS, "site-a", minor, gates)["objects"]


@pytest.mark.parametrize(
    ("toleration", "message"),
    [
        ({"key": "a/b", "colour": "red"}, "unknown field 'colour'"),
        ({"key": "a/b", "operator": "In"}, "operator 'In'"),
        ({"operator": "Equal", "value": "x"}, "without a key the operator must be Exists"),
        ({"key": "a/b", "operator": "Exists", "value": "x"}, "Exists takes no value"),
        ({"key": "not a key"}, "not a label name"),
        ({"key": "a/b", "value": "-x"}, "not a label value"),
        ({"key": "a/b", "effect": "PreferNoSchedule"}, "effect 'PreferNoSchedule'"),
        ({"key": "a/b", "effect": "NoSchedule", "tolerationSeconds": 5}, "only to effect NoExecute"),
        ({"key": "a/b", "effect": "NoExecute", "tolerationSeconds": "5"}, "must be an integer"),
        ("a/b", r"\[0\] must be a mapping"),
    ],
)
def test_bad_tolerations_name_the_setting(toleration, message):
    with pytest.raises(claims.ClaimsError, match=message):
        claims.render({}, "site-a", "1.36", tolerations=[toleration])


def test_too_many_tolerations():
    with pytest.raises(claims.ClaimsError, match="17 tolerations, a request takes at most 16"):
        claims.render({}, "site-a", "1.36", tolerations=[{"operator": "Exists"}] * 17)


# -- extended resource names (DRAExtendedResource, KEP-5004) ---------------------------------

GPU_AS_EXTENDED_RESOURCE = dict(ALL_DRIVERS, extended_resources={"gpu": "aligned.dev/gpu"})


def class_named(rendered, name):
    return next(o for o in rendered["objects"] if o["kind"] == "DeviceClass" and o["metadata"]["name"] == name)


@pytest.mark.parametrize(
    ("minor", "gates"),
    [("1.36", {}), ("1.37", {}), ("1.34", {"DRAExtendedResource": True}), ("1.35", {"DRAExtendedResource": True})],
)
def test_extended_resource_name_is_rendered_on_the_class_and_schema_valid(minor, gates):
    rendered = claims.render(GPU_AS_EXTENDED_RESOURCE, "site-a", minor, gates)
    assert class_named(rendered, "aligned-gpu")["spec"]["extendedResourceName"] == "aligned.dev/gpu"
    others = [o for o in rendered["objects"] if o["kind"] == "DeviceClass" and o["metadata"]["name"] != "aligned-gpu"]
    assert others and all("extendedResourceName" not in o["spec"] for o in others)
    assert claims.validate_all(rendered["objects"], minor, gates) == []
    for obj in rendered["objects"]:
        kubernetes_validate.validate(obj, minor + ".0", strict=True)


def test_extended_resource_name_follows_a_renamed_class():
    raw = {"classes": {"gpu": "h100"}, "extended_resources": {"gpu": "example.com/h100"}}
    rendered = claims.render(raw, "site-a", "1.36")
    assert class_named(rendered, "h100")["spec"]["extendedResourceName"] == "example.com/h100"


@pytest.mark.parametrize(("minor", "gates"), [("1.34", {}), ("1.35", {}), ("1.36", {"DRAExtendedResource": False})])
def test_extended_resource_name_is_refused_where_the_gate_is_off(minor, gates):
    with pytest.raises(claims.ClaimsError) as info:
        claims.render(GPU_AS_EXTENDED_RESOURCE, "site-a", minor, gates)
    message = str(info.value)
    assert message.startswith("aligned_dra_claims.extended_resources.gpu: ")
    assert f"DRAExtendedResource, which is off on Kubernetes {minor}" in message
    assert "aligned_dra_feature_gates" in message


def test_two_classes_of_a_site_may_not_share_an_extended_resource_name():
    raw = dict(ALL_DRIVERS, extended_resources={"gpu": "aligned.dev/gpu", "nvidia-gpu": "aligned.dev/gpu"})
    with pytest.raises(claims.ClaimsError, match=r"'aligned.dev/gpu' is already the extended resource name of class"):
        claims.render(raw, "site-a", "1.36")
    # distinct names are fine
    raw["extended_resources"]["nvidia-gpu"] = "nvidia.com/gpu"
    rendered = claims.render(raw, "site-a", "1.36")
    assert class_named(rendered, "nvidia-gpu")["spec"]["extendedResourceName"] == "nvidia.com/gpu"


LONG_DOMAIN = ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 52])  # 244: "requests." + it is 253


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("gpu", "needs a domain"),
        ("deviceclass.resource.kubernetes.io/aligned-gpu", "implicit name every DeviceClass already has"),
        ("kubernetes.io/gpu", "reserved for native resources"),
        ("gpu.kubernetes.io/gpu", "reserved for native resources"),
        ("requests.example.com/gpu", "must not start with requests."),
        ("example.com/a/b", "more than one /"),
        ("Example.com/gpu", "lowercase DNS subdomain"),
        (LONG_DOMAIN + "e/gpu", "lowercase DNS subdomain"),
        ("example.com/-gpu", "the name after /"),
        ("example.com/" + "g" * 64, "the name after /"),
        ("example.com/", "the name after /"),
        (5, "non-empty string"),
    ],
)
def test_invalid_extended_resource_names_are_refused(name, message):
    raw = {"extended_resources": {"gpu": name}}
    with pytest.raises(claims.ClaimsError) as info:
        claims.render(raw, "site-a", "1.36")
    assert str(info.value).startswith(f"aligned_dra_claims.extended_resources.gpu: {name!r} is not an extended")
    assert message in str(info.value)


@pytest.mark.parametrize("name", ["example.com/gpu", "aligned.dev/gpu_80GB.v2", LONG_DOMAIN + "/" + "g" * 63])
def test_valid_extended_resource_names_at_the_limits(name):
    assert claims.extended_resource_name_problem(name) is None
    rendered = claims.render({"extended_resources": {"gpu": name}}, "site-a", "1.36")
    assert claims.validate_all(rendered["objects"], "1.36") == []


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ({"tpu": "example.com/tpu"}, "'tpu' is not a class key"),
        ({"nvidia-gpu": "nvidia.com/gpu"}, "class 'nvidia-gpu' is not rendered, its driver is not in"),
    ],
)
def test_extended_resource_for_a_class_the_site_does_not_render(entries, message):
    with pytest.raises(claims.ClaimsError, match=message):
        claims.render({"extended_resources": entries}, "site-a", "1.36")


def test_validate_names_the_gated_field_of_a_hand_made_class():
    rendered = claims.render(GPU_AS_EXTENDED_RESOURCE, "site-a", "1.36")
    gpu = class_named(rendered, "aligned-gpu")
    problems = claims.validate(gpu, "1.35")
    assert problems == [
        "DeviceClass aligned-gpu: spec.extendedResourceName needs feature gate DRAExtendedResource, "
        "which is off on Kubernetes 1.35"
    ]
    assert claims.validate(gpu, "1.35", {"DRAExtendedResource": True}) == []


# -- the driver split by kind (aligned_dra_device_options.split_gpu_driver) -----------------------------

SPLIT = {"split_gpu_driver": "gpu.aligned.dev"}
GPU_CONFIG = {
    "driver": "dra.aligned.dev",
    "parameters": {"apiVersion": "dra.aligned.dev/v1alpha1", "kind": "GpuConfig", "sharing": {"strategy": "MPS"}},
}


def test_split_by_kind_the_gpu_class_selects_the_split_driver_and_nothing_else_changes():
    one = claims.render({}, "s", "1.36")
    split = claims.render({}, "s", "1.36", device_options=SPLIT)
    assert claims.validate_all(split["objects"], "1.36") == []
    expressions = {
        o["metadata"]["name"]: [s["cel"]["expression"] for s in o["spec"]["selectors"]]
        for o in split["objects"]
        if o["kind"] == "DeviceClass"
    }
    assert expressions == {
        "aligned-gpu": [
            'device.driver == "gpu.aligned.dev" && device.attributes["dra.aligned.dev"].kind in ["gpu", "accelerator"]'
        ],
        "aligned-nic": ['device.driver == "dra.aligned.dev" && device.attributes["dra.aligned.dev"].kind == "nic"'],
        "aligned-vf": ['device.driver == "dra.aligned.dev" && device.attributes["dra.aligned.dev"].kind == "vf"'],
    }
    unchanged = [o for o in split["objects"] if o["metadata"]["name"] != "aligned-gpu"]
    assert unchanged == [o for o in one["objects"] if o["metadata"]["name"] != "aligned-gpu"]
    # without the split (unset or None), one driver as before
    assert claims.render({}, "s", "1.36", device_options={"split_gpu_driver": None}) == one
    assert class_named(one, "aligned-gpu")["spec"]["selectors"][0]["cel"]["expression"].startswith(
        'device.driver == "dra.aligned.dev"'
    )


def test_gpu_driver_dra_aligned_dev_resolves_to_the_split_driver():
    conf = claims.settings({})
    assert claims.published_drivers(conf) == {"gpu": "dra.aligned.dev", "nic": "dra.aligned.dev"}
    assert claims.published_drivers(conf, SPLIT) == {"gpu": "gpu.aligned.dev", "nic": "dra.aligned.dev"}
    nvidia = claims.settings({"drivers": ["gpu.nvidia.com", "dra.net"], "gpu_driver": "gpu.nvidia.com",
                              "nic_driver": "dra.net"})  # fmt: skip
    assert claims.published_drivers(nvidia, SPLIT) == {"gpu": "gpu.nvidia.com", "nic": "dra.net"}
    # NVIDIA's GPUs with the collection's NICs: the split changes no class the templates take
    mixed = {"drivers": ["dra.aligned.dev", "gpu.nvidia.com"], "gpu_driver": "gpu.nvidia.com"}
    templates = [o for o in claims.render(mixed, "s", "1.36")["objects"] if o["kind"] != "DeviceClass"]
    split_templates = [o for o in claims.render(mixed, "s", "1.36", device_options=SPLIT)["objects"]
                       if o["kind"] != "DeviceClass"]  # fmt: skip
    assert split_templates == templates


@pytest.mark.parametrize(
    ("options", "sharing", "named"),
    [
        ({}, GPU_CONFIG, "dra.aligned.dev"),
        (SPLIT, GPU_CONFIG, "gpu.aligned.dev"),  # the driver that reads it: the split GPU driver
        (SPLIT, dict(GPU_CONFIG, driver="gpu.aligned.dev"), "gpu.aligned.dev"),
        (SPLIT, dict(GPU_CONFIG, driver="gpu.nvidia.com"), "gpu.nvidia.com"),  # another driver's: as given
    ],
)
def test_the_fractional_gpus_sharing_config_names_the_driver_that_reads_it(options, sharing, named):
    settings = {"templates": {"fractional_gpu": {"sharing_config": sharing}}}
    given = sharing["driver"]
    rendered = claims.render(settings, "s", "1.34", device_options=options)
    shared = next(o for o in rendered["objects"] if o["kind"] == "ResourceClaim")
    (config,) = shared["spec"]["devices"]["config"]
    assert config == {"requests": ["gpu"], "opaque": dict(sharing, driver=named)}
    assert claims.validate(shared, "1.34") == []
    assert sharing["driver"] == given  # the settings are left as they are


@pytest.mark.parametrize("name", ["dra.aligned.dev", "accel.aligned.dev", "GPU.aligned.dev", "gpu." + "x" * 60])
def test_a_bad_split_gpu_driver_is_refused_naming_the_option(name):
    with pytest.raises(dra.DeviceModelError, match=r"^device_options\.split_gpu_driver "):
        claims.render({}, "s", "1.36", device_options={"split_gpu_driver": name})
