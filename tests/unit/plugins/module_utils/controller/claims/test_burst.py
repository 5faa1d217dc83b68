# SPDX-License-Identifier: Apache-2.0
"""Burstable fractional GPU templates: the limits, where they are rendered, and the refusals."""

from __future__ import annotations

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import burst
from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import render as claims

MPS_SHARE = {
    "driver": "dra.aligned.dev",
    "parameters": {
        "apiVersion": "dra.aligned.dev/v1alpha1",
        "kind": "GpuConfig",
        "sharing": {"strategy": "MPS", "mps": {"activeThreadPercentage": 30}},
    },
}


def named(rendered, name):
    return next(o for o in rendered["objects"] if o["metadata"]["name"] == name)


def test_the_compute_limit_multiplies_the_compute_the_template_requests():
    rendered = burst.render({}, "s", "1.36", fractional_burst={"compute": 1.5})
    made = named(rendered, "fractional-gpu-burst")["spec"]["spec"]["devices"]
    # the default request: 20Gi and 25 % of the GPU's compute, which the scheduler grants
    assert made["requests"][0]["exactly"]["capacity"] == {"requests": {"memory": "20Gi", "compute": "25"}}
    assert made["config"][0]["opaque"]["parameters"]["sharing"]["mps"] == {"limits": {"compute": 38}}


def test_the_burstable_template_has_the_fractional_request_and_the_limits():
    # no compute request: the compute share is the GpuConfig's MPS share
    settings = {"templates": {"fractional_gpu": {"memory": "20Gi", "compute": None, "sharing_config": MPS_SHARE}}}
    rendered = burst.render(settings, "s", "1.36", fractional_burst={"memory": 2.0, "compute": 1.5})
    names = [o["metadata"]["name"] for o in rendered["objects"]]
    assert names[names.index("fractional-gpu") + 1] == "fractional-gpu-burst"
    fractional, made = named(rendered, "fractional-gpu"), named(rendered, "fractional-gpu-burst")
    devices = made["spec"]["spec"]["devices"]
    assert devices["requests"] == fractional["spec"]["spec"]["devices"]["requests"]
    assert devices["requests"][0]["exactly"]["capacity"] == {"requests": {"memory": "20Gi"}}
    (config,) = devices["config"]
    assert config["requests"] == ["gpu"]
    assert config["opaque"]["driver"] == "dra.aligned.dev"
    sharing = config["opaque"]["parameters"]["sharing"]
    assert sharing == {
        "strategy": "MPS",
        "mps": {"activeThreadPercentage": 30, "limits": {"memory": "40Gi", "compute": 45}},
    }
    assert claims.validate_all(rendered["objects"], "1.36") == []
    assert MPS_SHARE["parameters"]["sharing"]["mps"] == {"activeThreadPercentage": 30}  # settings untouched


def test_without_a_sharing_config_the_config_is_a_fresh_mps_gpu_config():
    rendered = burst.render({}, "s", "1.36", fractional_burst={"memory": 1.5, "name": "burst-30"})
    (config,) = named(rendered, "burst-30")["spec"]["spec"]["devices"]["config"]
    assert config["opaque"]["parameters"] == {
        "apiVersion": "dra.aligned.dev/v1alpha1",
        "kind": "GpuConfig",
        "sharing": {"strategy": "MPS", "mps": {"limits": {"memory": "30Gi"}}},
    }
    assert claims.validate_all(rendered["objects"], "1.36") == []


@pytest.mark.parametrize(
    ("request_", "factor", "limit"), [("20Gi", 2, "40Gi"), ("10Gi", 1.25, "12800Mi"), ("1000", 1.5, "1500")]
)
def test_the_memory_limit_is_factor_times_request(request_, factor, limit):
    rendered = burst.render(
        {"templates": {"fractional_gpu": {"memory": request_}}}, "s", "1.36", fractional_burst={"memory": factor}
    )
    (config,) = named(rendered, "fractional-gpu-burst")["spec"]["spec"]["devices"]["config"]
    assert config["opaque"]["parameters"]["sharing"]["mps"]["limits"] == {"memory": limit}


def test_the_compute_limit_is_capped_at_100_percent():
    settings = {"templates": {"fractional_gpu": {"sharing_config": MPS_SHARE}}}
    rendered = burst.render(settings, "s", "1.36", fractional_burst={"compute": 5})
    (config,) = named(rendered, "fractional-gpu-burst")["spec"]["spec"]["devices"]["config"]
    assert config["opaque"]["parameters"]["sharing"]["mps"]["limits"] == {"compute": 100}


def test_the_split_gpu_driver_reads_the_limits():
    rendered = burst.render(
        {}, "s", "1.36", device_options={"split_gpu_driver": "gpu.aligned.dev"}, fractional_burst={"memory": 2}
    )
    (config,) = named(rendered, "fractional-gpu-burst")["spec"]["spec"]["devices"]["config"]
    assert config["opaque"]["driver"] == "gpu.aligned.dev"


