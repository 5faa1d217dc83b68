# SPDX-License-Identifier: Apache-2.0
"""Each NVIDIA GPU's ``mig`` entry in the probe's topology: its MIG state as NVML reads it, or why it could not.

Only on the live node (``topology_info.run`` decides), and only for NVIDIA GPUs that are physical
functions: ``pynvml`` (package ``nvidia-ml-py``) is imported when the node has one, never on a node
without. Where NVML answers, the entry is the GPU's state as ``node/mig/nvml_state.read_gpu`` reads it,
with ``readable`` true, less the GPU's PCI address (the device's own), the processes (they change from
one probe to the next, and the topology is compared between runs) and ``error``. Where it cannot (the
module is not installed; NVML does not start: no GPU driver; NVML fails for the GPU), the entry is
``{"readable": false, "reason": ...}``, the reason being the reader's ``error`` (the NVML call that failed
and NVML's message and code): the probe never fails because of MIG.

Runs on nodes (Python >= 3.9); imports ``node/`` only.
"""

from __future__ import annotations

import sys

from ansible_collections.aligned.dra.plugins.module_utils.node.topology import GPU_KINDS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

NVIDIA = "0x10de"
# read_gpu's keys the entry leaves out: the device's own address, what changes between two probes, and
# the error (an entry with one is unreadable: its reason)
LEFT_OUT = ("pci_address", "processes", "error")


def load_pynvml() -> Any:
    """The real ``pynvml`` (package ``nvidia-ml-py``); ImportError when it is not installed."""
    import pynvml

    return pynvml


def nvidia_gpus(devices: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The devices that get a ``mig`` entry: NVIDIA GPUs, physical functions (a VF is never partitioned)."""
    return [d for d in devices if d["kind"] in GPU_KINDS and d["vendor_id"] == NVIDIA and d.get("physfn") is None]


def unreadable(reason: str) -> dict[str, Any]:
    return {"readable": False, "reason": reason}


def entry_of(state: dict[str, Any]) -> dict[str, Any]:
    """The ``mig`` entry of a GPU whose state NVML read (``nvml_state.read_gpu``'s dict)."""
    entry: dict[str, Any] = {"readable": True}
    entry.update((key, value) for key, value in state.items() if key not in LEFT_OUT)
    if isinstance(entry.get("instances"), list):
        entry["instances"] = [
            {key: value for key, value in instance.items() if key not in LEFT_OUT} for instance in entry["instances"]
        ]
    return entry


def read_entries(addresses: list[str], load_nvml: Callable[[], Any] | None = None) -> list[dict[str, Any]]:
    """The ``mig`` entry of each GPU in ``addresses``, in their order (``nvml_state.read_node``: NVML started
    once for all, and shut down)."""
    try:
        nvml = (load_nvml or load_pynvml)()
    except ImportError:
        reason = f"nvidia-ml-py (module pynvml) is not installed for {sys.executable}"
        return [unreadable(reason) for _address in addresses]
    from ansible_collections.aligned.dra.plugins.module_utils.node.mig import nvml_state

    # read_node never raises for NVML: a GPU it could not read (no driver, lost, an error) has its error
    states = nvml_state.read_node(nvml, addresses)
    return [unreadable(state["error"]) if state.get("error") else entry_of(state) for state in states]


def add_entries(devices: list[dict[str, Any]], load_nvml: Callable[[], Any] | None = None) -> None:
    """Give each NVIDIA GPU of ``devices`` its ``mig`` entry (in place); nothing is loaded without one."""
    gpus = nvidia_gpus(devices)
    if not gpus:
        return
    for device, entry in zip(gpus, read_entries([d["pci_address"] for d in gpus], load_nvml)):
        device["mig"] = entry
