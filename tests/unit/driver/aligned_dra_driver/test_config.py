# SPDX-License-Identifier: Apache-2.0
"""Opaque configuration dra.aligned.dev/v1alpha1: validation and class-then-claim merging."""

from __future__ import annotations

import pytest
from aligned_dra_driver import config

DRIVER = "dra.aligned.dev"


def entry(source, kind="NicConfig", requests=None, driver=DRIVER, **fields):
    item = {
        "source": source,
        "opaque": {"driver": driver, "parameters": {"apiVersion": config.API_VERSION, "kind": kind, **fields}},
    }
    if requests is not None:
        item["requests"] = requests
    return item


def test_class_then_claim_and_request_scoping():
    entries = [
        entry("FromClaim", requests=["nic"], interfaceName="net1"),
        entry("FromClass", interfaceName="cls0", mtu=9000),
        entry("FromClaim", requests=["other"], interfaceName="wrong"),
        entry("FromClaim", driver="gpu.example.com", mtu=1),
    ]
    assert config.effective(entries, DRIVER, "nic", "nic") == {"interfaceName": "net1", "mtu": 9000}
    assert config.effective(entries, DRIVER, "other", "vf") == {"interfaceName": "wrong", "mtu": 9000}


def test_subrequest_results_take_their_parent_config():
    entries = [entry("FromClaim", requests=["nic"], mtu=4000)]
    assert config.effective(entries, DRIVER, "nic/fast", "nic") == {"mtu": 4000}


def test_kinds_go_to_their_devices():
    entries = [entry("FromClaim", mtu=4000), entry("FromClaim", kind="GpuConfig", sharing={"strategy": "MPS"})]
    assert config.effective(entries, DRIVER, "r", "gpu") == {"sharing": {"strategy": "MPS"}}
    assert config.effective(entries, DRIVER, "r", "nic") == {"mtu": 4000}


@pytest.mark.parametrize(
    ("fields", "kind", "needle"),
    [
        ({"mtu": 67}, "NicConfig", "mtu"),
        ({"mtu": True}, "NicConfig", "mtu"),
        ({"interfaceName": "a" * 16}, "NicConfig", "interfaceName"),
        ({"interfaceName": "a/b"}, "NicConfig", "interfaceName"),
        ({"addresses": ["10.0.0.1"]}, "NicConfig", "CIDR"),
        ({"addresses": ["10.0.0.1/24", "10.0.0.1/24"]}, "NicConfig", "duplicate"),
        ({"routes": [{"destination": "x"}]}, "NicConfig", r"routes\[0\]"),
        ({"moveToPod": "yes"}, "NicConfig", "moveToPod"),
        ({"colour": "red"}, "NicConfig", "unknown field"),
        ({"sharing": {"strategy": "Magic"}}, "GpuConfig", "strategy"),
        ({"sharing": {"strategy": "MPS", "mps": {"activeThreadPercentage": 0}}}, "GpuConfig", "1..100"),
        ({"sharing": {"strategy": "MPS", "mps": {"pinnedDeviceMemoryLimit": "lots"}}}, "GpuConfig", "quantity"),
        ({}, "Unknown", "kind"),
    ],
)
def test_bad_config_names_the_field(fields, kind, needle):
    with pytest.raises(config.ConfigError, match=needle):
        config.effective(
            [entry("FromClaim", kind=kind, **fields)], DRIVER, "r", "gpu" if kind == "GpuConfig" else "nic"
        )


def test_wrong_api_version_is_refused():
    bad = entry("FromClaim", mtu=1500)
    bad["opaque"]["parameters"]["apiVersion"] = "dra.aligned.dev/v9"
    with pytest.raises(config.ConfigError, match="apiVersion"):
        config.effective([bad], DRIVER, "r", "nic")


def test_quantities():
    assert config.parse_quantity("10Gi", "x") == 10 * 2**30
    assert config.parse_quantity("512M", "x") == 512 * 10**6
    assert config.parse_quantity(1024, "x") == 1024


def gpu_limits(limits):
    return [entry("FromClaim", kind="GpuConfig", sharing={"strategy": "MPS", "mps": {"limits": limits}})]


def test_mps_limits_are_read_as_bytes_and_percent():
    cfg = config.effective(gpu_limits({"memory": "40Gi", "compute": 80}), DRIVER, "r", "gpu")
    assert cfg["sharing"]["mps"] == {"limits": {"memory": 40 * 2**30, "compute": 80}}
    assert config.effective(gpu_limits({"compute": 100}), DRIVER, "r", "gpu")["sharing"]["mps"] == {
        "limits": {"compute": 100}
    }


@pytest.mark.parametrize(
    ("given", "read"),
    [
        ({"memory": "1.5Gi"}, {"memory": 3 * 2**29}),
        ({"memory": "1Pi"}, {"memory": 2**50}),
        ({"memory": "1.5e9"}, {"memory": 1_500_000_000}),
        ({"memory": "40G"}, {"memory": 40 * 10**9}),
        ({"memory": "1500m"}, {"memory": 2}),  # a fraction of a byte rounds up, as Kubernetes rounds a value
        (
            {"memory": 2**30, "compute": "80"},
            {"memory": 2**30, "compute": 80},
        ),  # compute as capacity.requests writes it
    ],
)
def test_mps_limits_take_every_kubernetes_quantity_and_a_quoted_percent(given, read):
    assert config.effective(gpu_limits(given), DRIVER, "r", "gpu")["sharing"]["mps"] == {"limits": read}


@pytest.mark.parametrize(
    ("limits", "needle"),
    [
        ({}, r"sharing\.mps\.limits is empty"),
        ([], r"sharing\.mps\.limits must be a mapping"),
        ({"memory": "lots"}, r"sharing\.mps\.limits\.memory: 'lots' is not a quantity"),
        ({"memory": "0Gi"}, r"sharing\.mps\.limits\.memory: 0 is no limit"),
        ({"compute": 101}, r"sharing\.mps\.limits\.compute: 101 must be an integer percent in 1\.\.100"),
        ({"compute": 0}, r"sharing\.mps\.limits\.compute: 0 must be"),
        ({"compute": True}, r"sharing\.mps\.limits\.compute: True must be"),
        ({"compute": "50%"}, r"sharing\.mps\.limits\.compute: '50%' must be"),
        ({"compute": "1e2"}, r"sharing\.mps\.limits\.compute: '1e2' must be"),
        ({"compute": 80.0}, r"sharing\.mps\.limits\.compute: 80\.0 must be"),
        ({"memory": "-1Gi"}, r"sharing\.mps\.limits\.memory: '-1Gi' is negative"),
        ({"memory": "1.5Gb"}, r"sharing\.mps\.limits\.memory: '1\.5Gb' is not a quantity"),
        ({"memory": "1Gi", "cores": 2}, r"sharing\.mps\.limits: unknown field\(s\) cores"),
    ],
)
def test_bad_mps_limits_name_the_field(limits, needle):
    with pytest.raises(config.ConfigError, match=needle):
        config.effective(gpu_limits(limits), DRIVER, "r", "gpu")
