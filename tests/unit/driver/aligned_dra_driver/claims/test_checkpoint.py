# SPDX-License-Identifier: Apache-2.0
"""The checkpoint file: round trip, refusal to guess (one line, what to do), the shape the sriov module reads.

Its state directory on a real read-only bind mount is tests/integration/driver/aligned_dra_driver/claims/test_checkpoint.py's.
"""

from __future__ import annotations

import copy
import errno
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from aligned_dra_driver.claims import checkpoint as checkpoint_module
from aligned_dra_driver.claims.checkpoint import PROBE_PREFIX, Checkpoint, CheckpointError
from aligned_dra_driver.fsutil import TMP_SUFFIX

DRIVER = "dra.aligned.dev"
NODE = "node-a"
UID = "0b0e7d5c-1f2a-4c3d-9e8f-0123456789ab"
OTHER_UID = "5f1c2b3a-0000-4000-8000-00000000beef"
SHARE = "9a8b7c6d-1111-4222-8333-444455556666"
DELETE = object()  # mutate(): remove the key
ADDRESS = {"address": "192.168.128.5/21", "broadcast": "192.168.135.255", "metric": 0, "noprefixroute": False}
ROUTE = {
    "destination": "192.168.136.0/21",
    "gateway": "192.168.128.1",
    "metric": 0,
    "source": None,
    "scope": 0,
    "protocol": 4,
    "table": 254,
    "onlink": False,
}


def entry(uid: str = UID, node: str = NODE) -> dict[str, Any]:
    """A checkpoint entry as Prepare writes it: a NIC moved into the pod and a shared GPU with MPS."""
    return {
        "namespace": "default",
        "name": "claim-1.example",
        "devices": [
            {
                "pool": node,
                "device": "nic-0000-1d-00-0",
                "request_names": ["nic"],
                "pci_address": "0000:1d:00.0",
                "kind": "nic",
                "cdi_device_ids": [f"aligned.dev/claim={uid}-nic-0000-1d-00-0"],
                "share_id": None,
                "netdev": {
                    "original_name": "ens1f0",
                    "interface_name": "net1",
                    "original_mtu": 1500,
                    "original_up": True,
                    "original_addresses": [dict(ADDRESS)],
                    "original_routes": [dict(ROUTE)],
                },
            },
            {
                "pool": node,
                "device": "gpu-0000-18-00-0",
                "request_names": ["gpus/a100"],
                "pci_address": "0000:18:00.0",
                "kind": "gpu",
                "cdi_device_ids": [f"aligned.dev/claim={uid}-gpu-0000-18-00-0-{SHARE}", "nvidia.com/gpu=0"],
                "share_id": SHARE,
                "mps": True,
                "share": {"request": {"memory": 10 * 2**30, "compute": 25}, "limit": {"memory": 40 * 2**30}},
            },
            {
                "pool": node,
                "device": "acc-0000-3b-00-0",
                "request_names": [],
                "pci_address": "0000:3b:00.0",
                "kind": "accelerator",
                "cdi_device_ids": [f"aligned.dev/claim={uid}-acc-0000-3b-00-0"],
                "share_id": None,
            },
        ],
        "cdi_spec": {
            "cdiVersion": "0.5.0",
            "kind": "aligned.dev/claim",
            "devices": [
                {"name": f"{uid}-nic-0000-1d-00-0", "containerEdits": {"env": ["ALIGNED_DRA_NIC_0000_1D_00_0=net1"]}},
                {"name": f"{uid}-gpu-0000-18-00-0-{SHARE}", "containerEdits": {"env": ["A=1"]}},
                {"name": f"{uid}-acc-0000-3b-00-0", "containerEdits": {}},
            ],
            "containerEdits": {"env": [f"ALIGNED_DRA_CLAIM_UID={uid}"]},
        },
    }


def document(claims: Any = None, **top: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "version": 1,
        "driver": DRIVER,
        "node": NODE,
        "claims": {UID: entry()} if claims is None else claims,
    }
    if claims is DELETE:
        del data["claims"]
    for key, value in top.items():
        if value is DELETE:
            del data[key]
        else:
            data[key] = value
    return data


