# SPDX-License-Identifier: Apache-2.0
"""The mig role's boot-time apply (roles/mig/tasks/persist.yml, templates/aligned-dra-mig.service.j2).

The unit is rendered from the role's template and defaults by a real ansible-playbook run, its ordering read,
and parsed by ``systemd-analyze verify`` (offline). The persist tasks run as the role runs them, by a real
ansible-playbook run on this machine, with the unit directory, the state and library directories moved under
tmp_path and systemd left out (``systemd_service``): a check run shows the layout's diff and writes nothing,
a run installs the layout as verified, the unit and the library, a second run changes nothing, mode dynamic
removes them (and a verified layout releases the hold of a rollout's reboot); a Python that cannot load
nvidia-ml-py stops the plan (tasks/boot_python.yml), before any change. The rollout's own reboot
(tasks/main.yml) keeps the last verified layout and holds it for that one boot (mig.hold, the boot ID read from
a captured procfs tree), as node/mig/boot.py reads it: the hold tasks run on this machine, boot.py's reader
after them.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from ansible_collections.aligned.dra.plugins.module_utils.node.mig.boot import held
from ansible_collections.aligned.dra.tests.support.fakes.nvml import FakeNvml, write_module
from ansible_collections.aligned.dra.tests.support.harnesses.driver_role import directives, exec_start_argv
from ansible_collections.aligned.dra.tests.support.harnesses.playbook_runs import (
    REPO,
    environment,
    run_on_localhost,
    write_play,
)

ROLE = REPO / "roles" / "mig"
SEVEN = {"seven": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}]}
GPUS = ["0000:18:00.0", "0000:2a:00.0"]


def playbook(tmp_path, tasks, extra):
    """``tasks`` on localhost with the role's defaults and vars; the run's CompletedProcess."""
    play = [
        {
            "name": "mig boot-time apply",
            "hosts": "localhost",
            "gather_facts": False,
            "vars_files": [str(ROLE / "defaults" / "main.yml"), str(ROLE / "vars" / "main.yml")],
            "tasks": tasks,
        }
    ]
    return run_on_localhost(
        write_play(tmp_path / "play.yml", play),
        "--diff",
        *extra.pop("args", ()),
        extra_vars=extra,
        env=environment(ANSIBLE_CONFIG=str(REPO / "ansible.cfg")),
        cwd=REPO,
    )


def render(tmp_path, *variants):
    """The unit rendered once per variant (variables over the role's defaults), all in one run; their texts."""
    template = str(ROLE / "templates" / "aligned-dra-mig.service.j2")
    outs = [tmp_path / f"render-{index}" / "aligned-dra-mig.service" for index in range(len(variants))]
    for out in outs:
        out.parent.mkdir()
    tasks = [
        {"ansible.builtin.template": {"src": template, "dest": str(out)}, "vars": dict(variables)}
        for out, variables in zip(outs, variants, strict=True)
    ]
    proc = playbook(tmp_path, tasks, {})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return [out.read_text() for out in outs]


def test_the_unit_runs_after_the_nvidia_driver_and_before_the_kubelet_and_the_driver(tmp_path):
    python = tmp_path / "bin" / "python3"
    python.parent.mkdir()
    python.symlink_to(sys.executable)
    # the role's defaults, and the same with an interpreter that systemd-analyze can find here; a site's kubelet,
    # and its GPU clients (a name without a type, nvidia-persistenced, which the unit starts after), no driver
    site = {
        "aligned_dra_mig_kubelet_units": ["k0sworker.service"],
        "aligned_dra_mig_gpu_clients": {"systemd_units": ["nv_peer_mem", "nvidia-persistenced.service", "dcgm.service"],
                                        "bundled_driver": False},
    }  # fmt: skip
    text, with_python, sited = render(tmp_path, {}, {"aligned_dra_mig_python": str(python)}, site)
    unit = directives(text)
    assert (unit["Type"], unit["RemainAfterExit"], unit["DefaultDependencies"]) == ("oneshot", "yes", "no")
    after, before = unit["After"].split(), unit["Before"].split()
    # the modules loaded, udev's coldplug done (the NVIDIA module may be loaded by it): boot.py then waits for NVML
    wanted = {"systemd-modules-load.service", "systemd-udev-trigger.service", "nvidia-persistenced.service"}
    assert wanted | {"local-fs.target", "nvidia-fabricmanager.service"} == set(after)
    # before the kubelet of each kind of node, and every GPU client the rollout stops (the client that would hold a
    # Hopper GPU while its MIG mode changes, or start before the instances exist), as mig-parted's unit is
    kubelets = ["kubelet.service", "k3s.service", "k3s-agent.service", "rke2-server.service", "rke2-agent.service",
                "snap.microk8s.daemon-kubelite.service"]  # fmt: skip
    clients = ["nvsm.service", "nvidia-dcgm.service", "dcgm.service", "nvidia-dcgm-exporter.service",
               "dcgm-exporter.service", "aligned-dra-driver.service", "aligned-dra-driver-gpu.service"]  # fmt: skip
    assert before[: len(kubelets)] == kubelets and len(before) == len(set(before))
    assert {"nvidia-gpu-reset.target", "nvidia-cdi-refresh.service", *clients} <= set(before)
    assert set(before) == set(kubelets) | {"nvidia-gpu-reset.target", "nvidia-cdi-refresh.service"} | {
        f"{name}.service" if "." not in name else name
        for name in yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())["aligned_dra_mig_gpu_clients"][
            "systemd_units"
        ]
    } | {"aligned-dra-driver.service", "aligned-dra-driver-gpu.service"}
    # a site's units; one the unit starts after stays out of Before= (an ordering cycle), a bare name gets its type
    site_after, site_before = directives(sited)["After"].split(), directives(sited)["Before"].split()
    assert site_after == after
    assert site_before == ["k0sworker.service", "nvidia-gpu-reset.target", "nv_peer_mem.service", "dcgm.service",
                           "nvidia-cdi-refresh.service"]  # fmt: skip
    # the kubelet starts when the unit fails: ordering only, nothing requires the unit or is required by it
    assert not {"Requires", "Requisite", "BindsTo", "RequiredBy", "Wants"} & set(unit)
    assert unit["ConditionPathExists"] == "/etc/aligned-dra/mig.json"
    assert unit["Environment"] == "PYTHONPATH=/usr/local/lib/aligned-dra/mig.zip"
    assert exec_start_argv(text) == [
        "/usr/bin/python3",
        "-m",
        "ansible_collections.aligned.dra.plugins.module_utils.node.mig.boot",
        "/etc/aligned-dra/mig.json",
    ]
    assert unit["WantedBy"] == "multi-user.target"
    assert exec_start_argv(with_python)[0] == str(python)
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed")
    checked = tmp_path / "verify" / "aligned-dra-mig.service"
    checked.parent.mkdir()
    checked.write_text(with_python)
    proc = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", str(checked)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert "aligned-dra-mig.service" not in proc.stderr, proc.stderr  # no complaint about the unit itself


