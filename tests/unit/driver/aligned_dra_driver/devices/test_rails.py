# SPDX-License-Identifier: Apache-2.0
"""The driver's rails (``--rails-file``): read at every scan, published on NICs and VFs, kept while a NIC is in a pod."""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

import pytest
from aligned_dra_driver.devices import inventory
from aligned_dra_driver.devices.rails import FACTS_NAME, Rails, held_addresses, returning_addresses
from aligned_dra_driver.usage.metrics import Metrics

from ansible_collections.aligned.dra.tests.support.harnesses import driver as h
from ansible_collections.aligned.dra.tests.support.harnesses import driver_rails_node as r

RAIL = "dra.aligned.dev/rail"
BEFORE = {r.DEV_A: 0, r.DEV_B: 1, r.DEV_VF: 0}
# nic0 -> 192.168.128.0/21 (rail 0), nic1 -> 192.168.136.0/21 (rail 1), as GKE A3/A4 give them
ADDRESSES = {"aldnic0": ["192.168.128.5/21"], "aldnic1": ["192.168.136.5/21"], "aldnic0v0": [], "eno1": []}
RULES = {
    "pci_order": {"by": "pci_order"},
    "netdev_name": {"by": "netdev_name", "pattern": r"^aldnic(\d+)$"},
    "subnet": {"by": "subnet", "subnets": ["192.168.128.0/21", "192.168.136.0/21"]},
    "map": {"by": "map", "nodes": {h.NODE: {r.NIC_A: 0, r.NIC_B: 1}}},
}


@pytest.fixture
def node():
    root = h.memory_tmp()
    yield r.build(root)
    shutil.rmtree(root, ignore_errors=True)


class Reads:
    """``read_addresses`` of the node: the interfaces asked for, answered from ADDRESSES."""

    def __init__(self) -> None:
        self.asked: list[list[str]] = []

    def __call__(self, names: list[str]) -> dict[str, list[str]]:
        self.asked.append(list(names))
        return {name: list(ADDRESSES.get(name, [])) for name in names}


def make(node, rule=None, held=(), metrics=None, reads=None, away=()) -> Rails:
    path = node.root / "rails.json"
    if rule is not None:
        r.write_rails(path, rule)
    rails = Rails(str(path), h.NODE, str(node.state), metrics, durable=False, read_addresses=reads or Reads())
    rails.held = lambda: set(held)
    rails.away = lambda: set(away)
    return rails


def published(node, rails: Rails | None) -> dict[str, int | None]:
    """Each published device's rail (None: no attribute)."""
    opts = inventory.Options(**node.options(rails=rails))
    devices = inventory.scan(opts).devices
    return {d["name"]: (d["attributes"].get(RAIL) or {}).get("int") for d in devices if d["name"] != h.GPU}


def sample(metrics: Metrics, name: str) -> float | None:
    return metrics.registry.get_sample_value(name)


def test_without_the_option_no_device_has_a_rail(node):
    assert published(node, None) == {r.DEV_A: None, r.DEV_B: None, r.DEV_VF: None}


@pytest.mark.parametrize("by", sorted(RULES))
def test_every_rule_puts_the_rail_on_nics_and_their_vfs(node, by):
    metrics = Metrics()
    rails = make(node, RULES[by], metrics=metrics)
    assert published(node, rails) == BEFORE
    assert (rails.problems, rails.file_error) == ([], None)
    assert sample(metrics, "aligned_dra_rail_nics") == 2
    assert sample(metrics, "aligned_dra_rails_file_error") == 0


def test_addresses_are_read_only_for_the_subnet_rule(node):
    reads = Reads()
    published(node, make(node, RULES["pci_order"], reads=reads))
    assert reads.asked == []
    published(node, make(node, RULES["subnet"], reads=reads))
    assert reads.asked == [["aldnic0", "aldnic1"]]  # the RDMA NIC PFs' interfaces


def test_a_node_not_in_the_file_publishes_no_rail(node):
    rails = make(node)
    r.write_rails(node.root / "rails.json", RULES["pci_order"], node="another-node")
    assert published(node, rails) == {r.DEV_A: None, r.DEV_B: None, r.DEV_VF: None}
    assert (rails.rule, rails.file_error) == (None, None)


