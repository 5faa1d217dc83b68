# SPDX-License-Identifier: Apache-2.0
"""Per node, the GPUs its drivers publish beside the GPUs KAI Scheduler would count there.

A device is a GPU when its driver says so: the collection's driver's
``kind`` (``gpu`` or ``accelerator``, under ``dra.aligned.dev/`` whatever
the driver's name, so also for a split GPU driver's devices), NVIDIA's
driver's ``type`` (``gpu`` or ``mig``). KAI counts every device of a driver
whose name contains ``gpu`` (:func:`scheduler_counts.kai_counts_as_gpu`),
whatever it is: under one driver that publishes GPUs and NICs as
``dra.aligned.dev`` does, it counts none; run split by kind
(``device_options.split_gpu_driver``, e.g. ``gpu.aligned.dev``), it counts
exactly the GPUs; under a ``gpu`` driver that also published NICs it would
count them. ``plan.json`` ``gpu_counts`` and the site report show both, so a
mismatch is seen before rollout.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.dra import device_model
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra
from ansible_collections.aligned.dra.plugins.module_utils.dra.scheduler_counts import kai_counts_as_gpu

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

GPU_KINDS = ("gpu", "accelerator")  # the collection's driver: <driver>/kind
NVIDIA_GPU_TYPES = ("gpu", "mig")  # NVIDIA's driver: gpu.nvidia.com/type


def is_gpu(device: dict[str, Any]) -> bool:
    """A GPU by its driver's own attribute (the collection's ``kind``, another driver's ``kind`` or NVIDIA's ``type``)."""
    driver = device.get("driver") or dra.DRIVER_NAME
    attributes = device_model.flat_attributes(device, driver)
    if device_model.collection_device(driver, attributes):
        return attributes.get(device_model.ATTR_KIND) in GPU_KINDS
    return attributes.get(f"{driver}/kind") in GPU_KINDS or attributes.get(f"{driver}/type") in NVIDIA_GPU_TYPES


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