def mutate(data: Any, dotted: str, value: Any) -> None:
    """Set (or with DELETE remove) ``a.0.b`` in nested dicts and lists."""
    *parents, last = dotted.split(".")
    for part in parents:
        data = data[int(part)] if isinstance(data, list) else data[part]
    key: Any = int(last) if isinstance(data, list) else last
    if value is DELETE:
        del data[key]
    else:
        data[key] = value


def store(tmp_path: Path) -> Checkpoint:
    return Checkpoint(str(tmp_path), DRIVER, NODE)


def write(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "checkpoint.json"
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


def refused(tmp_path: Path, own: list[str] | tuple[str, ...] = ()) -> str:
    """The message of the CheckpointError load raises: one line, naming the file."""
    checkpoint = store(tmp_path)
    checkpoint.claims = {"kept": {}}
    with pytest.raises(CheckpointError) as info:
        checkpoint.load(own)
    message = str(info.value)
    assert "\n" not in message and "\r" not in message
    assert str(tmp_path / "checkpoint.json") in message
    assert checkpoint.claims == {"kept": {}}  # memory is not touched by a refused load
    return message


# -- round trip ---------------------------------------------------------------------------------


def test_round_trip_and_shape(tmp_path):
    checkpoint = Checkpoint(str(tmp_path / "state"), DRIVER, NODE)
    assert checkpoint.load() == {}
    assert stat.S_IMODE((tmp_path / "state").stat().st_mode) == 0o700
    checkpoint.claims[UID] = entry()
    checkpoint.save()
    data = json.loads((tmp_path / "state" / "checkpoint.json").read_text())
    assert data["claims"][UID]["devices"][0]["pci_address"] == "0000:1d:00.0"  # docs/network.md
    assert data["version"] == 1 and data["node"] == NODE and data["driver"] == DRIVER
    again = Checkpoint(str(tmp_path / "state"), DRIVER, NODE)
    assert again.load() == checkpoint.claims and again.claims == checkpoint.claims
    assert not list((tmp_path / "state").glob(".*tmp"))
    assert oct((tmp_path / "state" / "checkpoint.json").stat().st_mode & 0o777) == "0o600"


def test_a_load_returns_exactly_what_was_stored_unknown_keys_included(tmp_path):
    claims = {UID: entry(), OTHER_UID: entry(OTHER_UID)}
    claims[UID]["added_later"] = {"x": [1, 2]}
    claims[UID]["devices"][0]["vf_index"] = 3
    claims[UID]["cdi_spec"]["annotations"] = {"a": "b"}
    write(tmp_path, document(claims, written_by="0.2.0"))
    assert store(tmp_path).load([UID, OTHER_UID]) == claims
    assert store(tmp_path).load() == claims  # specs of ours are no condition for a good file


def test_an_entry_of_an_earlier_release_without_the_nics_host_state_loads(tmp_path):
    old = entry()
    for key in ("original_up", "original_addresses", "original_routes"):
        del old["devices"][0]["netdev"][key]
    write(tmp_path, document({UID: old}))
    assert store(tmp_path).load([UID]) == {UID: old}


def test_an_entry_of_an_earlier_release_without_the_share_loads_and_saves_without_it(tmp_path):
    old = entry()
    del old["devices"][1]["share"]
    write(tmp_path, document({UID: old}))
    checkpoint = store(tmp_path)
    assert checkpoint.load([UID]) == {UID: old}
    checkpoint.save()
    assert "share" not in json.loads((tmp_path / "checkpoint.json").read_text())["claims"][UID]["devices"][1]


def test_a_share_round_trips_with_only_the_keys_known_and_keys_of_later_releases(tmp_path):
    claims = {UID: entry()}
    claims[UID]["devices"][1]["share"] = {"request": {}, "limit": {"compute": 60, "burst": 1}, "since": "x"}
    checkpoint = store(tmp_path)
    checkpoint.save(claims)
    assert store(tmp_path).load([UID]) == claims


def test_the_nics_still_to_come_back_are_kept_and_the_file_has_no_key_without_them(tmp_path):
    checkpoint = store(tmp_path)
    checkpoint.save({UID: entry()})
    assert "returning" not in json.loads((tmp_path / "checkpoint.json").read_text())  # the shape others read
    netdev = entry()["devices"][0]["netdev"]
    checkpoint.save({}, {"0000:1d:00.0": netdev})
    again = store(tmp_path)
    assert again.load() == {} and again.returning == {"0000:1d:00.0": netdev}


@pytest.mark.parametrize(
    ("returning", "needle"),
    [
        ([], "returning: a list, not an object"),
        ({"eth0": {}}, "returning: key 'eth0' is not a PCI address"),
        ({"0000:1d:00.0": {"original_name": "a/b"}}, "returning[\"0000:1d:00.0\"].original_name: 'a/b' is not"),
        ({"0000:1d:00.0": {"original_name": "e", "interface_name": "n"}}, "original_mtu: missing"),
    ],
)
def test_a_malformed_returning_is_refused_naming_it(tmp_path, returning, needle):
    write(tmp_path, document({}, returning=returning))
    message = refused(tmp_path)
    assert needle in message and "mv " in message, message


MIG = {
    "mode": "dynamic",
    "profile": "1g.10gb",
    "profile_id": 19,
    "placement": {"start": 6, "size": 1},
    "gpu_instance": 13,
    "compute_instance": 0,
    "uuid": None,
}
STARTED = {"pci_address": "0000:18:00.0", "device": "gpu-0000-18-00-0-mig-1g-10gb-6", "profile": "1g.10gb"}


def test_mig_records_started_claims_and_the_boot_round_trip_and_a_commit_drops_the_started(tmp_path):
    claims = {UID: entry()}
    claims[UID]["devices"][1]["mig"] = dict(MIG)
    checkpoint = store(tmp_path)
    checkpoint.mig_started = {OTHER_UID: [dict(STARTED, placement={"start": 0, "size": 2})]}
    checkpoint.boot_id = "b0"
    checkpoint.save(claims)
    again = store(tmp_path)
    assert again.load([UID]) == claims
    assert (again.mig_started, again.boot_id) == (checkpoint.mig_started, "b0")
    checkpoint.save(dict(claims, **{OTHER_UID: entry(OTHER_UID)}))  # the started claim committed in this write
    assert "mig_started" not in json.loads((tmp_path / "checkpoint.json").read_text())


def test_a_checkpoint_of_an_earlier_release_has_no_mig_state_and_saves_without_it(tmp_path):
    write(tmp_path, document({UID: entry()}))
    checkpoint = store(tmp_path)
    checkpoint.load([UID])
    assert (checkpoint.mig_started, checkpoint.boot_id) == ({}, None)
    checkpoint.save()
    assert set(json.loads((tmp_path / "checkpoint.json").read_text())) == {"version", "driver", "node", "claims"}


@pytest.mark.parametrize(
    ("top", "mig", "needle"),
    [
        ({}, dict(MIG, mode="elastic"), ".mig.mode: 'elastic' is not static or dynamic"),
        ({}, dict(MIG, placement={"start": -1, "size": 1}), ".mig.placement.start: -1 is not a memory slice"),
        ({}, dict(MIG, gpu_instance=True), ".mig.gpu_instance: True is not an NVML identifier"),
        ({"boot_id": 7}, None, "boot_id: 7 is not a string"),
        ({"mig_started": {"x": []}}, None, "mig_started: key 'x' is not a Kubernetes UID"),
        ({"mig_started": {UID: [{"pci_address": "18:00"}]}}, None, 'mig_started["' + UID + '"][0].pci_address'),
    ],
)
def test_a_malformed_mig_field_is_refused_naming_it(tmp_path, top, mig, needle):
    claims = {UID: entry()}
    if mig is not None:
        claims[UID]["devices"][1]["mig"] = mig
    write(tmp_path, document(claims, **top))
    message = refused(tmp_path)
    assert needle in message and "mv " in message, message


def test_an_empty_claims_object_loads(tmp_path):
    write(tmp_path, document({}))
    assert store(tmp_path).load([UID]) == {}  # the specs are then removed as stale by the caller


# -- a missing file ------------------------------------------------------------------------------


def test_a_missing_file_without_specs_of_ours_starts_empty(tmp_path):
    checkpoint = Checkpoint(str(tmp_path / "new"), DRIVER, NODE)
    checkpoint.claims = {"stale": {}}
    assert checkpoint.load([]) == {} and checkpoint.claims == {}
    assert (tmp_path / "new").is_dir()


def test_a_missing_file_with_specs_of_ours_is_refused(tmp_path):
    own = [f"{n:08x}-0000-4000-8000-000000000000" for n in range(5)]
    message = refused(tmp_path, own)
    assert "is missing but 5 CDI spec(s) of this driver exist" in message
    assert own[0] in message and own[2] in message and own[3] not in message and "and 2 more" in message
    assert "backup" in message and "delete their specs" in message and "aligned.dev-claim_" in message


def test_a_missing_file_with_one_spec_names_it(tmp_path):
    message = refused(tmp_path, [UID])
    assert f"1 CDI spec(s) of this driver exist (claims {UID})" in message


# -- what is at the path ----------------------------------------------------------------------


def test_a_dangling_symlink_is_refused(tmp_path):
    # A relative target: the message cuts a long one, and tmp_path's length varies (xdist workers).
    (tmp_path / "checkpoint.json").symlink_to("gone.json")
    message = refused(tmp_path)
    assert "symbolic link" in message and "does not exist" in message and "gone.json" in message


def test_a_symlink_to_a_valid_file_is_refused(tmp_path):
    (tmp_path / "real.json").write_text(json.dumps(document()))
    (tmp_path / "checkpoint.json").symlink_to(tmp_path / "real.json")
    message = refused(tmp_path, [UID])
    assert "symbolic link" in message and "regular file" in message and "does not exist" not in message
    assert "1 CDI spec(s)" in message  # moving it away alone would be refused next


def test_a_directory_in_its_place_is_refused(tmp_path):
    (tmp_path / "checkpoint.json").mkdir()
    message = refused(tmp_path)
    assert "is a directory" in message and "mv " in message


def test_a_fifo_in_its_place_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "checkpoint.json")
    assert "not a regular file" in refused(tmp_path)


