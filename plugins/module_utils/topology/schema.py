# SPDX-License-Identifier: Apache-2.0
"""The vocabulary of a probe result: its schema version, device kinds and levels.

Imported by the package itself, so ``topology.LEVELS`` and the like cost no
more than this file wherever the topology package is used.
"""

from __future__ import annotations

SCHEMA_VERSION = 1

# nvidia-smi topo -m levels, best first.
LEVELS = ("PIX", "PXB", "PHB", "NODE", "SYS")
LEVEL_RANK = {name: rank for rank, name in enumerate(LEVELS)}

KINDS = ("gpu", "accelerator", "nic", "rdma", "nvme", "other")
GPU_KINDS = frozenset(("gpu", "accelerator"))
NIC_KINDS = frozenset(("nic", "rdma"))
