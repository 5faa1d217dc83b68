# SPDX-License-Identifier: Apache-2.0
"""Kubernetes minors and DRA feature gates: defaults per minor, site overrides, gated fields and CEL functions."""

from __future__ import annotations

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.dra import gates as dra_gates
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra


def test_minor_parsing():
    assert dra_gates.minor_of("v1.36.2") == "1.36"
    assert dra_gates.minor_of("1.34") == "1.34"
    with pytest.raises(dra.DeviceModelError, match="supported minors"):
        dra_gates.minor_of("1.33")
    with pytest.raises(dra.DeviceModelError, match="form 1.N"):
        dra_gates.minor_of("latest")


def test_gates_follow_minor_and_overrides():
    assert dra_gates.gate_enabled("DRAConsumableCapacity", "1.36")
    assert not dra_gates.gate_enabled("DRAConsumableCapacity", "1.35")
    assert dra_gates.gate_enabled("DRAConsumableCapacity", "1.35", {"DRAConsumableCapacity": True})
    assert not dra_gates.gate_enabled("DRAPrioritizedList", "1.37", {"DRAPrioritizedList": False})
    with pytest.raises(dra.DeviceModelError, match="unknown feature gate"):
        dra_gates.gate_enabled("NoSuchGate", "1.36")


def test_gated_fields_are_found_in_templates():
    template = {
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {"name": "a", "exactly": {"deviceClassName": "c"}},
                        {"name": "b", "firstAvailable": [{"name": "x", "deviceClassName": "c"}]},
                        {"name": "c", "exactly": {"deviceClassName": "c", "capacity": {"requests": {"memory": "1Gi"}}}},
                    ],
                    "constraints": [{"distinctAttribute": "dra.aligned.dev/uuid"}],
                }
            }
        }
    }
    found = dra_gates.gated_fields(template)
    assert ("spec.spec.devices.requests[1].firstAvailable", "DRAPrioritizedList") in found
    assert ("spec.spec.devices.requests[2].exactly.capacity", "DRAConsumableCapacity") in found
    assert ("spec.spec.devices.constraints[0].distinctAttribute", "DRAConsumableCapacity") in found
    assert len(found) == 3
    assert len(dra_gates.fields_disabled(template, "1.35")) == 2
    assert dra_gates.fields_disabled(template, "1.36") == []


def test_includes_in_a_selector_needs_the_gate():
    cls = {
        "kind": "DeviceClass",
        "spec": {
            "selectors": [{"cel": {"expression": 'device.attributes["resource.kubernetes.io"].numaNode.includes(0)'}}]
        },
    }
    assert dra_gates.fields_disabled(cls, "1.36") == [
        "spec.selectors[0].cel.expression calls includes(), which needs feature gate DRAListTypeAttributes, "
        "off on Kubernetes 1.36"
    ]
    assert dra_gates.fields_disabled(cls, "1.36", {"DRAListTypeAttributes": True}) == []


def test_gpus_are_shared_where_consumable_capacity_is_on():
    assert [dra_gates.shares_gpus(m) for m in dra_gates.SUPPORTED_MINORS] == [False, False, True, True]
    assert dra_gates.shares_gpus("1.34", {"DRAConsumableCapacity": True}) is True
    assert dra_gates.shares_gpus("v1.36.1", {"DRAConsumableCapacity": False}) is False
    assert dra_gates.shares_gpus(None) is False