@pytest.mark.parametrize(
    ("error", "needle"),
    [
        (PermissionError(errno.EACCES, "Permission denied"), "EACCES: Permission denied"),
        (OSError(errno.EIO, "Input/output error"), "EIO: Input/output error"),
    ],
)
def test_an_unreadable_file_is_refused(tmp_path, monkeypatch, error, needle):
    write(tmp_path, document())

    def failing_open(*args: Any, **kwargs: Any) -> Any:
        raise error

    monkeypatch.setattr(checkpoint_module, "open", failing_open, raising=False)
    message = refused(tmp_path)
    assert "cannot be read" in message and needle in message


def test_a_failing_lstat_is_refused(tmp_path, monkeypatch):
    real_lstat = os.lstat

    def failing_lstat(path: Any, *args: Any, **kwargs: Any) -> Any:
        if str(path).endswith("checkpoint.json"):
            raise OSError(errno.EIO, "Input/output error")
        return real_lstat(path, *args, **kwargs)

    monkeypatch.setattr(checkpoint_module.os, "lstat", failing_lstat)
    assert "cannot be read (EIO: Input/output error)" in refused(tmp_path)


def test_a_state_directory_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "state").write_text("")
    checkpoint = Checkpoint(str(tmp_path / "state"), DRIVER, NODE)
    with pytest.raises(CheckpointError, match="state directory .* cannot be created") as info:
        checkpoint.load()
    assert "\n" not in str(info.value)