# -- the persist tasks, as the role runs them --------------------------------------------------------------


def persist_tasks(tmp_path):
    """persist.yml's block with /etc/systemd/system under tmp_path and without systemd_service (none here)."""
    text = (ROLE / "tasks" / "persist.yml").read_text().replace("/etc/systemd/system/", f"{tmp_path}/units/")
    (block,) = yaml.safe_load(text)
    assert block["when"] == "aligned_dra_sysfs_root == '/sys'"  # only a node's own machine
    tasks = []
    for task in block["block"]:
        if "ansible.builtin.systemd_service" in task:
            continue
        task = dict(task, vars={**block["vars"], **task.get("vars", {})})
        if "ansible.builtin.template" in task:
            task["ansible.builtin.template"] = dict(
                task["ansible.builtin.template"], src=str(ROLE / "templates" / "aligned-dra-mig.service.j2")
            )
        tasks.append(task)
    return tasks


def recap_changed(stdout: str) -> int:
    return int(re.search(r"^localhost\s+: ok=\d+\s+changed=(\d+)", stdout, re.M).group(1))


@pytest.fixture
def site(tmp_path):
    """The variables of a run: directories under tmp_path, a Python whose pynvml is the fake one."""
    (tmp_path / "units").mkdir()
    shim = tmp_path / "shim"
    shim.mkdir()
    FakeNvml().write_state(tmp_path / "nvml.json")
    write_module(shim, tmp_path / "nvml.json")
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nPYTHONPATH={shim} exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    return {
        "aligned_dra_mig": {"mode": "static", "mig_configs": {**SEVEN, "other": []}, "layout": "seven"},
        "aligned_dra_mig_state_dir": str(tmp_path / "etc"),
        "aligned_dra_mig_library_dir": str(tmp_path / "lib"),
        "aligned_dra_mig_python": str(python),
        "aligned_dra_mig_verify": {"changed": False, "gpus": [{"pci_address": a} for a in GPUS]},
    }