def test_a_changed_file_is_read_at_the_next_scan_and_an_unchanged_one_is_not_read(node):
    rails = make(node, RULES["pci_order"])
    path = node.root / "rails.json"
    assert published(node, rails) == BEFORE
    # other content under the same inode, size and modification time: the stat says unchanged
    before = os.stat(path)
    swapped = path.read_text().replace('"pci_order"', '"xci_order"')
    with open(path, "r+") as handle:
        handle.write(swapped)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert published(node, rails) == BEFORE
    assert rails.file_error is None
    # a real change (the role's copy renames a new file into place)
    r.write_rails(path, {"by": "map", "map": {r.NIC_A: 3, r.NIC_B: 2}})
    assert published(node, rails) == {r.DEV_A: 3, r.DEV_B: 2, r.DEV_VF: 3}


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (None, "not found"),
        ("{", "is not JSON"),
        (json.dumps({"version": 2, "rules": [], "nodes": {}}), "version 1 expected"),
        (json.dumps({"version": 1, "rules": [{"by": "nic"}], "nodes": {h.NODE: 0}}), "aligned_dra_rails.by"),
        (json.dumps({"version": 1, "rules": [], "nodes": {h.NODE: 3}}), "is not an index into rules"),
        ("directory", "is not a regular file"),
    ],
)
def test_a_missing_or_damaged_file_publishes_no_rail_says_why_and_recovers(node, caplog, content, reason):
    metrics = Metrics()
    rails = make(node, metrics=metrics)
    path = node.root / "rails.json"
    if content == "directory":
        path.mkdir()
    elif content is not None:
        path.write_text(content)
    with caplog.at_level(logging.ERROR, logger="aligned_dra_driver.devices.rails"):
        assert published(node, rails) == {r.DEV_A: None, r.DEV_B: None, r.DEV_VF: None}
        assert published(node, rails) == {r.DEV_A: None, r.DEV_B: None, r.DEV_VF: None}
    assert reason in rails.file_error
    errors = [rec.getMessage() for rec in caplog.records if rec.levelno == logging.ERROR]
    assert len(errors) == 1 and str(path) in errors[0] and reason in errors[0]  # said once, not at every scan
    assert sample(metrics, "aligned_dra_rails_file_error") == 1
    if path.is_dir():
        path.rmdir()
    r.write_rails(path, RULES["pci_order"])
    assert published(node, rails) == BEFORE
    assert sample(metrics, "aligned_dra_rails_file_error") == 0


def test_rule_problems_are_counted_and_said_once_and_placed_nics_keep_their_rail(node, caplog):
    metrics = Metrics()
    rails = make(node, dict(RULES["netdev_name"], count=3), metrics=metrics)
    with caplog.at_level(logging.WARNING, logger="aligned_dra_driver.devices.rails"):
        assert published(node, rails) == BEFORE
        assert published(node, rails) == BEFORE
    assert rails.problems == [r"rails 2 of count 3: no RDMA NIC is on them (rule by netdev_name '^aldnic(\d+)$')"]
    assert [rec.getMessage() for rec in caplog.records] == [f"rail rule problem on this node: {rails.problems[0]}"]
    assert sample(metrics, "aligned_dra_rail_problems") == 1


# -- a NIC in a pod --------------------------------------------------------------------------


@pytest.mark.parametrize("exclusive", [True, False], ids=["rdma-exclusive", "rdma-shared"])
@pytest.mark.parametrize("by", sorted(RULES))
def test_a_nic_in_a_pod_changes_no_rail_across_scans_and_restarts(node, by, exclusive):
    rails = make(node, RULES[by], held=[r.NIC_A])
    assert published(node, rails) == BEFORE
    r.to_pod(node, r.NIC_A, "aldnic0", "mlx5_0" if exclusive else None)
    # exclusive: the host sees a plain NIC, which is not published; shared: an RDMA NIC without an interface
    in_pod = {k: v for k, v in BEFORE.items() if k != r.DEV_A or not exclusive}
    assert published(node, rails) == in_pod
    assert rails.rails == {r.NIC_A: 0, r.VF_A: 0, r.NIC_B: 1}
    assert rails.problems == []
    # the driver restarts while the NIC is in the pod: what it saw is in the state directory
    again = make(node, held=[r.NIC_A])
    assert published(node, again) == in_pod
    assert again.rails == {r.NIC_A: 0, r.VF_A: 0, r.NIC_B: 1}
    r.back(node, r.NIC_A, "aldnic0", "mlx5_0" if exclusive else None)
    assert published(node, again) == BEFORE