# -- damaged content ---------------------------------------------------------------------------


def test_an_empty_file_is_refused(tmp_path):
    write(tmp_path, "")
    message = refused(tmp_path)
    assert "is empty (0 bytes)" in message
    assert f"mv {tmp_path / 'checkpoint.json'} {tmp_path / 'checkpoint.json'}.bad" in message


def test_a_truncated_file_is_refused(tmp_path):
    whole = json.dumps(document(), separators=(",", ":"), sort_keys=True)
    write(tmp_path, whole[: len(whole) // 2])
    message = refused(tmp_path)
    assert "truncated or not valid JSON" in message and "mv " in message and "no prepared claims" in message


def test_a_truncated_file_with_specs_of_ours_says_they_must_be_dealt_with(tmp_path):
    write(tmp_path, "{half")
    message = refused(tmp_path, [UID])
    assert "not valid JSON" in message and "mv " in message
    assert f"1 CDI spec(s) of this driver exist (claims {UID})" in message and "delete their specs" in message


def test_a_file_that_is_not_utf8_is_refused(tmp_path):
    (tmp_path / "checkpoint.json").write_bytes(b'{"version": 1, "x": "\xff"}')
    message = refused(tmp_path)
    assert "is not UTF-8 (byte 0xff at offset 21)" in message and "mv " in message


@pytest.mark.parametrize("content", ["[" * 100_000, '{"version": ' + "9" * 5000 + "}"])
def test_pathological_json_is_refused(tmp_path, content):
    write(tmp_path, content)
    assert "not valid JSON" in refused(tmp_path)


# -- another schema, driver, node ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ([], "the top level is a list, not an object"),
        ("1", "the top level is an integer"),
        (document(version=2), "version 2 is not 1"),
        (document(version=True), "version True is not 1"),
        (document(version=1.0), "version 1.0 is not 1"),
        (document(version="1"), "version '1' is not 1"),
        (document(version=DELETE), "version None is not 1"),
        (document(claims=[]), "claims: a list, not an object"),
        (document(claims=DELETE), "claims: missing"),
        (document(driver="other.example.com"), "written for driver 'other.example.com', this is driver"),
        (document(driver=DELETE), "the field 'driver' is missing"),
        (document(node=DELETE), "the field 'node' is missing"),
        (document(node=None), "written for node None"),
    ],
)
def test_another_schema_is_refused(tmp_path, data, needle):
    write(tmp_path, data)
    message = refused(tmp_path)
    assert needle in message and "mv " in message