def test_tolerations_and_selectors_come_with_the_fractional_request():
    settings = {
        "templates": {"fractional_gpu": {"selectors": {"gpu": ['device.attributes["dra.aligned.dev"].model == "X"']}}}
    }
    tolerations = [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}]
    rendered = burst.render(settings, "s", "1.36", tolerations=tolerations, fractional_burst={"memory": 2})
    exactly = named(rendered, "fractional-gpu-burst")["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert exactly["tolerations"] == tolerations
    assert exactly["selectors"]


def test_where_the_fractional_gpu_is_a_shared_claim_the_burstable_one_is_left_out():
    rendered = burst.render({}, "s", "1.34", fractional_burst={"memory": 2})
    assert not [o for o in rendered["objects"] if o["metadata"]["name"] == "fractional-gpu-burst"]
    reasons = {s["name"]: s["reason"] for s in rendered["skipped"]}
    assert "a shared claim gives a pod no request of its own" in reasons["fractional-gpu-burst"]
    assert "DRAConsumableCapacity" in reasons["fractional-gpu-burst"]


@pytest.mark.parametrize(
    ("settings", "why"),
    [
        ({"gpu_driver": "gpu.nvidia.com", "drivers": ["dra.aligned.dev", "gpu.nvidia.com"]}, "gpu_driver"),
        ({"templates": {"fractional_gpu": {"enabled": False}}}, "disabled"),
    ],
)
def test_left_out_with_a_reason(settings, why):
    rendered = burst.render(settings, "s", "1.36", fractional_burst={"memory": 2})
    reasons = {s["name"]: s["reason"] for s in rendered["skipped"]}
    assert why in reasons["fractional-gpu-burst"]


def test_unset_renders_what_render_renders():
    assert burst.render({}, "s", "1.36") == claims.render({}, "s", "1.36")
    assert burst.render({}, "s", "1.36", fractional_burst={}) == claims.render({}, "s", "1.36")


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ({"memory": 0.5}, r"aligned_dra_fractional_burst\.memory: 0\.5 is below 1"),
        ({"memory": "2"}, r"aligned_dra_fractional_burst\.memory: '2' is not a number"),
        ({"compute": True}, r"aligned_dra_fractional_burst\.compute: True is not a number"),
        ({"memory": float("nan")}, r"aligned_dra_fractional_burst\.memory: nan is not a number"),
        ({"memroy": 2}, r"aligned_dra_fractional_burst: unknown key 'memroy'"),
        ({"name": "x"}, r"aligned_dra_fractional_burst: give a factor"),
        ({"memory": 2, "name": "Bad_Name"}, r"aligned_dra_fractional_burst\.name: 'Bad_Name'"),
        ({"memory": 2, "name": "gpu-only"}, r"aligned_dra_fractional_burst\.name: 'gpu-only' is the name of another"),
        ([2.0], r"aligned_dra_fractional_burst must be a mapping"),
    ],
)
def test_bad_settings_are_refused_naming_the_setting(value, match):
    with pytest.raises(claims.ClaimsError, match=match):
        burst.render({}, "s", "1.36", fractional_burst=value)


def test_a_compute_factor_without_a_compute_share_is_refused():
    memory_only = {"templates": {"fractional_gpu": {"compute": None}}}
    with pytest.raises(
        claims.ClaimsError, match=r"aligned_dra_fractional_burst\.compute: the fractional template asks"
    ):
        burst.render(memory_only, "s", "1.36", fractional_burst={"compute": 2})


def test_a_time_slicing_sharing_config_is_refused():
    sharing = {
        "driver": "dra.aligned.dev",
        "parameters": dict(MPS_SHARE["parameters"], sharing={"strategy": "TimeSlicing"}),
    }
    with pytest.raises(claims.ClaimsError, match="aligned_dra_fractional_burst: limits are MPS limits"):
        burst.render(
            {"templates": {"fractional_gpu": {"sharing_config": sharing}}}, "s", "1.36", fractional_burst={"memory": 2}
        )


def test_required_may_name_the_burstable_template():
    rendered = burst.render({"required": ["fractional-gpu-burst"]}, "s", "1.36", fractional_burst={"memory": 2})
    assert rendered["required"] == ["fractional-gpu-burst"]
    with pytest.raises(
        claims.ClaimsError, match=r"required: 'fractional-gpu-burst' is not rendered for Kubernetes 1\.34"
    ):
        burst.render({"required": ["fractional-gpu-burst"]}, "s", "1.34", fractional_burst={"memory": 2})
    with pytest.raises(claims.ClaimsError, match="aligned_dra_fractional_burst is not set"):
        burst.render({"required": ["fractional-gpu-burst"]}, "s", "1.36")
