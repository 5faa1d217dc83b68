# SPDX-License-Identifier: Apache-2.0
"""From the controller: check mode shows a diff and changes nothing; bad inventory is refused."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

PROJECT = os.environ["MOLECULE_PROJECT_DIRECTORY"]
INVENTORY = os.path.join(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"], "inventory")
NUMVFS = "/fixture/sys/bus/pci/devices/0000:01:00.0/sriov_numvfs"


def ansible_env():
    env = dict(os.environ)
    env["ANSIBLE_COLLECTIONS_PATH"] = os.path.join(PROJECT, ".cache", "collections")
    env.setdefault("ANSIBLE_CONFIG", os.path.join(PROJECT, "ansible.cfg"))
    env.update(ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    return env


def playbook(*args, extra=None):
    env = ansible_env()
    cmd = [
        "ansible-playbook",
        "-i",
        INVENTORY,
        os.path.join(PROJECT, "playbooks", "network.yml"),
        "--limit",
        "net-node1",
    ]
    if extra is not None:
        cmd += ["-e", json.dumps(extra)]
    proc = subprocess.run(cmd + list(args), capture_output=True, text=True, check=False, env=env)
    # Task errors go to stderr; the YAML callback wraps long messages.
    proc.output = " ".join((proc.stdout + proc.stderr).split())
    return proc


@pytest.fixture
def node1(host):
    """Controller-side checks run once, against net-node1 (the verifier passes every host)."""
    if host.backend.get_hostname() != "net-node1":
        pytest.skip("runs against net-node1 only")
    return host


def numvfs(host):
    return host.file(NUMVFS).content_string.strip()


def test_check_mode_shows_the_diff_and_changes_nothing(node1):
    host = node1
    proc = playbook(
        "--check", "--diff", extra={"aligned_dra_sriov_pfs": [{"pci_address": "0000:01:00.0", "numvfs": 6}]}
    )
    assert proc.returncode == 0, proc.output
    assert "- numvfs: 4 + numvfs: 6" in proc.output
    assert numvfs(host) == "4"


def test_bad_values_are_refused_before_any_change(node1):
    host = node1
    proc = playbook(
        extra={
            "aligned_dra_sriov_pfs": [{"pci_address": "0000:01:00.0", "numvfs": 2, "vfs": [{"index": 0, "vlan": 5000}]}]
        }
    )
    assert proc.returncode != 0
    assert "pfs[0].vfs[0].vlan: 5000 is out of range 0-4095" in proc.output
    assert numvfs(host) == "4"


def test_unknown_keys_and_choices_are_refused_by_the_argument_specs(node1):
    host = node1
    proc = playbook(extra={"aligned_dra_sriov_pfs": [{"pci_adress": "0000:01:00.0", "numvfs": 2}]})
    assert proc.returncode != 0 and "pci_adress" in proc.output
    proc = playbook(extra={"aligned_dra_rdma_netns_mode": "private"})
    assert proc.returncode != 0 and "aligned_dra_rdma_netns_mode" in proc.output
    assert numvfs(host) == "4"
    assert host.file("/etc/modprobe.d/aligned-dra-rdma.conf").contains("netns_mode=0")


def test_vfs_in_use_are_not_destroyed(node1):
    host = node1
    bind = host.run(
        "ln -sfn ../../../../bus/pci/drivers/vfio-pci /fixture/sys/bus/pci/devices/0000:01:01.0/driver"
        " && mkdir -p /fixture/sys/bus/pci/drivers/vfio-pci"
        " && sed -i 's/^DRIVER=.*/DRIVER=vfio-pci/' /fixture/sys/bus/pci/devices/0000:01:01.0/uevent"
    )
    assert bind.rc == 0, bind.stderr
    proc = playbook(extra={"aligned_dra_sriov_pfs": [{"pci_address": "0000:01:00.0", "numvfs": 2}]})
    assert proc.returncode != 0
    assert "VF 0000:01:01.0 is bound to vfio-pci" in proc.output
    assert numvfs(host) == "4"


def test_a_second_gpudirect_call_changes_nothing(node1):
    """The module again, as converge's role called it: nothing to do, and update-grub does not run again."""
    host = node1
    args = (
        "acs=disable iommu=passthrough peer_memory=auto sysfs_root=/fixture/sys procfs_root=/fixture/proc"
        " grub_dir=/etc/default/grub.d modules_load_dir=/etc/modules-load.d"
    )
    env = ansible_env()
    env["ANSIBLE_CALLBACK_RESULT_FORMAT"] = "json"
    cmd = ["ansible", "net-node1", "-i", INVENTORY, "-m", "aligned.dra.gpudirect", "-a", args]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout[proc.stdout.index("{") :])
    assert result["changed"] is False and result["actions"] == [], result
    assert result["reboot_required"] is False and result["live"] is False, result
    assert host.file("/var/log/update-grub.runs").content_string.splitlines() == ["update-grub"]