def test_check_run_diff_then_install_then_nothing_to_change_then_removed_in_mode_dynamic(tmp_path, site):
    tasks = persist_tasks(tmp_path)
    state, unit = tmp_path / "etc" / "mig.json", tmp_path / "units" / "aligned-dra-mig.service"
    checked = playbook(tmp_path, tasks, {**site, "args": ["--check"]})
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert recap_changed(checked.stdout) > 0
    assert '+    "layout": "seven",' in checked.stdout  # the diff of the state
    assert not state.exists() and not unit.exists()

    # the hold of a rollout's reboot (tasks/main.yml) goes once a layout is verified and written
    hold = tmp_path / "etc" / "mig.hold"
    hold.parent.mkdir()
    hold.write_text('{"boot_id": "an-earlier-boot"}\n')
    done = playbook(tmp_path, tasks, dict(site))
    assert done.returncode == 0, done.stdout + done.stderr
    assert not hold.exists()
    assert json.loads(state.read_text()) == {
        "mode": "static",
        "layout": "seven",
        "mig_configs": SEVEN,  # the config that applies, not the others
        "gpus": GPUS,
        "procfs_root": "/proc",
    }
    assert oct(state.stat().st_mode & 0o777) == "0o600"
    assert "ConditionPathExists=" + str(state) in unit.read_text()
    library = tmp_path / "lib" / "mig.zip"
    assert library.is_file()

    again = playbook(tmp_path, tasks, dict(site))
    assert again.returncode == 0 and recap_changed(again.stdout) == 0, again.stdout

    gone = playbook(tmp_path, tasks, {**site, "aligned_dra_mig": {"mode": "dynamic"}})
    assert gone.returncode == 0, gone.stdout + gone.stderr
    assert not state.exists() and not unit.exists() and not library.exists()
    assert (tmp_path / "lib").is_dir()  # the directory is the network roles' too
    still = playbook(tmp_path, tasks, {**site, "aligned_dra_mig": {"mode": "off"}})
    assert still.returncode == 0 and recap_changed(still.stdout) == 0, still.stdout


def test_a_python_without_nvidia_ml_py_stops_the_plan_before_any_change(tmp_path, site):
    """The check runs in the plan (every MIG node at once, before any node is cordoned), first; persist.yml,
    which runs after the change, no longer asks."""
    plan = yaml.safe_load((ROLE / "tasks" / "plan.yml").read_text())
    assert plan[0]["ansible.builtin.include_tasks"] == "boot_python.yml"
    assert "import pynvml" not in (ROLE / "tasks" / "persist.yml").read_text()
    check = {"ansible.builtin.include_tasks": str(ROLE / "tasks" / "boot_python.yml")}
    failed = playbook(tmp_path, [check], {**site, "aligned_dra_mig_python": "/bin/false"})
    assert failed.returncode != 0
    assert "/bin/false on localhost cannot import pynvml (nvidia-ml-py)" in failed.stdout
    assert "Nothing was changed." in failed.stdout
    passed = playbook(tmp_path, [check], dict(site))  # the fake pynvml loads
    assert passed.returncode == 0, passed.stdout + passed.stderr


# -- the rollout's own reboot (tasks/main.yml) --------------------------------------------------------------

