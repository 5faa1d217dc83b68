# SPDX-License-Identifier: Apache-2.0
"""What the node roles install as root: the driver's unit and tmpfiles entry, and file owners and modes.

The driver's systemd unit and tmpfiles entry are rendered by a real
ansible-playbook run from the role's templates and defaults, then checked for
the privileges docs/security.md states, and the unit is parsed by
``systemd-analyze verify`` (offline) with hostile inventory strings in it.
The owners and modes of every file and directory that the driver, rdma and
sriov roles create on a node are read from the roles' tasks.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
import yaml

from ansible_collections.aligned.dra.tests.support.harnesses.driver_role import directives, exec_start_argv, render
from ansible_collections.aligned.dra.tests.support.harnesses.playbook_runs import REPO

ROLES = REPO / "roles"


def test_driver_unit_runs_as_root_with_net_admin_only_and_a_read_only_system(tmp_path):
    unit = directives(render(tmp_path, "aligned-dra-driver.service.j2"))
    assert unit["User"] == "root"
    assert unit["CapabilityBoundingSet"] == "CAP_NET_ADMIN"
    assert unit["AmbientCapabilities"] == ""
    assert unit["NoNewPrivileges"] == "yes"
    assert unit["UMask"] == "0077"
    assert unit["ProtectSystem"] == "strict"
    assert sorted(unit["ReadWritePaths"].split()) == sorted(
        [
            "/var/lib/kubelet/plugins",
            "/var/lib/kubelet/plugins_registry",
            "/var/run/cdi",
            "/var/lib/aligned-dra",
            "/run/aligned-dra/mps",
        ]
    )
    for key in ("ProtectHome", "PrivateTmp", "ProtectKernelModules", "ProtectControlGroups", "RestrictSUIDSGID"):
        assert unit[key] == "yes", key
    assert unit["RestrictAddressFamilies"].split() == ["AF_UNIX", "AF_INET", "AF_INET6", "AF_NETLINK"]
    # The metrics endpoint listens on the loopback interface only.
    argv = exec_start_argv(render(tmp_path, "aligned-dra-driver.service.j2"))
    assert "--metrics-address=127.0.0.1:8089" in argv
    assert "--kubeconfig=/etc/aligned-dra/kubeconfig" in argv


def test_inventory_strings_stay_single_arguments_of_the_driver(tmp_path):
    hostile = ['--match=dra.aligned.dev/model=H100 "80GB"', "--selector=%h$HOME\\x"]
    text = render(tmp_path, "aligned-dra-driver.service.j2", aligned_dra_driver_extra_args=hostile, exclude=["eno %i"])
    argv = exec_start_argv(text)
    assert argv[-2:] == hostile
    assert "--exclude=eno %i" in argv
    assert argv[0] == "/opt/aligned-dra/venv/bin/aligned-dra-driver"
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed")
    # systemd itself parses the unit without complaint (the executable must exist for verify).
    prefix = tmp_path / "opt"
    (prefix / "venv" / "bin").mkdir(parents=True)
    binary = prefix / "venv" / "bin" / "aligned-dra-driver"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    unit = tmp_path / "aligned-dra-driver.service"
    unit.write_text(text.replace("/opt/aligned-dra/", f"{prefix}/"))
    proc = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", str(unit)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0 and "quoting" not in proc.stderr, proc.stderr


def test_tmpfiles_entry_keeps_the_cdi_directory_root_only_writable(tmp_path):
    lines = [line.split() for line in render(tmp_path, "tmpfiles.conf.j2").splitlines() if line[:1] == "d"]
    assert lines == [
        ["d", "/var/run/cdi", "0755", "root", "root", "-"],
        ["d", "/run/aligned-dra/mps", "0700", "root", "root", "-"],
    ]


# -- owners and modes of what the node roles create --------------------------------------------

WRITERS = ("ansible.builtin.file", "ansible.builtin.copy", "ansible.builtin.template")


def node_writes():
    """(role, task name, module args, loop) of every file/copy/template task that runs on the node."""
    found = []
    for role in ("driver", "rdma", "sriov"):
        for path in sorted((ROLES / role / "tasks").glob("*.yml")):
            for task in yaml.safe_load(path.read_text()) or []:
                for block in [task] + task.get("block", []):
                    module = next((m for m in WRITERS if m in block), None)
                    if module is None or "localhost" in (block.get("delegate_to"), task.get("delegate_to")):
                        continue
                    args = block[module]
                    if args.get("state") == "absent":
                        continue
                    found.append((role, block["name"], args, block.get("loop")))
    return found


def test_every_file_the_node_roles_install_is_root_owned_and_not_writable_by_others():
    writes = node_writes()
    assert len(writes) >= 15, writes
    for role, name, args, loop in writes:
        modes = [item["mode"] for item in loop] if args.get("mode") == "{{ item.mode }}" else [args.get("mode")]
        assert all(isinstance(m, str) and re.fullmatch(r"0[0-7]{3}", m) for m in modes), (role, name, modes)
        assert all(int(m, 8) & 0o022 == 0 for m in modes), (role, name, modes)
        assert (args.get("owner"), args.get("group")) == ("root", "root"), (role, name)


def test_secrets_and_state_are_root_only():
    modes = {}
    for _role, _name, args, loop in node_writes():
        if args.get("mode") == "{{ item.mode }}":
            modes.update({item["path"]: item["mode"] for item in loop})
        else:
            modes.setdefault(args.get("dest") or args.get("path"), args["mode"])
    assert modes["{{ aligned_dra_driver_config_dir }}"] == "0700"
    assert modes["{{ aligned_dra_driver_state_dir }}"] == "0700"
    assert modes["{{ aligned_dra_driver_config_dir }}/kubeconfig"] == "0600"
    assert modes["{{ aligned_dra_driver_mps_root }}"] == "0700"
    assert modes["{{ aligned_dra_driver_cdi_dir }}"] == "0755"
    # The network roles keep their state in the same directory by default: the same mode, or the
    # two roles would change it back and forth on every run.
    for role in ("rdma", "sriov"):
        defaults = yaml.safe_load((ROLES / role / "defaults" / "main.yml").read_text())
        assert defaults["aligned_dra_network_state_dir"] == "/etc/aligned-dra"
    driver_defaults = yaml.safe_load((ROLES / "driver" / "defaults" / "main.yml").read_text())
    assert driver_defaults["aligned_dra_driver_config_dir"] == "/etc/aligned-dra"
    assert modes["{{ aligned_dra_network_state_dir }}"] == modes["{{ aligned_dra_driver_config_dir }}"]
