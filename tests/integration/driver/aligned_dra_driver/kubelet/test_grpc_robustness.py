# SPDX-License-Identifier: Apache-2.0
"""Malformed protobuf bytes on the real Unix sockets of one driver process.

Every method (registration, DRA v1 and v1beta1, the health stream) gets random
bytes, truncated valid requests, wrong wire types, huge length prefixes, deep
nesting, invalid UTF-8 in string fields and an oversized message, through a raw
channel that sends the bytes as they are. The server must answer each with a
status code (OK when the bytes happen to parse, INTERNAL or INVALID_ARGUMENT
when they do not, RESOURCE_EXHAUSTED above the message size limit), never
UNKNOWN (an exception in a handler) or UNAVAILABLE (a dead process); it must
keep serving (a valid Prepare afterwards succeeds), and nothing may change on
disk.
"""

from __future__ import annotations

import grpc
import pytest
from aligned_dra_driver.kubelet.proto import dra_v1_pb2, registration_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.aligned.dra.tests.support.harnesses import driver as h

DRA = {
    "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources": "prepare",
    "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodeUnprepareResources": "unprepare",
    "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodePrepareResources": "prepare",
    "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodeUnprepareResources": "unprepare",
}
REGISTRATION = ["/pluginregistration.Registration/GetInfo", "/pluginregistration.Registration/NotifyRegistrationStatus"]
HEALTH = "/v1alpha1.DRAResourceHealth/NodeWatchResources"
ACCEPTED = {
    grpc.StatusCode.OK,
    grpc.StatusCode.INTERNAL,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
}
EXAMPLES_PER_METHOD = 200


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


VALID = dra_v1_pb2.NodePrepareResourcesRequest(
    claims=[dra_v1_pb2.Claim(namespace="default", uid="00000000-0000-0000-0000-000000000001", name="c")]
).SerializeToString()
STRUCTURED = (
    [
        VALID[:cut]
        for cut in range(1, len(VALID))  # every truncation of a valid request
    ]
    + [
        b"\x0a" + varint(2**31) + b"\x0a\x01x",  # a length prefix far beyond the message
        b"\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",  # a ten-byte varint length
        b"\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff",  # a varint that never ends
        b"\x0b" + VALID[1:],  # field 1 as a start-group
        b"\x08\x01" + VALID,  # field 1 as a varint, then as a message
        b"\x0c",  # an end-group with no start
        b"\x0f\x00",  # wire type 7 does not exist
        b"\x00\x00",  # field number 0
        b"\x0a\x05\x12\x03\xff\xfe\xfd",  # a claim whose uid is not UTF-8
        b"\x0a\x80\x01" * 120,  # nesting deeper than the parser's limit, truncated
        b"\x0a" + varint(2**32 + 5) * 3,
        b"\x12" + varint(4) + b"\xc3\x28ab",  # invalid UTF-8 in field 2 (registration's error string)
        bytes(range(256)),
    ]
)


@pytest.fixture(scope="module")
def driver(module_node, module_api):
    with h.DriverProcess(module_node, module_api, extra=["--health-service"]) as process:
        yield process


@pytest.fixture(scope="module")
def raw(driver):
    dra = driver.channel(driver.dra_socket)
    reg = driver.channel(driver.reg_socket)
    calls = {path: dra.unary_unary(path) for path in DRA}  # no serializers: the bytes go out as they are
    calls.update({path: reg.unary_unary(path) for path in REGISTRATION})
    return calls, dra.unary_stream(HEALTH)


def disk(node) -> tuple[list[str], bytes]:
    checkpoint = node.state / "checkpoint.json"
    return sorted(p.name for p in node.cdi.iterdir()), checkpoint.read_bytes() if checkpoint.exists() else b""


def send(raw, path: str, payload: bytes) -> grpc.StatusCode:
    calls, health = raw
    try:
        if path == HEALTH:
            stream = health(payload, timeout=5)
            try:
                next(stream)
            finally:
                stream.cancel()
        else:
            calls[path](payload, timeout=10)
    except grpc.RpcError as exc:
        if exc.code() == grpc.StatusCode.CANCELLED and path == HEALTH:
            return grpc.StatusCode.OK
        return exc.code()
    return grpc.StatusCode.OK


def assert_serving_and_unchanged(driver, api, node, before):
    assert driver.proc is not None and driver.proc.poll() is None, "the driver process died"
    assert disk(node) == before
    claim = api.create(
        h.claim_object(f"after-{len(api.list('resourceclaims'))}", [{"request": "gpu", "device": h.GPU}])
    )
    ref = h.claim_ref(claim)
    answer = driver.prepare([ref]).claims[ref["uid"]]
    assert answer.error == "" and answer.devices
    assert driver.unprepare([ref]).claims[ref["uid"]].error == ""
    assert disk(node) == before
    info = driver.register()
    assert info.name == h.DRIVER


ALL_METHODS = [*DRA, *REGISTRATION, HEALTH]


@pytest.mark.parametrize("path", ALL_METHODS)
def test_structured_malformed_messages_are_answered_with_a_status(driver, module_api, module_node, raw, path):
    before = disk(module_node)
    seen = {}
    for payload in STRUCTURED:
        code = send(raw, path, payload)
        assert code in ACCEPTED, (payload[:40], code)
        seen[code] = seen.get(code, 0) + 1
    assert grpc.StatusCode.INTERNAL in seen or grpc.StatusCode.INVALID_ARGUMENT in seen, seen
    assert_serving_and_unchanged(driver, module_api, module_node, before)


@pytest.mark.parametrize("path", ALL_METHODS)
def test_random_bytes_are_answered_with_a_status_and_change_nothing(driver, module_api, module_node, raw, path):
    before = disk(module_node)
    codes = []

    @settings(
        max_examples=EXAMPLES_PER_METHOD,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(
        payload=st.one_of(
            st.binary(max_size=200),
            st.tuples(st.sampled_from(STRUCTURED), st.binary(max_size=20)).map(lambda pair: pair[0] + pair[1]),
            st.tuples(st.binary(max_size=20), st.just(VALID)).map(lambda pair: pair[0] + pair[1]),
        )
    )
    def check(payload):
        code = send(raw, path, payload)
        codes.append(code)
        assert code in ACCEPTED, (payload[:40], code)

    check()
    assert len(codes) >= EXAMPLES_PER_METHOD
    assert_serving_and_unchanged(driver, module_api, module_node, before)


def test_a_message_above_the_size_limit_is_refused_and_serving_goes_on(driver, module_api, module_node, raw):
    before = disk(module_node)
    big = dra_v1_pb2.NodePrepareResourcesRequest(
        claims=[dra_v1_pb2.Claim(namespace="default", uid="u" * 1000, name="n") for _index in range(6000)]
    ).SerializeToString()
    assert len(big) > 4 * 2**20  # gRPC's default receive limit
    assert send(raw, "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources", big) == (
        grpc.StatusCode.RESOURCE_EXHAUSTED
    )
    status = registration_pb2.RegistrationStatus(plugin_registered=False, error="x" * (3 * 2**20))
    assert send(raw, REGISTRATION[1], status.SerializeToString()) == grpc.StatusCode.OK
    assert_serving_and_unchanged(driver, module_api, module_node, before)
