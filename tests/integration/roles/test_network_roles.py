# SPDX-License-Identifier: Apache-2.0
"""playbooks/network.yml (rdma + sriov roles) through real ansible-playbook runs.

Two "nodes" are fake SR-IOV trees on the controller (local connection);
tests/support/node_side/fake_sysfs_sriov.py watches them and plays the kernel's part when the
modules write sriov_numvfs, as in the Molecule scenario.
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import pytest
import yaml

from ansible_collections.aligned.dra.tests.support.fakes.apiserver import FakeApiServer
from ansible_collections.aligned.dra.tests.support.harnesses.playbook_runs import (
    PLAYBOOKS,
    run_playbook,
    tree_vars,
    write_inventory,
)
from ansible_collections.aligned.dra.tests.support.node_side.fake_sysfs_sriov import watch
from ansible_collections.aligned.dra.tests.support.node_side.sysfs_builder import build_tree, load_layout

REPO = Path(__file__).resolve().parents[3]
LAYOUT = REPO / "tests" / "fixtures" / "network" / "sriov-lab.yml"


@pytest.fixture
def nodes(tmp_path):
    roots, stops = {}, []
    for name in ("n1", "n2"):
        root = build_tree(load_layout(LAYOUT), tmp_path / name)
        stop, ready = threading.Event(), threading.Event()
        threading.Thread(target=watch, args=(str(root / "sys"), 0.01, stop, ready), daemon=True).start()
        assert ready.wait(30)
        roots[name] = root
        stops.append(stop)
    yield roots
    for stop in stops:
        stop.set()


def inventory(tmp_path, roots, host_vars=None, **common):
    hosts = {}
    for name, root in roots.items():
        hosts[name] = {
            **tree_vars(root),
            "aligned_dra_modprobe_dir": str(root / "etc/modprobe.d"),
            "aligned_dra_modules_load_dir": str(root / "etc/modules-load.d"),
            "aligned_dra_driver_state_dir": str(root / "state"),
            "aligned_dra_sriov_pfs": [{"pci_address": "0000:01:00.0", "numvfs": 3}],
            **((host_vars or {}).get(name, {})),
        }
    variables = {"aligned_dra_network_persist": False, "aligned_dra_rdma_netns_mode": "exclusive", **common}
    return write_inventory(tmp_path / "inventory.yml", hosts, variables)


def playbook(inv, *args):
    return run_playbook(inv, PLAYBOOKS / "network.yml", *args)


def numvfs(root, address="0000:01:00.0"):
    return int((root / f"sys/bus/pci/devices/{address}/sriov_numvfs").read_text())


def recap(proc, host):
    part = proc.output.split(f"{host} : ", 1)[1]
    return {k: int(v) for k, v in (item.split("=") for item in part.split()[:4])}


@pytest.mark.slow
def test_converge_then_nothing_to_do(nodes, tmp_path):
    inv = inventory(
        tmp_path, nodes, host_vars={"n2": {"aligned_dra_sriov_pfs": [{"netdev": "enp1s0f1np0", "numvfs": 4}]}}
    )
    first = playbook(inv)
    assert first.returncode == 0, first.output
    assert numvfs(nodes["n1"]) == 3 and numvfs(nodes["n2"], "0000:01:00.1") == 4
    assert "no kubeconfig given (aligned_dra_kubeconfig), so the node is not cordoned" in first.output
    assert "options ib_core netns_mode=0" in (nodes["n1"] / "etc/modprobe.d/aligned-dra-rdma.conf").read_text()
    second = playbook(inv)
    assert second.returncode == 0, second.output
    assert recap(second, "n1")["changed"] == 0 and recap(second, "n2")["changed"] == 0


@pytest.mark.slow
def test_check_only_shows_the_plan(nodes, tmp_path):
    inv = inventory(tmp_path, nodes, aligned_dra_network_check_only=True)
    proc = playbook(inv, "--diff")
    assert proc.returncode == 0, proc.output
    assert "- numvfs: 0 + numvfs: 3" in proc.output
    assert numvfs(nodes["n1"]) == 0
    assert not (nodes["n1"] / "etc").exists()


@pytest.mark.slow
def test_failed_node_stops_the_rollout(nodes, tmp_path):
    """n1's plan is refused (a VF in use): the run stops before any node changes, n2 included."""
    (nodes["n1"] / "state").mkdir()
    checkpoint = {"claims": {"c1": {"devices": [{"pci_address": "0000:01:02.0"}]}}}
    (nodes["n1"] / "state" / "checkpoint.json").write_text(json.dumps(checkpoint))
    inv = inventory(tmp_path, nodes, aligned_dra_sriov_pfs=None)
    data = yaml.safe_load(inv.read_text())
    for host in data["aligned_dra_nodes"]["hosts"].values():
        host["aligned_dra_sriov_pfs"] = [{"pci_address": "0000:01:00.1", "numvfs": 5}]
    inv.write_text(yaml.safe_dump(data))
    proc = playbook(inv)
    assert proc.returncode != 0
    assert "VF 0000:01:02.0 is prepared for claim c1 (driver checkpoint)" in proc.output
    assert "n1 failed in stage network" in proc.output
    assert numvfs(nodes["n1"], "0000:01:00.1") == 2 and numvfs(nodes["n2"], "0000:01:00.1") == 2
    # Both were planned (read-only); no batch started, so neither node's RDMA files were written.
    assert "PLAY [Configure RDMA and SR-IOV" not in proc.output
    assert not (nodes["n1"] / "etc").exists() and not (nodes["n2"] / "etc").exists()
    assert recap(proc, "n2")["changed"] == 0