def test_a_rule_changed_while_a_nic_is_in_a_pod_reads_it_as_it_was_on_the_host(node):
    rails = make(node, RULES["subnet"], held=[r.NIC_A])
    published(node, rails)
    r.to_pod(node, r.NIC_A, "aldnic0", "mlx5_0")
    r.write_rails(node.root / "rails.json", {"by": "netdev_name", "pattern": r"^aldnic(\d+)$"})
    published(node, rails)
    assert rails.rails == {r.NIC_A: 0, r.VF_A: 0, r.NIC_B: 1}
    r.write_rails(node.root / "rails.json", {"by": "subnet", "subnets": ["192.168.136.0/21", "192.168.128.0/21"]})
    published(node, rails)
    assert rails.rails == {r.NIC_A: 1, r.VF_A: 1, r.NIC_B: 0}  # its address, read before it left


def rename(node, bdf: str, old: str, new: str) -> None:
    function = (node.sys / "bus" / "pci" / "devices" / bdf).resolve()
    (function / "net" / old).rename(function / "net" / new)
    (node.sys / "class" / "net" / old).unlink()
    (node.sys / "class" / "net" / new).symlink_to(function / "net" / new)


def test_a_nic_back_from_a_pod_under_its_pod_name_is_read_as_it_was_until_it_is_renamed(node):
    rails = make(node, RULES["netdev_name"])
    assert published(node, rails) == BEFORE  # seen on the host before its claim
    rails.away = lambda: {r.NIC_A}
    r.to_pod(node, r.NIC_A, "aldnic0")
    published(node, rails)
    r.back(node, r.NIC_A, "aldnic0")
    rename(node, r.NIC_A, "aldnic0", "net1")  # the kernel gave it back under its name in the pod
    assert published(node, rails) == BEFORE
    rails.away = frozenset  # the driver gave it its name back: read as it is from now on
    rename(node, r.NIC_A, "net1", "aldnic0")
    assert published(node, rails) == BEFORE
    rename(node, r.NIC_A, "aldnic0", "net1")
    assert published(node, rails)[r.DEV_A] is None  # what the check above would have read: it matters


def move_rdma(node, bdf: str, rdma: str, where: Path) -> None:
    """Only the RDMA device leaves (exclusive mode, a NIC without an interface) or comes back."""
    function = (node.sys / "bus" / "pci" / "devices" / bdf).resolve()
    link = node.sys / "class" / "infiniband" / rdma
    if where.exists():  # back on the host
        shutil.move(str(where), str(function / "infiniband" / rdma))
        link.symlink_to(function / "infiniband" / rdma)
    else:
        where.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(function / "infiniband" / rdma), str(where))
        link.unlink()


def test_an_rdma_nic_without_an_interface_in_a_pod_changes_no_rail(node, tmp_path):
    # nic A is InfiniBand without IPoIB: an RDMA device and no interface on the host
    r.to_pod(node, r.NIC_A, "aldnic0")
    rails = make(node, dict(RULES["pci_order"], count=2))
    assert published(node, rails) == BEFORE  # seen on the host before its claim
    record = json.loads((node.state / FACTS_NAME).read_text())["nics"]
    assert record[r.NIC_A] == {"rdma": True, "netdevs": []}
    rails.held = lambda: {r.NIC_A}
    move_rdma(node, r.NIC_A, "mlx5_0", tmp_path / "mlx5_0")  # exclusive mode: into the pod, a plain NIC now
    in_pod = {r.DEV_B: 1, r.DEV_VF: 0}  # not nic B on rail 0: A is read as recorded
    assert published(node, rails) == in_pod
    assert (rails.rails, rails.problems) == ({r.NIC_A: 0, r.VF_A: 0, r.NIC_B: 1}, [])
    again = make(node, held=[r.NIC_A])  # a restart while it is in the pod
    assert published(node, again) == in_pod
    move_rdma(node, r.NIC_A, "mlx5_0", tmp_path / "mlx5_0")
    assert published(node, again) == BEFORE