def test_another_node_is_refused(tmp_path):
    write(tmp_path, document(node="node-b"))
    message = refused(tmp_path)
    assert "written for node 'node-b', this is node 'node-a': the state directory belongs to another node" in message


# -- claim entries ------------------------------------------------------------------------------

D0 = "devices.0"
NET = "devices.0.netdev"
SH = "devices.1.share"
SPEC = "cdi_spec"
FIELD_CASES = [
    ("namespace", "Not_A_Label", ".namespace", "is not a DNS label"),
    ("namespace", DELETE, ".namespace", "missing"),
    ("name", 5, ".name", "is not a DNS subdomain"),
    ("name", "a" * 300, ".name", "characters)"),  # shown cut
    ("devices", [], ".devices", "an empty list"),
    ("devices", "nic", ".devices", "a string, not a list"),
    ("devices", DELETE, ".devices", "missing"),
    (D0, "nic-0000-1d-00-0", ".devices[0]", "a string, not an object"),
    (f"{D0}.pool", "node-b", ".devices[0].pool", "'node-b' is not this node ('node-a')"),
    (f"{D0}.pool", DELETE, ".devices[0].pool", "missing"),
    (f"{D0}.device", "GPU 0", ".devices[0].device", "is not a device name"),
    (f"{D0}.device", DELETE, ".devices[0].device", "missing"),
    (f"{D0}.request_names", "nic", ".devices[0].request_names", "a string, not a list"),
    (f"{D0}.request_names", ["nic", 3], ".devices[0].request_names[1]", "3 is not a request name"),
    (f"{D0}.request_names", ["a/b/c"], ".devices[0].request_names[0]", "'a/b/c' is not a request name"),
    (f"{D0}.pci_address", "zz", ".devices[0].pci_address", "'zz' is not a PCI address"),
    (f"{D0}.pci_address", "0000:1d:00.0\n", ".devices[0].pci_address", "is not a PCI address"),
    (f"{D0}.pci_address", DELETE, ".devices[0].pci_address", "missing"),
    (f"{D0}.kind", "fpga", ".devices[0].kind", "'fpga' is not one of gpu, accelerator, nic, vf"),
    (f"{D0}.kind", "acc", ".devices[0].kind", "is not one of"),
    (f"{D0}.cdi_device_ids", [], ".devices[0].cdi_device_ids", "an empty list"),
    (f"{D0}.cdi_device_ids", [1], ".devices[0].cdi_device_ids[0]", "1 is not a string"),
    (f"{D0}.cdi_device_ids", DELETE, ".devices[0].cdi_device_ids", "missing"),
    (f"{D0}.share_id", "not-a-uid", ".devices[0].share_id", "is not null or a UID"),
    (f"{D0}.share_id", DELETE, ".devices[0].share_id", "missing"),
    (f"{D0}.mps", "yes", ".devices[0].mps", "'yes' is not true or false"),
    (SH, [], ".devices[1].share", "a list, not an object"),
    (f"{SH}.request", DELETE, ".devices[1].share.request", "missing"),
    (f"{SH}.limit", None, ".devices[1].share.limit", "null, not an object"),
    (f"{SH}.request.memory", "10Gi", ".devices[1].share.request.memory", "'10Gi' is not a number of bytes"),
    (f"{SH}.limit.memory", -1, ".devices[1].share.limit.memory", "-1 is not a number of bytes"),
    (f"{SH}.request.compute", 101, ".devices[1].share.request.compute", "101 is not a percent (an integer 1 to 100)"),
    (f"{SH}.limit.compute", True, ".devices[1].share.limit.compute", "True is not a percent"),
    (NET, "ens1f0", ".devices[0].netdev", "a string, not an object"),
    (f"{NET}.original_name", "bad/name", ".devices[0].netdev.original_name", "is not an interface name"),
    (f"{NET}.original_name", "a" * 16, ".devices[0].netdev.original_name", "is not an interface name"),
    (f"{NET}.interface_name", DELETE, ".devices[0].netdev.interface_name", "missing"),
    (f"{NET}.original_mtu", 10, ".devices[0].netdev.original_mtu", "10 is not null or an MTU (68 to 65535)"),
    (f"{NET}.original_mtu", 70000, ".devices[0].netdev.original_mtu", "is not null or an MTU"),
    (f"{NET}.original_mtu", True, ".devices[0].netdev.original_mtu", "True is not null or an MTU"),
    (f"{NET}.original_mtu", "1500", ".devices[0].netdev.original_mtu", "is not null or an MTU"),
    (f"{NET}.original_mtu", DELETE, ".devices[0].netdev.original_mtu", "missing"),
    (f"{NET}.original_up", "yes", ".devices[0].netdev.original_up", "'yes' is not true or false"),
    (f"{NET}.original_addresses", {}, ".devices[0].netdev.original_addresses", "an object, not a list"),
    (f"{NET}.original_addresses", [ADDRESS] * 65, ".devices[0].netdev.original_addresses", "65 entries, at most 64"),
    (f"{NET}.original_addresses.0", "10.0.0.1/24", ".devices[0].netdev.original_addresses[0]", "must be an object"),
    (f"{NET}.original_addresses.0.address", "10.0.0.1", ".devices[0].netdev.original_addresses[0]", "prefix length"),
    (f"{NET}.original_addresses.0.address", "fd00::1/64", ".devices[0].netdev.original_addresses[0]", "IPv4"),
    (f"{NET}.original_addresses.0.broadcast", "x", ".devices[0].netdev.original_addresses[0]", "broadcast 'x' is not"),
    (f"{NET}.original_addresses.0.metric", -1, ".devices[0].netdev.original_addresses[0]", "metric -1 is not"),
    (f"{NET}.original_addresses.0.noprefixroute", 1, ".devices[0].netdev.original_addresses[0]", "true or false"),
    (f"{NET}.original_addresses.0.label", "x", ".devices[0].netdev.original_addresses[0]", "exactly address"),
    (f"{NET}.original_routes", None, ".devices[0].netdev.original_routes", "null, not a list"),
    (f"{NET}.original_routes.0.destination", "10.0.0.1/33", ".devices[0].netdev.original_routes[0]", "destination"),
    (
        f"{NET}.original_routes.0.gateway",
        "fd00::1",
        ".devices[0].netdev.original_routes[0]",
        "gateway 'fd00::1' is not",
    ),
    (f"{NET}.original_routes.0.source", 7, ".devices[0].netdev.original_routes[0]", "source 7 is not"),
    (f"{NET}.original_routes.0.scope", 256, ".devices[0].netdev.original_routes[0]", "scope 256 is not"),
    (f"{NET}.original_routes.0.protocol", True, ".devices[0].netdev.original_routes[0]", "protocol True is not"),
    (f"{NET}.original_routes.0.table", 0, ".devices[0].netdev.original_routes[0]", "table 0 is not a routing"),
    (f"{NET}.original_routes.0.onlink", "no", ".devices[0].netdev.original_routes[0]", "onlink must be"),
    (f"{NET}.original_routes.0.metric", DELETE, ".devices[0].netdev.original_routes[0]", "exactly destination"),
    (SPEC, DELETE, ".cdi_spec", "missing"),
    (SPEC, [], ".cdi_spec", "a list, not an object"),
    (f"{SPEC}.cdiVersion", 5, ".cdi_spec.cdiVersion", "5 is not a string"),
    (f"{SPEC}.kind", "nvidia.com/gpu", ".cdi_spec.kind", "'nvidia.com/gpu' is not 'aligned.dev/claim'"),
    (f"{SPEC}.devices", [], ".cdi_spec.devices", "an empty list"),
    (f"{SPEC}.devices.0", None, ".cdi_spec.devices[0]", "null, not an object"),
    (f"{SPEC}.devices.0.name", f"{OTHER_UID}-nic", ".cdi_spec.devices[0].name", "does not start with the claim UID"),
    (f"{SPEC}.devices.0.name", 7, ".cdi_spec.devices[0].name", "7 is not a string"),
    (f"{SPEC}.devices.0.containerEdits", DELETE, ".cdi_spec.devices[0].containerEdits", "missing"),
    (f"{SPEC}.devices.0.containerEdits", [], ".cdi_spec.devices[0].containerEdits", "a list, not an object"),
]


