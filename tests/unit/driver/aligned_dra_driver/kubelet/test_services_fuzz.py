# SPDX-License-Identifier: Apache-2.0
"""The DRA gRPC handlers (v1, v1beta1, registration) under 10,000 generated requests, in-process.

Requests carry well-formed and malformed claim references (UIDs, namespaces,
names: empty, oversized, path-like, other alphabets), duplicates and empty lists;
the claims they name may have allocation results and opaque configuration of any
shape. Every call must answer every claim, never raise; a claim answered with an
error leaves no CDI spec, no checkpoint entry and no status write; what was
prepared is exactly what the answers say; Unprepare brings everything back.

The handlers are the servicers the server registers, called directly (the wire
and malformed bytes are tests/integration/driver/aligned_dra_driver/kubelet/test_grpc_robustness.py);
the API server is an in-memory double so that 10,000 examples take seconds.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import tempfile
import uuid
from pathlib import Path

import pytest
from aligned_dra_driver.devices.inventory import Options
from aligned_dra_driver.kube import ApiError
from aligned_dra_driver.kubelet import driver as drv
from aligned_dra_driver.kubelet import services as server
from aligned_dra_driver.kubelet.proto import (
    dra_v1_pb2,
    dra_v1_pb2_grpc,
    dra_v1beta1_pb2,
    dra_v1beta1_pb2_grpc,
    registration_pb2,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.aligned.dra.tests.support.fuzzing import profiles as fuzz_profiles
from ansible_collections.aligned.dra.tests.support.harnesses import driver as h

EXAMPLES = fuzz_profiles.examples(10000)
NOT_FOUND = object()


class ClaimStore:
    """Test double of the driver's Kube: claims from a dict (deep copies, like JSON from a server), 404 else."""

    def __init__(self) -> None:
        self.claims: dict[tuple[str, str], dict] = {}
        self.statuses: list[tuple[str, str, list]] = []
        self.cleared: list[tuple[str, str, str]] = []

    def get_claim(self, namespace: str, name: str, deadline: float | None = None) -> dict:
        claim = self.claims.get((namespace, name), NOT_FOUND)
        if claim is NOT_FOUND:
            raise ApiError(404, f'404 resourceclaims "{name}" not found')
        return copy.deepcopy(claim)

    def apply_claim_status(self, namespace: str, name: str, devices: list, uid: str | None = None) -> dict:
        self.statuses.append((namespace, name, devices))
        return {}


class StatusRecorder:
    """Test double of the driver's status queue: what it was asked to write, in order, at once."""

    def __init__(self, kube: ClaimStore) -> None:
        self.kube = kube

    def apply(self, namespace: str, name: str, uid: str, devices: list) -> None:
        self.kube.statuses.append((namespace, name, devices))

    def clear(self, namespace: str, name: str, uid: str) -> None:
        self.kube.cleared.append((namespace, name, uid))


def stored(name, uid, results, config=None, namespace="default"):
    claim = h.claim_object(name, results, config, namespace=namespace)
    claim["metadata"]["uid"] = uid
    return claim


GOOD = {  # name -> (uid, claim): claims that prepare
    "gpu": str(uuid.UUID(int=1)),
    "nic": str(uuid.UUID(int=2)),
    "both": str(uuid.UUID(int=3)),
}


