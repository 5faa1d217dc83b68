# SPDX-License-Identifier: Apache-2.0
"""node/mig/boot.py as aligned-dra-mig.service runs it: ``python -m`` from the library zip the role installs
(built from the role's own list of files), NVML the fake ``pynvml`` on the process's path (``write_module``):
after a reboot (instances gone, MIG mode on) the layout's instances are made again, a second boot changes
nothing, the rollout's layout hold of an earlier boot makes nothing and goes, and a failure is an error line and
a non-zero exit.

Its work in-process is tests/unit/plugins/module_utils/node/mig/test_boot.py's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import yaml

from ansible_collections.aligned.dra.plugins.plugin_utils.library_zip import library_zip
from ansible_collections.aligned.dra.tests.support.fakes.nvml import FakeNvml, write_module

A100, H100 = "0000:18:00.0", "0000:2a:00.0"
SEVEN = {
    "seven": [
        {"device-filter": ["0x233010DE"], "devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}},
        {"device-filter": ["0x20B010DE"], "devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 7}},
    ]
}


def role_library(repo_root, tmp_path):
    """The zip the mig role installs: its persist.yml's list of files, zipped as aligned.dra.node_library zips."""
    tasks = yaml.safe_load((repo_root / "roles" / "mig" / "tasks" / "persist.yml").read_text())
    (install,) = [t for t in tasks[0]["block"] if t["name"] == "MIG | Install the MIG library"]
    path = tmp_path / "mig.zip"
    files = install["aligned.dra.node_library"]["files"]
    path.write_bytes(library_zip(str(repo_root / "plugins" / "module_utils"), files))
    return path


def unit_run(library, shim, state):
    """ExecStart of the unit: the zip and the fake pynvml only on the path, run from an empty directory."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = f"{library}{os.pathsep}{shim}"
    return subprocess.run(
        [sys.executable, "-m", "ansible_collections.aligned.dra.plugins.module_utils.node.mig.boot", str(state)],
        capture_output=True,
        text=True,
        check=False,
        cwd=str(shim),
        env=env,
        timeout=120,
    )


def test_the_unit_makes_the_layout_again_after_a_reboot_and_a_second_boot_changes_nothing(repo_root, tmp_path):
    library = role_library(repo_root, tmp_path)
    nvml_file, shim = tmp_path / "nvml.json", tmp_path / "shim"
    shim.mkdir()
    nvml = FakeNvml()
    for bus, model in ((A100, "A100-SXM4-40GB"), (H100, "H100-SXM5-80GB")):
        nvml.add_gpu(bus, model=model)
        nvml.enable_mig(bus)
        for _slot in range(7):
            nvml.create(bus, "1g.10gb" if bus == H100 else "1g.5gb")
    made = {bus: [(i["profile"], i["start"]) for i in nvml.instances(bus)] for bus in (A100, H100)}
    nvml.write_state(nvml_file)
    write_module(shim, nvml_file)
    nvml = FakeNvml.from_state_file(nvml_file)
    for bus in (A100, H100):
        nvml.reset(bus, reboot=True)  # the reboot: MIG mode on, no instance
    state = tmp_path / "mig.json"
    state.write_text(json.dumps({"mode": "static", "layout": "seven", "mig_configs": SEVEN, "gpus": [A100, H100]}))

    done = unit_run(library, shim, state)
    assert (done.returncode, done.stderr) == (0, ""), done.stdout + done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == {"layout": "seven", "changed": [A100, H100], "failed": []}
    after = FakeNvml.from_state_file(nvml_file)
    assert {bus: sorted((i["profile"], i["start"]) for i in after.instances(bus)) for bus in (A100, H100)} == {
        bus: sorted(found) for bus, found in made.items()
    }

    again = unit_run(library, shim, state)
    assert again.returncode == 0 and json.loads(again.stdout.splitlines()[-1])["changed"] == []

    # the rollout's reboot for a layout change: its hold (an earlier boot's ID) makes nothing, and goes
    hold = tmp_path / "mig.hold"
    hold.write_text(json.dumps({"boot_id": "an-earlier-boot"}))
    after.reset(A100, reboot=True)
    held = unit_run(library, shim, state)
    assert (held.returncode, held.stderr) == (0, ""), held.stdout + held.stderr
    assert held.stdout.startswith("aligned-dra-mig: the MIG rollout rebooted the node for a layout change (")
    assert not hold.exists() and FakeNvml.from_state_file(nvml_file).instances(A100) == []

    # a GPU gone from the bus: an error line naming it, a failed unit; the other GPU is as the layout says
    after.remove_gpu(H100)
    failed = unit_run(library, shim, state)
    assert failed.returncode == 1
    assert failed.stderr.startswith(f"<3>aligned-dra-mig: gpus.pci_addresses[0]: no GPU {H100} on this node")
    assert json.loads(failed.stdout.splitlines()[-1])["failed"] == [H100]
