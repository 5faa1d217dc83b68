# SPDX-License-Identifier: Apache-2.0
"""TEST FIXTURE: sites and traces for the replay's ``mig`` policy (never shipped).

A site is a ``plan.json`` of nodes and each node's probe in ``nodes/``: MIG-capable GPUs of one PCI device ID
(the documented geometry: no NVML on the controller) and GPUs without MIG; or a node whose probe read NVML
(:func:`nvml_topology`, the strict fake NVML with its per-model figures: an A100 40GB's 1g.5gb is 4864 MiB).
"""

from __future__ import annotations

import json
from typing import Any

from ansible_collections.aligned.dra.plugins.module_utils.controller.replay import result as replay_result
from ansible_collections.aligned.dra.plugins.module_utils.node.mig import nvml_state
from ansible_collections.aligned.dra.tests.support.fakes.nvml import FakeNvml

A100_40 = "0x20b0"  # 8 memory slices: 1g.5gb, 1g.10gb, 2g.10gb, 3g.20gb, 4g.20gb, 7g.40gb (documented)
H100 = "0x2330"  # 1g.10gb, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb
GIB = 1 << 30
MIB = 1 << 20
DYNAMIC = {"mode": "dynamic"}


def topology(device_id: str, count: int, plain: int = 0) -> dict[str, Any]:
    """A probe of ``count`` MIG-capable GPUs of ``device_id`` and ``plain`` GPUs without MIG."""
    devices = [
        {"kind": "gpu", "vendor_id": "0x10de", "device_id": device_id, "pci_address": f"0000:{7 + i:02x}:00.0"}
        for i in range(count)
    ]
    devices += [
        {"kind": "gpu", "vendor_id": "0x10de", "device_id": "0x1db6", "pci_address": f"0000:{0x40 + i:02x}:00.0"}
        for i in range(plain)
    ]
    return {"devices": devices}


def nvml_topology(count: int) -> dict[str, Any]:
    """A probe of ``count`` A100 40GB whose MIG state the probe read from NVML (MIG mode on)."""
    nvml = FakeNvml()
    devices = []
    for i in range(count):
        address = f"0000:{7 + i:02x}:00.0"
        nvml.add_gpu(address, model="A100-SXM4-40GB")
        nvml.enable_mig(address)
    nvml.nvmlInit()
    for i in range(count):
        address = f"0000:{7 + i:02x}:00.0"
        state = nvml_state.read_gpu(nvml, address)
        device = {"kind": "gpu", "vendor_id": "0x10de", "device_id": A100_40, "pci_address": address}
        device["mig"] = {"readable": True, **{k: v for k, v in state.items() if k not in ("pci_address", "error")}}
        devices.append(device)
    return {"devices": devices}


def write_site(tmp_path, nodes: dict[str, Any]) -> str:
    """A plan of ``{node: (device id, MIG-capable GPUs, GPUs without MIG)}`` (or ``{node: probe}``) and each
    node's probe; the plan's path."""
    (tmp_path / "nodes").mkdir()
    counts = {}
    for name, shape in nodes.items():
        probe = shape if isinstance(shape, dict) else topology(*shape)
        (tmp_path / "nodes" / f"{name}.json").write_text(json.dumps(probe))
        counts[name] = len(probe["devices"])
    plan = {
        "schema_version": 1,
        "kubernetes_version": "1.36",
        "nodes": sorted(nodes),
        "classes": {"aligned-gpu": {"nodes": counts}},
        "templates": [],
    }
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    return str(tmp_path / "plan.json")


def write_trace(tmp_path, rows: list[str], header: str = "name,submit,end,gpus,gpu_memory") -> str:
    (tmp_path / "trace.csv").write_text("\n".join([header, *rows]) + "\n")
    return str(tmp_path / "trace.csv")


def replay_mig(tmp_path, rows, nodes, mig, mode="saturation", **options) -> dict[str, Any]:
    """The ``mig`` policy's result of ``rows`` on the site ``nodes`` under ``mig`` (``{host: settings}``)."""
    return replay_result.replay(
        write_trace(tmp_path, rows), "csv", "mig", plan=write_site(tmp_path, nodes), mode=mode, mig=mig, **options
    )