@pytest.mark.slow
def test_only_nodes_with_a_change_roll_each_drained_alone(nodes, tmp_path):
    """A converged site starts no batch; one changed node rolls alone, drained and uncordoned."""
    with FakeApiServer(minor="1.35") as api:
        for name in nodes:
            api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        inv = inventory(tmp_path, nodes, aligned_dra_kubeconfig=str(kubeconfig), aligned_dra_drain_timeout=10)
        first = playbook(inv)
        assert first.returncode == 0, first.output
        assert numvfs(nodes["n1"]) == 3 and numvfs(nodes["n2"]) == 3
        # both rolled, one batch each, in inventory order (not in the order their plans finished)
        batches = first.output.split("PLAY [Configure RDMA and SR-IOV on every GPU/RDMA node]")[1:]
        assert len(batches) == 2 and "[n1" in batches[0] and "[n2" not in batches[0]

        converged = playbook(inv)
        assert converged.returncode == 0, converged.output
        assert re.search(
            r"PLAY \[Configure RDMA and SR-IOV on every GPU/RDMA node\] \** skipping: no hosts matched",
            converged.output,
        ), converged.output
        assert recap(converged, "n1")["changed"] == 0 and recap(converged, "n2")["changed"] == 0

        data = yaml.safe_load(inv.read_text())
        data["aligned_dra_nodes"]["hosts"]["n2"]["aligned_dra_sriov_pfs"] = [
            {"pci_address": "0000:01:00.0", "numvfs": 5}
        ]
        inv.write_text(yaml.safe_dump(data))
        del api.requests[:]
        one = playbook(inv)
        assert one.returncode == 0, one.output
        assert numvfs(nodes["n1"]) == 3 and numvfs(nodes["n2"]) == 5
        rolled = one.output.split("PLAY [Configure RDMA and SR-IOV on every GPU/RDMA node]")[1].split("PLAY RECAP")[0]
        assert "[n2" in rolled and "[n1" not in rolled
        assert "TASK [aligned.dra.sriov : Cordon and drain the node]" in rolled
        # n2 was cordoned (and its pods evicted), then uncordoned; n1 was never written to.
        written = [
            (method, path) for method, path, _type in api.requests if method in ("PATCH", "POST", "PUT", "DELETE")
        ]
        assert any(path.startswith("/api/v1/nodes/n2") for _method, path in written), written
        assert not any("/nodes/n1" in path for _method, path in written), written
        assert not api.get("nodes", "n2").get("spec", {}).get("unschedulable")
        assert recap(one, "n1")["changed"] == 0


@pytest.mark.slow
@pytest.mark.parametrize(
    ("pfs", "message"),
    [
        ([{"pci_address": "0000:01:00.0", "numvfs": 99}], "pfs[0].numvfs: 99 is above sriov_totalvfs 8"),
        ([{"pci_address": "0000:01:00.0", "mac": "x"}], "aligned_dra_sriov_pfs.mac. Supported parameters include"),
        ([{"pci_address": "0000:01:00.0", "numvfs": "many"}], "numvfs"),
    ],
)
def test_bad_inventory_is_refused(nodes, tmp_path, pfs, message):
    inv = inventory(tmp_path, nodes, host_vars={"n1": {"aligned_dra_sriov_pfs": pfs}})
    proc = playbook(inv, "--limit", "n1")
    assert proc.returncode != 0 and message in proc.output, proc.output
    # Nothing changed: neither the VFs nor the RDMA files of the role that runs first.
    assert numvfs(nodes["n1"]) == 0
    assert not (nodes["n1"] / "etc").exists()


@pytest.mark.slow
def test_mode_that_needs_a_reboot_is_reported_not_forced(nodes, tmp_path):
    """The tree's ib_core runs shared; exclusive can only come with the next load of ib_core."""
    for root in nodes.values():
        params = root / "sys/module/ib_core/parameters"
        params.mkdir(parents=True)
        (params / "netns_mode").write_text("Y\n")
    inv = inventory(tmp_path, nodes, aligned_dra_sriov_pfs=[])
    proc = playbook(inv, "--limit", "n1")
    assert proc.returncode == 0, proc.output
    assert "n1 needs a reboot for the RDMA netns mode" in proc.output
    assert "aligned_dra_allow_reboot is false: reboot it to apply it" in proc.output
    assert "options ib_core netns_mode=0" in (nodes["n1"] / "etc/modprobe.d/aligned-dra-rdma.conf").read_text()
    # Allowed to reboot, but a captured tree's host is not the node: no reboot, and the node fails verification.
    proc = playbook(inv, "--limit", "n1", "-e", "aligned_dra_allow_reboot=true")
    assert proc.returncode != 0
    assert "RDMA verification failed on n1" in proc.output


@pytest.mark.slow
def test_a_node_that_leaves_the_rdma_mode_alone(nodes, tmp_path):
    """A node without RDMA settings (the roles' null defaults) still gets its VFs; nothing RDMA is written."""
    inv = inventory(tmp_path, {"n1": nodes["n1"]})
    data = yaml.safe_load(inv.read_text())
    del data["aligned_dra_nodes"]["vars"]["aligned_dra_rdma_netns_mode"]
    inv.write_text(yaml.safe_dump(data))
    proc = playbook(inv)
    assert proc.returncode == 0, proc.output
    assert numvfs(nodes["n1"]) == 3
    assert not (nodes["n1"] / "etc/modprobe.d/aligned-dra-rdma.conf").exists()
