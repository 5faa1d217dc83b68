# SPDX-License-Identifier: Apache-2.0
"""Per node, the GPUs its drivers publish beside the GPUs KAI Scheduler would count there.

A device is a GPU when its driver says so: the collection's driver's
``kind`` (``gpu`` or ``accelerator``), NVIDIA's driver's ``type`` (``gpu`` or
``mig``). KAI counts every device of a driver whose name contains ``gpu``
(:func:`scheduler_counts.kai_counts_as_gpu`), whatever it is: under one driver
that publishes GPUs and NICs as ``dra.aligned.dev`` does, it counts none; under a
``gpu`` driver that also published NICs it would count them. ``plan.json``
``gpu_counts`` and the site report show both, so a mismatch is seen before
rollout.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra
from ansible_collections.aligned.dra.plugins.module_utils.dra.scheduler_counts import kai_counts_as_gpu

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

GPU_KINDS = ("gpu", "accelerator")  # the collection's driver: <driver>/kind
NVIDIA_GPU_TYPES = ("gpu", "mig")  # NVIDIA's driver: gpu.nvidia.com/type


def is_gpu(device: dict[str, Any]) -> bool:
    """A GPU by its driver's own attribute (``kind`` or NVIDIA's ``type``)."""
    driver = device.get("driver") or dra.DRIVER_NAME
    attributes = device.get("attributes") or {}
    kind = (attributes.get(f"{driver}/kind") or {}).get("string")
    gpu_type = (attributes.get(f"{driver}/type") or {}).get("string")
    return kind in GPU_KINDS or gpu_type in NVIDIA_GPU_TYPES


def node_counts(nodes: dict[str, dict[str, Any]]) -> dict[str, dict[str, int]]:
    """``{node: {"published": GPUs its drivers publish, "counted_by_kai": devices KAI counts as GPUs}}``."""
    out = {}
    for name, node in sorted(nodes.items()):
        devices = node.get("devices") or []
        out[name] = {
            "published": sum(1 for d in devices if is_gpu(d)),
            "counted_by_kai": sum(1 for d in devices if kai_counts_as_gpu(d.get("driver") or dra.DRIVER_NAME)),
        }
    return out
