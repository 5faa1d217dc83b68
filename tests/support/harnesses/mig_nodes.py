# SPDX-License-Identifier: Apache-2.0
"""TEST HARNESS (never shipped): the MIG nodes of the playbook tests (tests/integration/playbooks/test_mig*.py).

Each node is a DGX H100-like sysfs tree whose NVML is the fake one (its ``pynvml.py`` on the node module's
PYTHONPATH, through the node's own interpreter wrapper, so each node has its own GPUs), with the fake
``systemctl`` on its PATH; and the cluster those nodes are in, on the fake API server.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from ansible_collections.aligned.dra.tests.support.fakes.apiserver import FakeApiServer
from ansible_collections.aligned.dra.tests.support.fakes.apiserver.daemon import create_workload
from ansible_collections.aligned.dra.tests.support.fakes.nvml import FakeNvml, write_module
from ansible_collections.aligned.dra.tests.support.fakes.systemctl import write_systemctl
from ansible_collections.aligned.dra.tests.support.harnesses.playbook_runs import tree_vars
from ansible_collections.aligned.dra.tests.support.node_side.sysfs_builder import build_tree, load_layout

REPO = Path(__file__).resolve().parents[3]
LAYOUT = REPO / "tests" / "fixtures" / "layouts" / "dgx-h100.yml"
TWO_3G = {"two-3g": [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}]}
SEVEN_1G = {"seven-1g": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}]}


def gpu_addresses(tree: Path) -> list[str]:
    devices = tree / "sys" / "bus" / "pci" / "devices"
    return [
        path.name
        for path in sorted(devices.iterdir())
        if (path / "vendor").read_text().strip() == "0x10de" and (path / "class").read_text().startswith("0x03")
    ]


def node(
    root: Path, name: str, model: str = "H100-SXM5-80GB", units: dict[str, str] | None = None
) -> tuple[dict, Path, list[str]]:
    """A node's host vars (its tree, its interpreter with the fake pynvml, and on its PATH the fake systemctl
    with ``units`` and an ``nvidia-smi`` whose GPU reset fails), its NVML state file and GPUs."""
    tree = Path(build_tree(load_layout(LAYOUT), root / name))
    addresses = gpu_addresses(tree)
    nvml = FakeNvml(procfs=tree / "proc")
    for address in addresses:
        nvml.add_gpu(address, model=model)
    state = root / name / "nvml.json"
    nvml.write_state(state)
    shim = root / name / "shim"
    shim.mkdir()
    write_module(shim, state)
    tools = root / name / "bin"
    write_systemctl(tools, root / name / "systemd.json", units or {})
    (tools / "nvidia-smi").write_text("#!/bin/sh\necho 'GPU reset failed: in use by another client' >&2\nexit 1\n")
    (tools / "nvidia-smi").chmod(0o755)
    python = root / name / "python"
    python.write_text(f'#!/bin/sh\nPATH={tools}:$PATH PYTHONPATH={shim} exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    return {**tree_vars(tree), "ansible_python_interpreter": str(python)}, state, addresses


def changed(stdout: str, host: str) -> int:
    """The host's ``changed`` in the PLAY RECAP."""
    return int(re.search(rf"^{host}\s+: ok=\d+\s+changed=(\d+)", stdout, re.M).group(1))


def instances(state: Path, addresses: list[str]) -> dict[str, list[tuple[str, int]]]:
    nvml = FakeNvml.from_state_file(state)
    return {a: sorted((i["profile"], i["start"]) for i in nvml.instances(a)) for a in addresses}


def gpu_state(state: Path, addresses: list[str]) -> dict[str, tuple[dict, list[tuple[str, int]]]]:
    """Each GPU's MIG mode (current and pending) and instances."""
    nvml = FakeNvml.from_state_file(state)
    return {a: (dict(nvml.gpus[a].mig), instances(state, [a])[a]) for a in addresses}


# -- a cluster ------------------------------------------------------------------------------------------

UNITS = {"nvidia-dcgm.service": "active", "dcgm-exporter.service": "active", "aligned-dra-driver.service": "inactive"}
EXPORTER_LABEL = "nvidia.com/gpu.deploy.dcgm-exporter"
PAUSE_LABEL = "aligned.dra/deploy.driver"
DCGM = "nvidia-dcgm.service"
RECORD = "aligned.dra/mig-rollout"
DRIVER_LABELS = {"app.kubernetes.io/name": "aligned-dra-driver", "app.kubernetes.io/component": "kubelet-plugin"}


def cluster(api: FakeApiServer, nodes: list[str]) -> None:
    """The nodes (the GPU operator's exporter label on), an exporter and the bundled driver's DaemonSet pod on
    each, and a workload on the first."""
    for name in nodes:
        api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {EXPORTER_LABEL: "true"}}})
    create_workload(api, nodes, [f"{nodes[0]}/default/trainer"], ["gpu-operator/nvidia-dcgm-exporter"])
    template = {"metadata": {"labels": DRIVER_LABELS}, "spec": {"containers": [{"name": "driver", "image": "x:1"}]}}
    owner = api.create(
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "aligned-dra-driver", "namespace": "aligned-dra"},
            "spec": {"selector": {"matchLabels": DRIVER_LABELS}, "template": template},
        }
    )
    reference = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "aligned-dra-driver", "controller": True}
    for name in nodes:
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"aligned-dra-driver-{name}",
                "namespace": "aligned-dra",
                "labels": DRIVER_LABELS,
                "ownerReferences": [{**reference, "uid": owner["metadata"]["uid"]}],
            },
            "spec": {"nodeName": name, **template["spec"]},
        }
        api.create(pod)


def cluster_site(api: FakeApiServer, root: Path) -> dict:
    """The site's variables for a rollout against ``api``: layouts two-3g (applied) and seven-1g, its
    kubeconfig under ``root``, short drain and client waits."""
    return {
        "aligned_dra_site": "lab",
        "aligned_dra_output_dir": str(root / "output"),
        "aligned_dra_claims": {"templates": {"fractional_gpu": {"enabled": False}}},
        "aligned_dra_mig": {"mode": "static", "mig_configs": {**TWO_3G, **SEVEN_1G}, "layout": "two-3g"},
        "aligned_dra_kubeconfig": str(api.write_kubeconfig(root / "kubeconfig")),
        "aligned_dra_drain_timeout": 10,
        "aligned_dra_mig_gpu_clients_timeout": 10,
    }


def pods_on(api: FakeApiServer, node_name: str) -> list[str]:
    return sorted(p["metadata"]["name"] for p in api.list("pods") if p["spec"].get("nodeName") == node_name)


def node_writes(api: FakeApiServer, node_name: str) -> list[tuple[str, str]]:
    return [
        (method, path)
        for method, path, _type in api.requests
        if method in ("PATCH", "POST", "PUT", "DELETE") and (f"/nodes/{node_name}" in path or path.endswith(node_name))
    ]