REBOOT = "MIG | Reboot the drained node for the GPUs that need a reset"
HOLD = ("MIG | Read the boot ID before the reboot", "MIG | Hold the boot-time layout at the reboot")
BOOT_ID = "0c5b4e7a-1d2f-4c3b-9a8e-6f1e2d3c4b5a"


def reboot_tasks():
    """main.yml's change block: the hold tasks, under the reboot's own condition, right before it."""
    (block,) = [task for task in yaml.safe_load((ROLE / "tasks" / "main.yml").read_text()) if "block" in task]
    names = [task["name"] for task in block["block"]]
    reboot = block["block"][names.index(REBOOT)]
    assert names[names.index(REBOOT) - 2 : names.index(REBOOT)] == list(HOLD)
    assert "MIG | Remove the boot-time layout before the reboot" not in names  # the last verified layout stays
    hold = [block["block"][names.index(name)] for name in HOLD]
    assert all(task["when"] == reboot["when"] for task in hold)
    # after the reboot and before the layout is applied again, the clients enabled at boot leave again
    after = block["block"][names.index(REBOOT) + 1 : names.index("MIG | Apply the layout again after the reboot")]
    assert [(t.get("ansible.builtin.include_tasks"), t.get("when")) for t in after] == [
        ("clients_stop.yml", "aligned_dra_mig_rebooted is changed")
    ]
    return hold


def test_the_rollouts_reboot_holds_the_last_verified_layout_for_one_boot(tmp_path, site):
    """Both cases in one run, each with a state directory of its own: a rollout that reboots (a hold naming this
    boot written beside the last verified layout, which stays), and one that does not (aligned_dra_mig_reboot
    false: nothing written). Then the boot unit's own reader (node/mig/boot.py) at the reboot: a new boot ID,
    no instances made, the hold released; a later boot makes the last verified layout again."""
    old = json.dumps({"mode": "static", "layout": "old", "mig_configs": {"old": []}, "gpus": GPUS})
    procfs = tmp_path / "proc"
    (procfs / "sys" / "kernel" / "random").mkdir(parents=True)
    (procfs / "sys" / "kernel" / "random" / "boot_id").write_text(BOOT_ID + "\n")
    variables = {
        **site,
        "aligned_dra_mig_result": {"changed": True, "reboot_required": True, "gpus": [{"pci_address": GPUS[0]}]},
        "aligned_dra_mig_cordoned": True,
        "aligned_dra_sysfs_root": "/sys",  # the node's own machine: the reboot's condition holds
        "aligned_dra_procfs_root": str(procfs),  # its boot ID read from a captured tree
    }
    del variables["aligned_dra_mig_state_dir"]  # each case's own, below (extra vars would override them)
    blocks, dirs = [], {}
    for case, reboot in (("rebooted", True), ("kept", False)):
        dirs[case] = tmp_path / case / "etc"
        dirs[case].mkdir(parents=True)
        (dirs[case] / "mig.json").write_text(old)
        variables_of_case = {"aligned_dra_mig_reboot": reboot, "aligned_dra_mig_state_dir": str(dirs[case])}
        blocks.append({"block": reboot_tasks(), "vars": variables_of_case})
    run = playbook(tmp_path, blocks, variables)
    assert run.returncode == 0, run.stdout + run.stderr
    hold = dirs["rebooted"] / "mig.hold"
    assert json.loads(hold.read_text()) == {"boot_id": BOOT_ID}
    assert oct(hold.stat().st_mode & 0o777) == "0o600"
    assert (dirs["rebooted"] / "mig.json").read_text() == old  # the last verified layout stays
    assert not (dirs["kept"] / "mig.hold").exists() and (dirs["kept"] / "mig.json").read_text() == old

    state, out, err = str(dirs["rebooted"] / "mig.json"), io.StringIO(), io.StringIO()
    assert held(state, str(procfs), out, err) == 0 and hold.exists()  # the unit restarted in the same boot
    (procfs / "sys" / "kernel" / "random" / "boot_id").write_text("another-boot\n")
    assert held(state, str(procfs), out, err) == 0 and not hold.exists(), err.getvalue()  # the reboot: nothing made
    assert held(state, str(procfs), out, err) is None  # a later boot makes the last verified layout
