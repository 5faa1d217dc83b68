# SPDX-License-Identifier: Apache-2.0
"""The committed gRPC code is what grpcio-tools makes of the committed .proto files; field numbers are the wire's."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
TOOL = REPO / "driver" / "tools" / "generate_protos.py"


def test_generated_code_is_up_to_date(tmp_path):
    spec = importlib.util.spec_from_file_location("generate_protos", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fresh = module.generate(tmp_path)
    assert len(fresh) == 8
    for path in fresh:
        committed = REPO / "driver" / "aligned_dra_driver" / "kubelet" / "proto" / path.name
        assert committed.read_text() == path.read_text(), f"{committed} is stale: run {TOOL}"


def test_wire_names_and_field_numbers():
    from aligned_dra_driver.kubelet.proto import dra_v1_pb2, dra_v1beta1_pb2, health_v1alpha1_pb2, registration_pb2

    assert dra_v1_pb2.DESCRIPTOR.package == "k8s.io.kubelet.pkg.apis.dra.v1"
    assert dra_v1beta1_pb2.DESCRIPTOR.package == "k8s.io.kubelet.pkg.apis.dra.v1beta1"
    assert dra_v1_pb2.DESCRIPTOR.services_by_name["DRAPlugin"].full_name == "k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin"
    fields = {f.name: f.number for f in dra_v1_pb2.Device.DESCRIPTOR.fields}
    assert fields == {"request_names": 1, "pool_name": 2, "device_name": 3, "cdi_device_ids": 4, "share_id": 5}
    assert "share_id" not in {f.name for f in dra_v1beta1_pb2.Device.DESCRIPTOR.fields}
    assert {f.name: f.number for f in dra_v1_pb2.Claim.DESCRIPTOR.fields} == {"namespace": 1, "uid": 2, "name": 3}
    assert {f.name: f.number for f in dra_v1_pb2.NodePrepareResourceResponse.DESCRIPTOR.fields} == {
        "devices": 1,
        "error": 2,
    }
    assert {f.name: f.number for f in registration_pb2.PluginInfo.DESCRIPTOR.fields} == {
        "type": 1,
        "name": 2,
        "endpoint": 3,
        "supported_versions": 4,
    }
    assert registration_pb2.DESCRIPTOR.services_by_name["Registration"].full_name == "pluginregistration.Registration"
    health = {f.name: f.number for f in health_v1alpha1_pb2.DeviceHealth.DESCRIPTOR.fields}
    assert health == {
        "device": 1,
        "health": 2,
        "last_updated_time": 3,
        "health_check_timeout_seconds": 4,
        "message": 5,
    }
    assert health_v1alpha1_pb2.HealthStatus.Value("UNHEALTHY") == 2
    # a v1 answer decodes as the kubelet's v1beta1 answer, without the share ID
    answer = dra_v1_pb2.Device(pool_name="p", device_name="d", cdi_device_ids=["a/b=c"], share_id="s")
    beta = dra_v1beta1_pb2.Device.FromString(answer.SerializeToString())
    assert (beta.pool_name, beta.device_name, list(beta.cdi_device_ids)) == ("p", "d", ["a/b=c"])