@pytest.fixture(scope="module")
def world():
    root = h.memory_tmp()
    node = h.NodeTree.build(root)
    # the CDI and state directories on a tmpfs where there is one (as /var/run/cdi is): 10,000 examples
    # of file renames on a busy disk would take minutes
    shm = Path(tempfile.mkdtemp(prefix="adf", dir="/dev/shm")) if os.path.isdir("/dev/shm") else root / "shm"
    node.cdi, node.state = shm / "cdi", shm / "state"
    node.cdi.mkdir(parents=True)
    opts = Options(**node.options(durable_checkpoint=False))
    kube = ClaimStore()
    kube.claims[("default", "gpu")] = stored("gpu", GOOD["gpu"], [{"request": "gpu", "device": h.GPU}])
    kube.claims[("default", "nic")] = stored(
        "nic", GOOD["nic"], [{"request": "nic", "device": h.NIC}], [h.nic_config(interfaceName="net1", mtu=9000)]
    )
    kube.claims[("default", "both")] = stored(
        "both",
        GOOD["both"],
        [{"request": "gpu", "device": h.GPU}, {"request": "nic", "device": h.NIC}],
        [h.nic_config(requests=["nic"], addresses=["10.0.0.2/24"], routes=[{"destination": "10.1.0.0/16"}])],
    )
    driver = drv.Driver(opts, kube, status_queue=StatusRecorder(kube))
    driver.restore()
    driver.rescan()
    servicers = {
        "v1": (dra_v1_pb2, server._dra_servicer(dra_v1_pb2, dra_v1_pb2_grpc, driver, True)),
        "v1beta1": (dra_v1beta1_pb2, server._dra_servicer(dra_v1beta1_pb2, dra_v1beta1_pb2_grpc, driver, False)),
    }
    notified: list[tuple[bool, str]] = []
    registration = server.RegistrationServicer(
        h.DRIVER, "/k/plugins/dra.aligned.dev/dra.sock", list(server.SUPPORTED_VERSIONS), lambda *a: notified.append(a)
    )
    yield {
        "node": node,
        "driver": driver,
        "kube": kube,
        "servicers": servicers,
        "registration": registration,
        "notified": notified,
    }
    shutil.rmtree(root, ignore_errors=True)
    shutil.rmtree(shm, ignore_errors=True)


# -- generated requests --------------------------------------------------------------------------

NOISE = object()
text = st.text(max_size=10)
BAD_UIDS = [
    "",
    "../../etc/passwd",
    "a" * 100_000,
    GOOD["gpu"].upper() + "\n",
    "x",
    "00000000-0000-0000-0000-00000000000",
]
BAD_UIDS += [GOOD["gpu"] + "/..", "\x00", "-" * 36, GOOD["gpu"].replace("0", "\u0660")]
BAD_NAMES = ["", "Default", "a" * 254, "a/b", "..", "default\n", "ns_1", "-a", "\u00e9", "a" * 100_000]
UNKNOWN_UID = str(uuid.UUID(int=99))
uid_pool = st.sampled_from([*GOOD.values(), UNKNOWN_UID, str(uuid.UUID(int=50)), *BAD_UIDS, NOISE])
name_pool = st.sampled_from([*GOOD, "generated", "absent", *BAD_NAMES, NOISE])
ns_pool = st.sampled_from(["default", "other", *BAD_NAMES, NOISE])
kinds = st.sampled_from(["exact", "mixed"])
json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=6), st.lists, max_leaves=3)
config_values = st.sampled_from(
    ["net1", "lo", "net1\n", "x" * 16, 9000, 67, "9000", True, None, ["10.0.0.2/24"], ["10.0.0.2"], ["fe80::1%e/64"]]
    + [[{"destination": "10.1.0.0/16", "gateway": "fd00::1"}], [{"destination": 5}], [{"destination": "x"}], [], {}]
)
field_names = st.sampled_from(["interfaceName", "mtu", "addresses", "routes", "moveToPod", "sharing", "bogus"])


COUNT = [st.integers(0, n) for n in range(8)] + [st.integers(0, 8), st.integers(0, 9)]
RESULT_DRIVERS = st.sampled_from([h.DRIVER, h.DRIVER, "other.example.com"])
RESULT_POOLS = st.sampled_from([h.NODE, h.NODE, "node-b", 7])
RESULT_DEVICES = st.sampled_from([h.GPU, h.NIC, "gpu-0000-99-00-0", "", ["x"], None])
RESULT_REQUESTS = st.sampled_from(["gpu", "nic", "nic/sub", "", "a b", 3, "Nic"])
SHARE_IDS = st.sampled_from([str(uuid.UUID(int=7)), "x/../y", "", 5])
API_VERSIONS = st.sampled_from(["dra.aligned.dev/v1alpha1", "v1"])
KINDS = st.sampled_from(["NicConfig", "GpuConfig", "Other"])
SOURCES = st.sampled_from(["FromClass", "FromClaim"])
CONFIG_REQUESTS = st.sampled_from([["nic"], ["gpu"], [], "nic", [3]])
BAD_STATUSES = st.sampled_from([{}, {"allocation": "x"}, {"allocation": {"devices": []}}])
EXACT_NAMES = st.sampled_from([*GOOD, "generated"])
VERSIONS = st.sampled_from(["v1", "v1beta1"])
REGISTRATION_ERRORS = st.sampled_from(["", "plugin rejected", "x" * 100_000, "\n\x00\u202e", NOISE])
BOOLS = st.booleans()


