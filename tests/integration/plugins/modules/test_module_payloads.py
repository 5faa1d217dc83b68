# SPDX-License-Identifier: Apache-2.0
"""What Ansible ships to a node with each module: only the module_utils its imports name.

The payload is built by ansible-core's own finder (``recursive_finder``, the one
AnsiballZ uses), in a child process: it needs Ansible's collection loader, which
pytest's plain ``ansible_collections`` imports must not share (a process to wait
on, so an integration test). The topology
package is loaded in parts, so a module that only copies trees does not carry
the probe, and no module that probes carries the summaries and the device model.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[4]

FINDER = """
import datetime, io, json, os, sys, zipfile
from ansible._internal._ansiballz import _builder
from ansible.executor import module_common
from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder

_AnsibleCollectionFinder(paths=[os.environ["ANSIBLE_COLLECTIONS_PATH"]])._install()
prefix = "ansible_collections/aligned/dra/plugins/module_utils/"
payloads = {}
for kind, path in zip(sys.argv[1::2], sys.argv[2::2]):
    name = os.path.basename(path)[:-3]
    archive = zipfile.ZipFile(io.BytesIO(), "w")
    module_common.recursive_finder(
        name,
        f"ansible_collections.aligned.dra.plugins.{kind}.{name}",
        open(path, "rb").read(),
        archive,
        datetime.datetime(2020, 1, 1),
        _builder.ExtensionManager.create(task_vars={}),
    )
    # module_utils/__init__.py is a stand-in the finder makes for the namespace package.
    payloads[name] = sorted(
        n[len(prefix):] for n in archive.namelist() if n.startswith(prefix) and n != prefix + "__init__.py"
    )
