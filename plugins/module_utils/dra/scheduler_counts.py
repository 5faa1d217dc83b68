# SPDX-License-Identifier: Apache-2.0
"""What schedulers other than kube-scheduler count as a GPU, from the names DRA gives them.

KAI Scheduler (v0.17) decides what a DRA GPU is by name (its
``IsGPUDeviceClass``, case-insensitive): a node's DRA GPUs are every device of
the ResourceSlices whose driver name contains ``gpu``, and a claim's GPUs are
its ``exactly`` requests whose DeviceClass name contains ``gpu``.
:func:`kai_counts_as_gpu` is that rule, read by the planner (the GPUs KAI
counts per node) and the teams stage (what KAI would miscount).

The code runs on nodes (Python >= 3.9) and imports nothing from Ansible.
"""

from __future__ import annotations


def kai_counts_as_gpu(name: object) -> bool:
    """KAI's rule: a driver (of a slice) or a DeviceClass (of a request) whose name contains ``gpu``."""
    return "gpu" in str(name or "").lower()