@st.composite
def allocation_results(draw):
    """Entries of status.allocation.devices.results, well-formed or not."""
    entries = []
    for _index in range(draw(COUNT[3])):
        if draw(COUNT[9]) == 0:
            entries.append(draw(json_values))
            continue
        entry = {
            "driver": draw(RESULT_DRIVERS),
            "pool": draw(RESULT_POOLS),
            "device": draw(RESULT_DEVICES),
            "request": draw(RESULT_REQUESTS),
        }
        if draw(BOOLS):
            entry["shareID"] = draw(SHARE_IDS)
        entries.append(entry)
    return entries


@st.composite
def configs(draw):
    entries = []
    for _index in range(draw(COUNT[2])):
        if draw(COUNT[9]) == 0:
            entries.append(draw(json_values))
            continue
        parameters = {
            "apiVersion": draw(API_VERSIONS),
            "kind": draw(KINDS),
        }
        for _field in range(draw(COUNT[3])):
            parameters[draw(field_names)] = draw(config_values)
        entry = {
            "source": draw(SOURCES),
            "opaque": {"driver": h.DRIVER, "parameters": parameters},
        }
        if draw(BOOLS):
            entry["requests"] = draw(CONFIG_REQUESTS)
        entries.append(entry)
    return entries


RESULTS = allocation_results()
CONFIGS = configs()


@st.composite
def requests(draw):
    generated = None
    if draw(COUNT[2]) == 0:  # a claim object of any shape under the name "generated"
        generated = stored("generated", str(uuid.UUID(int=40)), [])
        generated["status"]["allocation"]["devices"]["results"] = draw(RESULTS)
        generated["status"]["allocation"]["devices"]["config"] = draw(CONFIGS)
        if draw(COUNT[9]) == 0:
            generated["status"] = draw(BAD_STATUSES)
    refs = []
    for _index in range(draw(COUNT[4])):
        kind = draw(kinds)
        if kind == "exact":
            name = draw(EXACT_NAMES)
            uid = GOOD.get(name, str(uuid.UUID(int=40)))
            refs.append(("default", uid, name))
            continue
        values = []
        for pool in (ns_pool, uid_pool, name_pool):
            value = draw(pool)
            values.append(draw(text) if value is NOISE else value)
        refs.append(tuple(values))
    if refs and draw(COUNT[4]) == 0:  # a duplicate
        refs.insert(draw(COUNT[len(refs)]), refs[draw(COUNT[len(refs) - 1])])
    status = draw(REGISTRATION_ERRORS)
    registration = (draw(BOOLS), draw(text) if status is NOISE else status)
    return {"version": draw(VERSIONS), "refs": refs, "generated": generated, "registration": registration}


# -- the checks ------------------------------------------------------------------------------------


def files(node) -> set[str]:
    return {p.name for p in node.cdi.iterdir()}


def on_disk(node) -> set[str]:
    path = node.state / "checkpoint.json"
    return set(json.loads(path.read_text())["claims"]) if path.exists() else set()


def spec_name(uid: str) -> str:
    return f"aligned.dev-claim_{uid}.json"


