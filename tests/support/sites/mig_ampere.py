# SPDX-License-Identifier: Apache-2.0
"""TEST FIXTURE: a MIG site of Ampere GPUs beside one of Hopper GPUs: the DGX H100 fixture's probe with its
GPUs' PCI device ID changed (an A100 40GB, documented geometry), or with the ``mig`` entry NVML would give
(read from the fake NVML: architecture, MIG mode, profiles). Never shipped."""

from __future__ import annotations

import copy
from typing import Any

from ansible_collections.aligned.dra.plugins.module_utils.node.mig import nvml_state
from ansible_collections.aligned.dra.plugins.module_utils.node.probe import gpu_mig
from ansible_collections.aligned.dra.tests.support.fakes.nvml import FakeNvml

H100 = "0x2330"  # H100 SXM5 80GB, Hopper
A100_40GB = "0x20b0"  # A100 SXM4 40GB, Ampere
NVML_MODELS = {H100: "H100-SXM5-80GB", A100_40GB: "A100-SXM4-40GB"}


def as_model(topology: dict[str, Any], device_id: str) -> dict[str, Any]:
    """A copy of ``topology`` whose H100 GPUs are ``device_id`` GPUs (no ``mig`` entry: documented geometry)."""
    found = copy.deepcopy(topology)
    for device in found["devices"]:
        if device.get("kind") == "gpu" and device.get("device_id") == H100:
            device["device_id"] = device_id
    return found


def probed(topology: dict[str, Any], device_id: str, mig_mode: bool = True) -> dict[str, Any]:
    """:func:`as_model`, each GPU with the probe's ``mig`` entry as the fake NVML answers for the model (MIG mode
    on, or off: NVML lists no profiles then)."""
    found = as_model(topology, device_id)
    nvml = FakeNvml()
    gpus = [d for d in found["devices"] if d.get("kind") == "gpu" and d.get("device_id") == device_id]
    for device in gpus:
        nvml.add_gpu(device["pci_address"], model=NVML_MODELS[device_id])
        if mig_mode:
            nvml.enable_mig(device["pci_address"])
    nvml.nvmlInit()
    for device in gpus:
        device["mig"] = gpu_mig.entry_of(nvml_state.read_gpu(nvml, device["pci_address"]))
    return found