@pytest.mark.parametrize(("dotted", "value", "field", "needle"), FIELD_CASES, ids=[c[2] for c in FIELD_CASES])
def test_a_malformed_field_is_refused_naming_it(tmp_path, dotted, value, field, needle):
    bad = entry()
    mutate(bad, dotted, value)
    write(tmp_path, document({OTHER_UID: entry(OTHER_UID), UID: bad}))
    message = refused(tmp_path, [UID, OTHER_UID])
    assert f'checkpoint {tmp_path / "checkpoint.json"}: claims["{UID}"]{field}: ' in message
    assert needle in message
    assert "mv " in message and "2 CDI spec(s)" in message


def test_every_field_case_is_distinct():
    assert len({(c[0], repr(c[1])) for c in FIELD_CASES}) == len(FIELD_CASES) >= 12


@pytest.mark.parametrize(
    ("claims", "needle"),
    [
        ({"u1": entry()}, "claims: key 'u1' is not a Kubernetes UID"),
        ({"../../etc/x": entry()}, "claims: key '../../etc/x' is not a Kubernetes UID"),
        ({UID + "\n": entry()}, "is not a Kubernetes UID"),  # shown escaped: still one line
        ({UID: []}, f'claims["{UID}"]: a list, not an object'),
        ({UID: None}, f'claims["{UID}"]: null, not an object'),
    ],
)
def test_bad_claim_keys_and_entries_are_refused(tmp_path, claims, needle):
    write(tmp_path, document(claims))
    assert needle in refused(tmp_path)


