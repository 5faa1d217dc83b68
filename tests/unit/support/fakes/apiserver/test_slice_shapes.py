# SPDX-License-Identifier: Apache-2.0
"""The fake API server's rules for where a pool's counter sets may be, per minor, its Status causes, and a
control-plane upgrade under running clients (``FakeApiServer.upgrade``)."""

from __future__ import annotations

import json
import urllib.request

import pytest

from ansible_collections.aligned.dra.tests.support.fakes.apiserver import FakeApiServer
from ansible_collections.aligned.dra.tests.support.sites.apiserver_objects import NODE, post, slice_obj

SLICES = "/apis/resource.k8s.io/v1/resourceslices"
PARTITIONABLE = {"DRAPartitionableDevices": True}
COUNTERS = [{"name": "gpu-0-counters", "counters": {"memory-slice-0": {"value": "1"}}}]
CONSUMES = [{"counterSet": "gpu-0-counters", "counters": {"memory-slice-0": {"value": "1"}}}]


def consuming(name: str = "s-devices", **spec: object) -> dict:
    body = slice_obj(name, devices=1, **spec)
    body["spec"]["devices"][0]["consumesCounters"] = CONSUMES
    return body


def version(api: FakeApiServer) -> str:
    with urllib.request.urlopen(api.url + "/version") as answer:
        return json.load(answer)["gitVersion"]


def test_on_1_34_a_device_consumes_a_set_of_its_own_slice():
    with FakeApiServer("1.34", gates=PARTITIONABLE) as api:
        api.create(NODE)
        code, answer = post(api, SLICES, consuming())  # the set is in another slice: the 1.35 shape
        assert (code, answer["reason"]) == (422, "Invalid")
        assert answer["details"]["causes"] == [
            {
                "reason": "FieldValueInvalid",
                "message": 'Invalid value: "gpu-0-counters": must reference a counterSet defined in the '
                "ResourceSlice sharedCounters",
                "field": "spec.devices[0].consumesCounters[0].counterSet",
            }
        ]
        assert (answer["details"]["kind"], answer["details"]["group"]) == ("ResourceSlice", "resource.k8s.io")
        assert post(api, SLICES, consuming(sharedCounters=COUNTERS))[0] == 201  # together: the 1.34 shape


@pytest.mark.parametrize("minor", ["1.35", "1.36"])
def test_from_1_35_a_slice_has_counter_sets_or_devices_never_both(minor):
    with FakeApiServer(minor, gates=PARTITIONABLE) as api:
        api.create(NODE)
        code, answer = post(api, SLICES, consuming(sharedCounters=COUNTERS))
        assert code == 422
        assert answer["details"]["causes"] == [
            {
                "reason": "FieldValueInvalid",
                "message": 'Invalid value: "": only one of `sharedCounters` or `devices` is allowed',
                "field": "spec",
            }
        ]
        counters = slice_obj("s-counters", sharedCounters=COUNTERS)
        del counters["spec"]["devices"]
        assert post(api, SLICES, counters)[0] == 201
        assert post(api, SLICES, consuming())[0] == 201  # the set of another slice of the pool


def test_with_the_gate_off_the_fields_are_dropped_never_checked():
    with FakeApiServer("1.35") as api:
        api.create(NODE)
        assert post(api, SLICES, consuming(sharedCounters=COUNTERS))[0] == 201
        assert "sharedCounters" not in api.list("resourceslices")[0]["spec"]


def test_a_duplicate_device_name_is_refused_as_the_real_server_refuses_it(api):
    body = slice_obj(devices=3)
    body["spec"]["devices"][2]["name"] = "gpu-0"
    code, answer = post(api, SLICES, body)
    assert (code, answer["reason"], answer["details"]["name"]) == (422, "Invalid", "node-a-slice")
    assert answer["details"]["causes"] == [
        {"reason": "FieldValueDuplicate", "message": 'Duplicate value: "gpu-0"', "field": "spec.devices[2]"}
    ]
    assert 'spec.devices[2]: Duplicate value: "gpu-0"' in answer["message"]


def test_an_upgrade_serves_the_new_minor_and_keeps_what_is_stored():
    with FakeApiServer("1.34", gates=PARTITIONABLE) as api:
        api.create(NODE)
        assert post(api, SLICES, consuming(sharedCounters=COUNTERS))[0] == 201
        assert version(api) == "v1.34.0"
        api.upgrade("1.35", gates=PARTITIONABLE)
        assert version(api) == "v1.35.0" and api.gates["DRAPartitionableDevices"] is True
        assert api.gates["DRADeviceTaints"] is False  # the new minor's defaults otherwise
        assert len(api.list("resourceslices")) == 1  # stored in the old shape, never rewritten
        assert post(api, SLICES, consuming("s-again", sharedCounters=COUNTERS))[0] == 422
        api.upgrade("1.36")
        assert api.gates["DRADeviceTaints"] is True
        with pytest.raises(ValueError, match="not served"):
            api.upgrade("1.99")
        with pytest.raises(ValueError, match="unknown feature gate"):
            api.upgrade("1.36", gates={"NoSuchGate": True})
        assert api.minor == "1.36"
