# SPDX-License-Identifier: Apache-2.0
"""node/topology/rail_record.py: NICs out of the host's view, read as the driver's record last saw them.

A NIC a pod holds is a plain NIC without an interface (exclusive RDMA mode) or
an RDMA NIC without one (shared mode) on the host. The driver records what
the rules read of each NIC PF (``rails-nics.json``); ``with_last_seen`` reads
such a NIC as recorded, in the driver and in the probe module, so the
validation, the summaries and the planner see the rails the driver publishes.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest
import yaml

from ansible_collections.aligned.dra.plugins.module_utils.node.topology import probe, rail_record, rails
from ansible_collections.aligned.dra.tests.fixtures import materialize as fixtures

REPO = Path(__file__).resolve().parents[6]
TREES = REPO / ".cache" / "sysfs"
A, B, C = "0000:1a:00.0", "0000:2a:00.0", "0000:3a:00.0"
VF_A = "0000:1a:00.2"


def pf(address: str, kind: str, *names: str) -> dict:
    return {"pci_address": address, "kind": kind, "netdevs": [{"name": n} for n in names], "physfn": None}


def node(a: dict) -> dict:
    """Three RoCE NICs nic0..nic2 (nic0 with a VF) as the host sees them, ``a`` standing for nic0."""
    vf = {"pci_address": VF_A, "kind": "rdma", "netdevs": [], "physfn": A}
    devices = [a, vf, pf(B, "rdma", "nic1"), pf(C, "rdma", "nic2")]
    return {"devices": devices, "counts": {"nic": 0, "rdma": 0, "vfs": 1}}


ON_HOST = node(pf(A, "rdma", "nic0"))
EXCLUSIVE = node(pf(A, "nic"))  # its interface and RDMA device in a pod: a plain NIC without an interface
SHARED = node(pf(A, "rdma"))  # its interface in a pod, its RDMA device still on the host
RECORD = {
    A: {"rdma": True, "netdevs": ["nic0"], "addresses": {"nic0": ["192.168.128.5/21"]}},
    B: {"rdma": True, "netdevs": ["nic1"]},
    C: {"rdma": True, "netdevs": ["nic2"]},
}
PCI_ORDER = rails.check_rule({"by": "pci_order", "count": 3})
BY_NAME = rails.check_rule({"by": "netdev_name", "pattern": r"^nic(\d+)$", "count": 3})
BY_SUBNET = rails.check_rule({"by": "subnet", "subnets": ["192.168.128.0/21", "192.168.136.0/21"]})
ALL_RAILS = {A: 0, VF_A: 0, B: 1, C: 2}


def test_without_a_record_a_nic_in_a_pod_renumbers_the_others():
    # what the finding was: the probe alone gives the validation and the plan other rails than the driver's
    result = rails.assign(EXCLUSIVE, PCI_ORDER)
    assert result["rails"] == {B: 0, C: 1}
    assert result["problems"] == ["rails 2 of count 3: no RDMA NIC is on them (rule by pci_order)"]
    assert rail_record.with_last_seen(EXCLUSIVE, {}) is EXCLUSIVE


@pytest.mark.parametrize("topology", [EXCLUSIVE, SHARED], ids=["rdma-exclusive", "rdma-shared"])
@pytest.mark.parametrize("rule", [PCI_ORDER, BY_NAME], ids=["pci_order", "netdev_name"])
def test_a_nic_in_a_pod_is_read_as_recorded_and_marked(topology, rule):
    before = copy.deepcopy(topology)
    view = rail_record.with_last_seen(topology, RECORD)
    assert topology == before  # the probe's topology is not changed
    (patched,) = [d for d in view["devices"] if d.get("out_of_view")]
    now = topology["devices"][0]
    assert patched == dict(
        now, kind="rdma", netdevs=[{"name": "nic0"}], out_of_view={"kind": now["kind"], "netdevs": []}
    )
    result = rails.assign(view, rule)
    assert (result["rails"], result["problems"]) == (ALL_RAILS, [])
    assert [e.get("out_of_view", False) for e in result["nics"]] == [True, False, False]
    assert rails.assign(rail_record.with_last_seen(ON_HOST, RECORD), rule) == rails.assign(ON_HOST, rule)


def test_counts_follow_the_kind_and_the_recorded_addresses_join_the_probes():
    view = rail_record.with_last_seen(dict(EXCLUSIVE, counts={"nic": 1, "rdma": 2, "vfs": 1}), RECORD)
    assert view["counts"] == {"nic": 0, "rdma": 3, "vfs": 1}
    assert rail_record.with_last_seen(SHARED, RECORD)["counts"] == SHARED["counts"]  # already rdma
    assert "netdev_addresses" not in view  # not read (the driver passes its own): none made up
    probed = dict(EXCLUSIVE, netdev_addresses={"nic1": ["192.168.136.5/21"], "nic2": []})
    view = rail_record.with_last_seen(probed, RECORD)
    assert view["netdev_addresses"] == {"nic0": ["192.168.128.5/21"], "nic1": ["192.168.136.5/21"], "nic2": []}
    assert rails.assign(view, BY_SUBNET, addresses=view["netdev_addresses"])["rails"] == {A: 0, VF_A: 0, B: 1}
    captured = dict(EXCLUSIVE, netdev_addresses=None)  # unknown stays unknown
    assert rail_record.with_last_seen(captured, RECORD)["netdev_addresses"] is None


def test_an_rdma_nic_without_an_interface_is_in_view_and_recorded_without_one():
    # InfiniBand without IPoIB: no interface on the host, ever
    ib = node(pf(A, "rdma"))
    seen = rail_record.nics_in_view(ib, {})
    assert seen[A] == {"rdma": True, "netdevs": []}
    record = {A: {"rdma": True, "netdevs": []}, B: RECORD[B], C: RECORD[C]}
    assert rail_record.nics_in_view(ib, record) == seen
    assert rail_record.with_last_seen(ib, record) is ib
    # in a pod (exclusive mode took its RDMA device): out of view, read as recorded
    in_pod = node(pf(A, "nic"))
    assert A not in rail_record.nics_in_view(in_pod, record)
    view = rail_record.with_last_seen(in_pod, record)
    assert view["devices"][0]["out_of_view"] == {"kind": "nic", "netdevs": []}
    assert rails.assign(view, PCI_ORDER)["rails"] == ALL_RAILS


@pytest.mark.parametrize(
    ("now", "record", "in_view"),
    [
        (pf(A, "rdma", "nic0"), RECORD[A], True),
        (pf(A, "nic", "nic0"), {"rdma": False, "netdevs": ["nic0"]}, True),  # a plain NIC, as recorded
        (pf(A, "nic", "nic0"), None, True),
        # back from a pod: its interface is back before its RDMA device; not a plain NIC yet
        (pf(A, "nic", "nic0"), RECORD[A], False),
        (pf(A, "rdma"), RECORD[A], False),  # lost its interface
        (pf(A, "nic"), RECORD[A], False),
        (pf(A, "nic"), None, False),  # a plain NIC without an interface: nothing to read
        (pf(A, "nic"), {"rdma": False, "netdevs": ["eth0"]}, False),
    ],
)
def test_what_is_in_view(now, record, in_view):
    last_seen = {A: record} if record else {}
    assert (A in rail_record.nics_in_view(node(now), last_seen)) is in_view


def test_a_nic_away_is_read_as_recorded_even_with_an_interface():
    # the driver's NIC back from a pod under its name in the pod, not renamed yet
    back = node(pf(A, "rdma", "net1"))
    assert rails.assign(rail_record.with_last_seen(back, RECORD), BY_NAME)["rails"] == {B: 1, C: 2}  # net1: no match
    view = rail_record.with_last_seen(back, RECORD, away={A})
    assert view["devices"][0]["netdevs"] == [{"name": "nic0"}]
    assert rails.assign(view, BY_NAME)["rails"] == ALL_RAILS


def test_only_a_record_of_an_rdma_nic_patches():
    plain = {A: {"rdma": False, "netdevs": ["eth0"]}}
    assert rail_record.with_last_seen(EXCLUSIVE, plain) is EXCLUSIVE
    assert rail_record.with_last_seen(EXCLUSIVE, {"0000:9f:00.0": RECORD[A]}) is EXCLUSIVE  # not on the bus
    gone = {"devices": [d for d in EXCLUSIVE["devices"] if d["pci_address"] not in (A, VF_A)]}
    assert rail_record.with_last_seen(gone, RECORD) is gone  # a NIC off the bus leaves the rails


@pytest.mark.parametrize("name", ["ghw-westmere-vfs", "hwloc-32intel64-8ve"])
def test_captured_nics_without_an_interface_are_read_as_they_are_without_a_record(name):
    # These trees have NIC PFs with a driver bound and no interface on the host: only a record says held.
    root = fixtures.materialize(name, TREES)
    topology = probe(str(root / "sys"), str(root / "proc"))
    bare = [bdf for bdf, d in rail_record.nic_pfs(topology).items() if d["driver"] and not d["netdevs"]]
    assert bare
    assert not set(bare) & set(rail_record.nics_in_view(topology, {}))
    assert rail_record.with_last_seen(topology, {}) is topology
    record = {bare[0]: {"rdma": True, "netdevs": ["ibp26s0"]}}
    patched = rail_record.with_last_seen(topology, record)
    assert [d["pci_address"] for d in patched["devices"] if d.get("out_of_view")] == [bare[0]]
    assert patched["counts"]["rdma"] == topology["counts"]["rdma"] + 1


# -- the record --------------------------------------------------------------------------------


def write(path: Path, document) -> str:
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return str(path)


def test_the_record_round_trips(tmp_path):
    path = write(tmp_path / rail_record.RECORD_NAME, rail_record.record_document("gpu-a01", RECORD))
    assert rail_record.read_record(path, "gpu-a01") == RECORD
    assert rail_record.read_record(path) == RECORD  # any node
    assert rail_record.read_record(str(tmp_path / "absent.json")) is None


GOOD = {"version": 1, "node": "gpu-a01", "nics": {A: {"rdma": True, "netdevs": ["nic0"]}}}


@pytest.mark.parametrize(
    ("document", "node", "reason"),
    [
        ("{", None, "is not JSON"),
        (dict(GOOD, version=2), None, "version 1 expected"),
        (GOOD, "gpu-b01", "written for node 'gpu-a01', not gpu-b01"),
        (dict(GOOD, node=None), None, "'node' is not a string"),
        (dict(GOOD, nics=[]), None, "'nics' is not an object"),
        (dict(GOOD, nics={"1a:00.0": {"rdma": True, "netdevs": []}}), None, "nics['1a:00.0']: not a PCI address"),
        (dict(GOOD, nics={A: {"rdma": "yes", "netdevs": []}}), None, "'rdma' (true or false)"),
        (dict(GOOD, nics={A: {"rdma": True, "netdevs": ["a/b"]}}), None, "'netdevs' (interface names)"),
        (
            dict(GOOD, nics={A: {"rdma": True, "netdevs": [], "addresses": {"nic0": ["10.0.0.300/8"]}}}),
            None,
            ".addresses: interface name -> IPv4 addresses",
        ),
    ],
)
def test_a_damaged_record_says_what_is_wrong(tmp_path, document, node, reason):
    path = write(tmp_path / rail_record.RECORD_NAME, document)
    with pytest.raises(rail_record.RailRecordError) as caught:
        rail_record.read_record(path, node)
    assert reason in str(caught.value)


def test_an_unreadable_or_oversized_record_says_so(tmp_path):
    (tmp_path / "dir.json").mkdir()
    with pytest.raises(rail_record.RailRecordError, match="cannot be read"):
        rail_record.read_record(str(tmp_path / "dir.json"))
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (rail_record.MAX_RECORD_BYTES + 1))
    with pytest.raises(rail_record.RailRecordError, match="is larger than"):
        rail_record.read_record(str(big))


def test_with_record_patches_from_the_file_and_a_damaged_one_is_a_warning(tmp_path):
    path = tmp_path / rail_record.RECORD_NAME
    assert rail_record.with_record(EXCLUSIVE, str(path)) is EXCLUSIVE  # no driver: as the host sees it
    write(path, rail_record.record_document("gpu-a01", RECORD))
    assert rails.assign(rail_record.with_record(EXCLUSIVE, str(path)), PCI_ORDER)["rails"] == ALL_RAILS
    write(path, "{")
    damaged = rail_record.with_record(dict(EXCLUSIVE, warnings=["earlier"]), str(path))
    assert damaged["devices"] == EXCLUSIVE["devices"]
    assert damaged["warnings"][0] == "earlier"
    assert damaged["warnings"][1].startswith(f"rails record {path} is not JSON")


def test_the_default_record_is_where_the_driver_and_its_role_keep_it():
    from aligned_dra_driver import cli

    assert os.path.join(cli.parser().get_default("state_dir"), rail_record.RECORD_NAME) == rail_record.DEFAULT_RECORD
    defaults = yaml.safe_load((REPO / "roles" / "driver" / "defaults" / "main.yml").read_text())
    assert os.path.join(defaults["aligned_dra_driver_state_dir"], rail_record.RECORD_NAME) == rail_record.DEFAULT_RECORD