def test_a_path_with_a_newline_still_gives_one_line(tmp_path):
    state = tmp_path / "a\nb"
    state.mkdir()
    write(state, "")
    with pytest.raises(CheckpointError) as info:
        Checkpoint(str(state), DRIVER, NODE).load()
    assert "\n" not in str(info.value) and "is empty" in str(info.value)


# -- the state directory --------------------------------------------------------------------------


def test_check_writable_passes_and_leaves_nothing(tmp_path):
    checkpoint = Checkpoint(str(tmp_path / "state"), DRIVER, NODE)
    checkpoint.check_writable()  # creates the directory
    assert (tmp_path / "state").is_dir() and list((tmp_path / "state").iterdir()) == []


@pytest.mark.parametrize(
    ("code", "needle"),
    [(errno.EROFS, "EROFS: Read-only file system"), (errno.EACCES, "EACCES: Permission denied")],
)
def test_check_writable_refuses_what_cannot_be_created(tmp_path, monkeypatch, code, needle):
    real_open = os.open

    def failing_open(path: Any, *args: Any, **kwargs: Any) -> int:
        if os.path.basename(path).startswith(PROBE_PREFIX):
            raise OSError(code, os.strerror(code))
        return real_open(path, *args, **kwargs)

    write(tmp_path, document())
    monkeypatch.setattr(checkpoint_module.os, "open", failing_open)
    with pytest.raises(CheckpointError) as info:
        store(tmp_path).check_writable()
    assert "\n" not in str(info.value) and f"state directory {tmp_path} cannot be written ({needle})" in str(info.value)
    assert store(tmp_path).load() == {UID: entry()}  # a checkpoint that cannot be written is still read


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT])
def test_check_writable_lets_a_full_disk_pass(tmp_path, monkeypatch, code):
    def full(path: Any, *args: Any, **kwargs: Any) -> int:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(checkpoint_module.os, "open", full)
    store(tmp_path).check_writable()  # no error: Prepare answers a full disk per claim