def test_a_nic_back_with_its_interface_before_its_rdma_device_keeps_the_rails(node, tmp_path):
    rails = make(node, RULES["pci_order"])
    assert published(node, rails) == BEFORE
    move_rdma(node, r.NIC_A, "mlx5_0", tmp_path / "mlx5_0")  # a plain NIC with its interface, for a moment
    published(node, rails)
    assert rails.rails == {r.NIC_A: 0, r.VF_A: 0, r.NIC_B: 1}
    record = json.loads((node.state / FACTS_NAME).read_text())["nics"]
    assert record[r.NIC_A] == {"rdma": True, "netdevs": ["aldnic0"]}  # not recorded as a plain NIC


def test_a_held_rdma_nic_without_an_interface_and_no_record_is_a_problem_and_not_recorded(node):
    # shared mode: its interface may be in the pod, or it may have none (InfiniBand without IPoIB)
    r.to_pod(node, r.NIC_A, "aldnic0")
    rails = make(node, RULES["netdev_name"], held=[r.NIC_A])
    published(node, rails)
    assert rails.rails == {r.NIC_B: 1}
    (problem,) = rails.problems
    assert problem.startswith(f"{r.NIC_A}: held by a prepared claim, and {rails.facts_path} has no record of it")
    assert "--rails-file" not in problem
    assert r.NIC_A not in json.loads((node.state / FACTS_NAME).read_text())["nics"]
    rails.held = frozenset  # its claim is gone: an RDMA NIC without an interface, recorded so
    published(node, rails)
    assert rails.problems == []
    assert json.loads((node.state / FACTS_NAME).read_text())["nics"][r.NIC_A] == {"rdma": True, "netdevs": []}


def test_a_held_nic_the_driver_never_saw_is_a_problem_named_by_its_address(node):
    r.to_pod(node, r.NIC_A, "aldnic0", "mlx5_0")
    rails = make(node, RULES["pci_order"], held=[r.NIC_A, h.GPU_BDF])
    published(node, rails)
    assert rails.rails == {r.NIC_B: 0}
    assert len(rails.problems) == 1 and rails.problems[0].startswith(f"{r.NIC_A}: held by a prepared claim")


def test_a_nic_gone_from_the_bus_leaves_the_rails(node):
    rails = make(node, RULES["pci_order"])
    published(node, rails)
    (node.sys / "bus" / "pci" / "devices" / r.NIC_A).unlink()  # hot-unplug: the function is gone
    published(node, rails)
    assert rails.rails == {r.NIC_B: 0}
    assert r.NIC_A not in json.loads((node.state / FACTS_NAME).read_text())["nics"]


@pytest.mark.parametrize(
    "content",
    ["{", json.dumps({"version": 1, "node": "other", "nics": {}}), json.dumps({"version": 1, "node": h.NODE})],
)
def test_a_damaged_record_is_said_and_written_anew(node, caplog, content):
    (node.state / FACTS_NAME).write_text(content)
    rails = make(node, RULES["pci_order"])
    with caplog.at_level(logging.WARNING, logger="aligned_dra_driver.devices.rails"):
        assert published(node, rails) == BEFORE
    assert any(FACTS_NAME in rec.getMessage() and "unusable" in rec.getMessage() for rec in caplog.records)
    record = json.loads((node.state / FACTS_NAME).read_text())
    assert record["nics"][r.NIC_A] == {"rdma": True, "netdevs": ["aldnic0"]}
    assert oct((node.state / FACTS_NAME).stat().st_mode & 0o777) == "0o600"


def test_an_unwritable_state_directory_still_publishes_the_rails(node, caplog):
    rails = make(node, RULES["pci_order"])
    rails.facts_path = str(node.root / "missing-dir" / FACTS_NAME)
    with caplog.at_level(logging.ERROR, logger="aligned_dra_driver.devices.rails"):
        assert published(node, rails) == BEFORE
        assert published(node, rails) == BEFORE
    assert len([rec for rec in caplog.records if "writing" in rec.getMessage()]) == 1


def test_held_addresses_are_the_checkpoint_devices():
    class Checkpoint:
        claims = {"u1": {"devices": [{"pci_address": r.NIC_A}, {"pci_address": h.GPU_BDF}]}, "u2": {"devices": []}}

    assert held_addresses(Checkpoint()) == {r.NIC_A, h.GPU_BDF}
    assert returning_addresses(Checkpoint()) == set()
    Checkpoint.returning = {r.NIC_B: {"original_name": "aldnic1"}}
    assert returning_addresses(Checkpoint()) == {r.NIC_B}