def call(world, version, method, refs):
    pb2, servicer = world["servicers"][version]
    request_type = getattr(pb2, f"{method}Request")
    request = request_type(claims=[pb2.Claim(namespace=ns, uid=uid, name=name) for ns, uid, name in refs])
    response = getattr(servicer, method)(request, None)
    response.SerializeToString()  # the answer goes on the wire as it is
    return response


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)
@given(case=requests())
def test_handlers_answer_every_claim_and_leave_no_partial_state(world, case):
    node, driver, kube = world["node"], world["driver"], world["kube"]
    kube.statuses.clear()
    # registration: the kubelet's status is passed on with its error cut to 1 KiB; GetInfo never changes
    registered, error = case["registration"]
    world["notified"].clear()
    reply = world["registration"].NotifyRegistrationStatus(
        registration_pb2.RegistrationStatus(plugin_registered=registered, error=error), None
    )
    assert reply == registration_pb2.RegistrationStatusResponse()
    ((got_registered, got_error),) = world["notified"]
    assert got_registered == registered and got_error == (error if len(error) <= 1024 else error[:1024] + "...")
    info = world["registration"].GetInfo(registration_pb2.InfoRequest(), None)
    assert (info.type, info.name, list(info.supported_versions)) == ("DRAPlugin", h.DRIVER, server.SUPPORTED_VERSIONS)
    if case["generated"] is not None:
        kube.claims[("default", "generated")] = case["generated"]
    try:
        refs = case["refs"]
        uids = {uid for _ns, uid, _name in refs}
        first = {}
        for ref in refs:
            first.setdefault(ref[1], ref)
        answer = call(world, case["version"], "NodePrepareResources", refs)
        assert set(answer.claims) == uids
        prepared = {uid for uid in uids if not answer.claims[uid].error}
        for uid in prepared:  # exactly the well-formed references of claims that exist, by their first entry
            ns, _uid, name = first[uid]
            assert (ns, name) in kube.claims and kube.claims[(ns, name)]["metadata"]["uid"] == uid
            devices = kube.claims[(ns, name)]["status"]["allocation"].get("devices") or {}
            ours = [r for r in devices.get("results") or [] if r.get("driver") == h.DRIVER]
            assert len(answer.claims[uid].devices) == len(ours)
        for name, uid in GOOD.items():
            if first.get(uid) == ("default", uid, name):
                assert uid in prepared, answer.claims[uid].error
        assert set(driver.checkpoint.claims) == prepared == on_disk(node)
        assert files(node) == {spec_name(uid) for uid in prepared}
        statuses = {name for _ns, name, _devices in kube.statuses}
        assert statuses <= {first[uid][2] for uid in prepared}
        for uid in uids - prepared:
            assert answer.claims[uid].error and len(answer.claims[uid].error) < 2000
        undone = call(world, case["version"], "NodeUnprepareResources", refs)
        assert set(undone.claims) == uids
        for uid in prepared:
            assert undone.claims[uid].error == ""
        assert driver.checkpoint.claims == {} and on_disk(node) == set() and files(node) == set()
    finally:
        for uid, entry in list(driver.checkpoint.claims.items()):  # back to the start for the next example
            driver.unprepare([(entry["namespace"], uid, entry["name"])])
        kube.claims.pop(("default", "generated"), None)


def test_the_good_claims_prepare_in_both_versions(world):
    """The oracle's base: the claims the generator calls good do prepare (the checks are not too strict)."""
    for version in ("v1", "v1beta1"):
        refs = [("default", uid, name) for name, uid in GOOD.items()]
        answer = call(world, version, "NodePrepareResources", refs)
        assert all(answer.claims[uid].error == "" and answer.claims[uid].devices for _ns, uid, _n in refs)
        assert len(files(world["node"])) == 3
        call(world, version, "NodeUnprepareResources", refs)
        assert files(world["node"]) == set()


