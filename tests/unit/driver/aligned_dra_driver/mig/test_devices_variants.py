# SPDX-License-Identifier: Apache-2.0
"""A GPU whose profiles come in variants of one size (``+me``, ``-me``, ``+me.all``, ``+gfx``: an RTX PRO 6000
Blackwell behind the fake NVML) is published with a name per profile and placement, and the API server (the fake's
ResourceSlice rules: duplicate device names, DNS labels, where counter sets go) takes the whole pool."""

from __future__ import annotations

import pytest
from aligned_dra_driver.devices.publisher import build_slices
from aligned_dra_driver.mig import devices as mig_devices

from ansible_collections.aligned.dra.tests.support.fakes.apiserver.validation import (
    is_dns_label,
    validate_counter_shape,
    validate_resource_slice,
)
from ansible_collections.aligned.dra.tests.support.fakes.nvml import FakeNvml

BUS = "0000:c1:00.0"
GPU = "gpu-0000-c1-00-0"


def published_gpu() -> dict:
    attributes = {
        "resource.kubernetes.io/pcieRoot": {"string": "pci0000:c0"},
        "resource.kubernetes.io/pciBusID": {"string": BUS},
        "dra.aligned.dev/kind": {"string": "gpu"},
        "dra.aligned.dev/vendorID": {"string": "0x10de"},
        "dra.aligned.dev/model": {"string": "RTX PRO 6000"},
    }
    return {"name": GPU, "attributes": attributes, "capacity": {"memory": {"value": "96Gi"}}}


@pytest.fixture
def scan(tmp_path):
    nvml = FakeNvml(procfs=tmp_path / "proc")
    nvml.add_gpu(BUS, model="RTX-PRO-6000-96GB")
    nvml.enable_mig(BUS)
    scanner = mig_devices.MigScanner("dynamic", None, str(tmp_path), loader=lambda: nvml)
    return scanner.apply([published_gpu()])


def test_every_variant_gets_names_of_its_own(scan):
    devices, sets = scan
    names = [d["name"] for d in devices]
    assert len(names) == len(set(names)) and all(is_dns_label(n) for n in names)
    profiles = {d["attributes"]["dra.aligned.dev/profile"]["string"] for d in devices if d["name"] != GPU}
    assert {"1g.24gb", "1g.24gb+me", "1g.24gb-me", "1g.24gb+me.all", "1g.24gb+gfx", "2g.48gb-me"} <= profiles
    by_profile = {}
    for device in devices[:-1]:
        profile = device["attributes"]["dra.aligned.dev/profile"]["string"]
        by_profile.setdefault(profile, set()).add(device["name"].rsplit("-", 1)[0])
    tokens = [next(iter(stems)) for stems in by_profile.values()]
    assert all(len(stems) == 1 for stems in by_profile.values()) and len(tokens) == len(set(tokens))
    assert devices[-1]["name"] == GPU  # Blackwell changes MIG mode live: the GPU whole is published, last
    assert [s["name"] for s in sets] == [f"{GPU}-counters"]


@pytest.mark.parametrize("minor", ["1.34", "1.35", "1.36"])
def test_the_api_server_takes_the_pool_in_each_minor_s_shape(scan, minor):
    devices, sets = scan
    errors: list[str] = []
    for item in build_slices("node-1", "dra.aligned.dev", devices, 1, "uid-1", sets, minor):
        validate_resource_slice(item, minor, errors)
        validate_counter_shape(item, minor, errors)
    assert errors == []