print(json.dumps(payloads))
"""

# The topology package's parts that probing needs.
PROBE = [
    f"node/topology/{part}.py"
    for part in (
        "__init__",
        "gpudirect",
        "gpus",
        "levels",
        "netdevs",
        "numa",
        "p2p",
        "parsers",
        "pci",
        "pci_walk",
        "prober",
        "rdma",
        "sysfs",
    )
]
# What every user of the package gets: the package, which defines the vocabulary (kinds, levels),
# and the __init__ of the node side above it.
PACKAGE = ["node/__init__.py", "node/topology/__init__.py"]
NODE = ["node/__init__.py"]
# The shared device model: the package and its model.
MODEL = ["dra/__init__.py", "dra/model.py"]


@pytest.fixture(scope="module")
def payloads() -> dict[str, list[str]]:
    args = []
    for path in sorted((REPO / "plugins" / "modules").glob("*.py")):
        args += ["modules", str(path)]
    args += ["module_utils", str(REPO / "plugins" / "module_utils" / "node" / "network" / "netconf.py")]
    args += ["module_utils", str(REPO / "plugins" / "module_utils" / "node" / "mig" / "boot.py")]
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(REPO / ".cache" / "collections"))
    found = subprocess.run(
        [sys.executable, "-c", FINDER, *args], capture_output=True, text=True, env=env, check=False, cwd=REPO
    )
    assert found.returncode == 0, found.stderr
    return json.loads(found.stdout)


def topology_files(files: list[str]) -> list[str]:
    return [name for name in files if name.startswith("node/topology/")]


def sides(files: list[str]) -> set[str]:
    """The top-level packages a payload takes files from: node, dra, controller (or a loose module)."""
    return {name.split("/")[0] for name in files}


# The rails' rule reader: the validation, the summaries and the report read rails with it.
RAILS = ["node/topology/rails.py"]
# The peer-to-peer rule: the device model reads which pairs flow through the host bridge with it.
P2P = ["node/topology/p2p.py"]
# The driver's record of the NICs out of the host's view: topology_info reads it (no other module).
RAIL_RECORD = ["node/topology/rail_record.py"]
# The live node's IPv4 addresses, which the rails' subnet rule needs.
ADDRESSES = ["node/topology/addresses.py"]
# topology_info's run (node/probe), and the NVML reader of each NVIDIA GPU's MIG entry it calls.
PROBE_RUN = ["node/probe/__init__.py", "node/probe/topology_info.py", "node/probe/gpu_mig.py"]
MIG_READER = ["node/mig/__init__.py", "node/mig/nvml_state.py"]


@pytest.mark.parametrize(
    ("module", "extra"), [("topology_info", [*ADDRESSES, *RAILS, *RAIL_RECORD]), ("sriov", []), ("validate", RAILS)]
)
def test_probing_modules_carry_the_probe_and_no_summaries(payloads, module, extra):
    assert topology_files(payloads[module]) == sorted([*PROBE, *extra])
    assert "dra/device_model.py" not in payloads[module]


def test_topology_info_carries_nothing_but_the_probe_the_rails_addresses_and_the_network_plan(payloads):
    # the network plan: the validation probe plans the node's network in its round (network_plan's code)
    network = [name for name in payloads["network_plan"] if name.startswith("node/network/")]
    assert "node/network/plan.py" in network
    expected = [*NODE, *PROBE, *ADDRESSES, *RAILS, *RAIL_RECORD, *network, *PROBE_RUN, *MIG_READER]
    assert payloads["topology_info"] == sorted(expected)


def test_capture_carries_what_the_probe_reads_not_the_probe(payloads):
    assert payloads["topology_capture"] == sorted(
        [
            *PACKAGE,
            "node/snapshots/__init__.py",
            "node/snapshots/capture.py",
            "node/snapshots/archive.py",
            "node/topology/reads.py",
        ]
    )


@pytest.mark.parametrize("module", ["plan", "utilization"])
def test_planning_modules_carry_the_vocabulary_and_the_cpu_list_parser_only(payloads, module):
    # dra reads a device's local CPU list (list-typed numaNode) with the probe's parser.
    assert topology_files(payloads[module]) == sorted(
        ["node/topology/__init__.py", "node/topology/parsers.py", *RAILS, *P2P]
    )
    assert "dra/device_model.py" in payloads[module]


def test_site_report_carries_the_summaries(payloads):
    assert topology_files(payloads["site_report"]) == sorted(
        ["node/topology/__init__.py", "node/topology/parsers.py", *RAILS, *P2P]
    )
    assert {"controller/topology/summary.py", "dra/device_model.py", *MODEL} <= set(payloads["site_report"])


@pytest.mark.parametrize("module", ["topology_snapshot", "rdma", "preflight"])
def test_modules_that_do_not_probe_carry_no_topology(payloads, module):
    assert topology_files(payloads[module]) == []


@pytest.mark.parametrize("module", ["claims_render", "teams_render"])
def test_rendering_modules_carry_the_device_models_cpu_list_parser_only(payloads, module):
    # through dra, which reads a device's local CPU list (list-typed numaNode) with the probe's parser
    assert topology_files(payloads[module]) == sorted(
        ["node/topology/__init__.py", "node/topology/parsers.py", *RAILS, *P2P]
    )
    assert "node/topology/prober.py" not in payloads[module]


@pytest.mark.parametrize("role", ["sriov", "rdma"])
def test_boot_time_units_get_every_file_their_code_imports(payloads, role):
    """The network roles install the library for their boot-time unit (netconf) by a list of files."""
    tasks = yaml.safe_load((REPO / "roles" / role / "tasks" / "persist.yml").read_text())
    (install,) = [task for task in tasks if task["name"] == "Install the network library"]
    files = install["aligned.dra.node_library"]["files"]
    assert sorted(files) == sorted([*payloads["netconf"], "node/network/netconf.py"])


def test_the_mig_boot_time_unit_gets_every_file_its_code_imports(payloads):
    """The mig role installs the library of its boot-time unit (node/mig/boot.py) by a list of files."""
    tasks = yaml.safe_load((REPO / "roles" / "mig" / "tasks" / "persist.yml").read_text())
    (install,) = [task for task in tasks[0]["block"] if task["name"] == "MIG | Install the MIG library"]
    files = install["aligned.dra.node_library"]["files"]
    assert sorted(files) == sorted([*payloads["boot"], "node/mig/boot.py"])
    assert sides(files) == {"node"}


@pytest.mark.parametrize("module", ["topology_info", "topology_capture", "sriov", "rdma", "network_plan"])
def test_node_side_modules_carry_nothing_of_the_controller_side(payloads, module):
    assert sides(payloads[module]) <= {"node"}


@pytest.mark.parametrize("module", ["plan", "utilization", "claims_render", "teams_render", "site_report"])
def test_controller_modules_carry_the_shared_model_and_no_node_network_code(payloads, module):
    assert set(MODEL) <= set(payloads[module])
    assert not [name for name in payloads[module] if name.startswith(("node/network/", "node/snapshots/"))]