def test_check_writable_refuses_a_state_directory_that_cannot_be_created(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(CheckpointError, match="cannot be created"):
        Checkpoint(str(tmp_path / "file" / "state"), DRIVER, NODE).check_writable()


def test_remove_stale_temporary(tmp_path):
    leftovers = [tmp_path / ".checkpoint.json.tmp", tmp_path / f"{PROBE_PREFIX}123-abcd{TMP_SUFFIX}"]
    for path in leftovers:
        path.write_text("{")
    kept = [tmp_path / "checkpoint.json", tmp_path / ".other.json.tmp", tmp_path / f"{PROBE_PREFIX}123"]
    for path in kept:
        path.write_text("{}")
    (tmp_path / "link").symlink_to(tmp_path / "nowhere")
    assert sorted(store(tmp_path).remove_stale_temporary()) == sorted(str(p) for p in leftovers)
    assert not any(p.exists() for p in leftovers) and all(p.exists() for p in kept)
    assert store(tmp_path).remove_stale_temporary() == []
    assert Checkpoint(str(tmp_path / "none"), DRIVER, NODE).remove_stale_temporary() == []


def test_remove_stale_temporary_removes_a_planted_link_not_its_target(tmp_path):
    (tmp_path / "target").write_text("x")
    (tmp_path / ".checkpoint.json.tmp").symlink_to(tmp_path / "target")
    assert store(tmp_path).remove_stale_temporary() == [str(tmp_path / ".checkpoint.json.tmp")]
    assert (tmp_path / "target").read_text() == "x"


def test_remove_stale_temporary_refuses_a_directory_in_the_way(tmp_path):
    (tmp_path / ".checkpoint.json.tmp").mkdir()
    with pytest.raises(CheckpointError) as info:
        store(tmp_path).remove_stale_temporary()
    assert "\n" not in str(info.value) and ".checkpoint.json.tmp cannot be removed" in str(info.value)


def test_a_probe_left_by_a_crash_is_removed(tmp_path, monkeypatch):
    checkpoint = store(tmp_path)
    monkeypatch.setattr(checkpoint_module.os, "unlink", lambda path: None)  # "crash" before the probe is removed
    checkpoint.check_writable()
    monkeypatch.undo()
    probes = [p.name for p in tmp_path.iterdir()]
    assert len(probes) == 1 and probes[0].startswith(PROBE_PREFIX) and probes[0].endswith(TMP_SUFFIX)
    assert checkpoint.remove_stale_temporary() == [str(tmp_path / probes[0])]


# -- writing -----------------------------------------------------------------------------------


def test_save_of_a_candidate_leaves_memory_alone(tmp_path):
    checkpoint = store(tmp_path)
    checkpoint.load()
    before = {OTHER_UID: entry(OTHER_UID)}
    checkpoint.claims = copy.deepcopy(before)
    candidate = {**checkpoint.claims, UID: entry()}
    checkpoint.save(candidate)
    assert checkpoint.claims == before
    assert store(tmp_path).load([UID, OTHER_UID]) == candidate
    checkpoint.save()  # the default: what is in memory
    assert store(tmp_path).load() == before


def test_a_failing_save_raises_oserror_and_keeps_file_and_memory(tmp_path, monkeypatch):
    checkpoint = store(tmp_path)
    checkpoint.claims = {UID: entry()}
    checkpoint.save()
    before = (tmp_path / "checkpoint.json").read_bytes()

    def full(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(checkpoint_module, "atomic_write", full)
    with pytest.raises(OSError, match="No space left"):
        checkpoint.save({})
    assert checkpoint.claims == {UID: entry()} and (tmp_path / "checkpoint.json").read_bytes() == before