@pytest.mark.parametrize(
    ("ref", "needle"),
    [
        (("default", "../../../etc/x", "gpu"), "is not a Kubernetes UID"),
        (("default", GOOD["gpu"] + "\n", "gpu"), "is not a Kubernetes UID"),
        (("Default", GOOD["gpu"], "gpu"), "is not a DNS label"),
        (("default", GOOD["gpu"], "gpu\n"), "is not a DNS subdomain"),
        (("default", GOOD["gpu"], "a" * 100_000), "(100000 characters)"),
        (("default", "\x00", "gpu"), "is not a Kubernetes UID"),
    ],
)
def test_malformed_references_are_refused_by_name_in_prepare_and_unprepare(world, ref, needle):
    answer = call(world, "v1", "NodePrepareResources", [ref])
    assert needle in answer.claims[ref[1]].error and len(answer.claims[ref[1]].error) < 1000
    undone = call(world, "v1", "NodeUnprepareResources", [ref])
    assert needle in undone.claims[ref[1]].error
    assert files(world["node"]) == set() and world["driver"].checkpoint.claims == {}


def test_a_duplicate_with_a_malformed_name_does_not_hide_a_prepared_claim(world):
    """The first entry of a UID decides: a later malformed one must not answer 'error' for a prepared claim."""
    good = ("default", GOOD["gpu"], "gpu")
    answer = call(world, "v1", "NodePrepareResources", [good, ("default", GOOD["gpu"], "bad/name")])
    assert answer.claims[GOOD["gpu"]].error == ""
    assert set(world["driver"].checkpoint.claims) == {GOOD["gpu"]}
    call(world, "v1", "NodeUnprepareResources", [good])


@pytest.mark.parametrize(
    ("results", "config", "needle"),
    [
        ([{"request": "nic", "device": h.NIC, "shareID": "../x"}], None, "shareID '../x' is not a UID"),
        ([{"request": "a b", "device": h.GPU}], None, "is not a request name"),
        ([{"request": "gpu", "device": ["x"]}], None, "is not on this node"),
        (
            [{"request": "nic", "device": h.NIC}],
            [h.nic_config(routes=[{"destination": 5, "gateway": 7}])],
            "destination 5 is not a network",
        ),
        (
            [{"request": "nic", "device": h.NIC}],
            [h.nic_config(routes=[{"destination": "10.1.0.0/16", "gateway": "fd00::1"}])],
            "gateway fd00::1 is IPv6",
        ),
        ([{"request": "nic", "device": h.NIC}], [h.nic_config(interfaceName="net1\n")], "interface name"),
        ([{"request": "nic", "device": h.NIC}], [h.nic_config(interfaceName="lo")], "loopback"),
        ([{"request": "nic", "device": h.NIC}], [h.nic_config(addresses=["fe80::1%eth0/64"])], "CIDR"),
        ([{"request": "nic", "device": h.NIC}], ["oops"], "must be an object"),
    ],
)
def test_bad_allocations_fail_their_claim_with_a_clear_message(world, results, config, needle):
    """Each was an internal error (TypeError, AttributeError) or passed a value the hook or the kernel refuses."""
    kube = world["kube"]
    claim = stored("generated", str(uuid.UUID(int=40)), results, config)
    kube.claims[("default", "generated")] = claim
    try:
        answer = call(world, "v1", "NodePrepareResources", [("default", str(uuid.UUID(int=40)), "generated")])
        error = answer.claims[str(uuid.UUID(int=40))].error
        assert needle in error and "internal error" not in error, error
        assert files(world["node"]) == set()
    finally:
        kube.claims.pop(("default", "generated"))


def test_a_failure_outside_the_per_claim_answers_is_internal_with_a_message(world, monkeypatch):
    import grpc

    class Context:
        def abort(self, code, details):
            self.code, self.details = code, details
            raise RuntimeError("aborted")

    def broken(claims, budget=None):
        raise ZeroDivisionError("division by zero")

    pb2, servicer = world["servicers"]["v1"]
    monkeypatch.setattr(world["driver"], "prepare", broken)
    context = Context()
    with pytest.raises(RuntimeError, match="aborted"):
        servicer.NodePrepareResources(pb2.NodePrepareResourcesRequest(), context)
    assert context.code == grpc.StatusCode.INTERNAL
    assert context.details == "NodePrepareResources: ZeroDivisionError: division by zero"
