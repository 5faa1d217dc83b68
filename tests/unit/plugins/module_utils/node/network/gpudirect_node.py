# SPDX-License-Identifier: Apache-2.0
"""A node for the GPUDirect tests: a GPU and a NIC below one PCIe switch (PIX), a second NIC on another root.

The trees are built by the sysfs builder; the config files of the functions on
the way are then replaced by full 4096-byte spaces with an extended capability
list (AER at 0x100, ACS at 0x148), as a root reader of a live node gets them.
They are plain files: a write at an offset changes those bytes only, as on sysfs.
"""

from __future__ import annotations

import os
import struct

from ansible_collections.aligned.dra.plugins.module_utils.node.topology import p2p
from ansible_collections.aligned.dra.plugins.module_utils.node.topology.prober import probe
from ansible_collections.aligned.dra.tests.support.node_side import sysfs_builder

GPU, NIC, FAR_NIC = "0000:18:00.0", "0000:19:00.0", "0000:31:00.0"
ROOT, UPSTREAM, DOWN_GPU, DOWN_NIC, FAR_ROOT = (
    "0000:15:01.0",
    "0000:16:00.0",
    "0000:17:00.0",
    "0000:17:01.0",
    "0000:30:01.0",
)
ACS_AT = 0x148
# Source Validation, Request Redirect, Completion Redirect, Upstream Forwarding: RR and CR clear to SV|UF.
REDIRECTING = 0x001D
CLEARED = 0x0011
ROOT_PORT = {"type": "bridge", "vendor": 0x8086, "device": 0x352A, "addr": "01.0", "link": "gen5x16"}
SWITCH = {"type": "switch", "vendor": 0x1000, "device": 0xC030, "link": "gen5x16"}


def nic(name):
    return {
        "vendor": 0x15B3,
        "device": 0x1021,
        "class": 0x020700,
        "link": "gen5x16",
        "driver": "mlx5_core",
        "netdevs": [{"name": "auto", "type": "ib"}],
        "rdma": {"name": name, "link_layer": "InfiniBand"},
    }


def spec(gpu_driver="nvidia"):
    gpu = {"vendor": 0x10DE, "device": 0x2330, "class": 0x030200, "link": "gen5x16", "driver": gpu_driver}
    return {
        "name": "gpudirect",
        "cpu": {"vendor": "GenuineIntel", "model": "test", "threads_per_core": 1},
        "numa": {"nodes": [{"id": 0, "cpus": "0-3", "memory_kb": 1000000, "package": 0}]},
        "iommu": {"type": "identity"},  # passthrough: ACS may be cleared
        "hostbridges": [
            {
                "bus": 0x15,
                "numa_node": 0,
                "children": [
                    dict(
                        ROOT_PORT,
                        children=[dict(SWITCH, downstream=[{"children": [gpu]}, {"children": [nic("mlx5_0")]}])],
                    )
                ],
            },
            {"bus": 0x30, "numa_node": 0, "children": [dict(ROOT_PORT, children=[nic("mlx5_1")])]},
        ],
    }


def extended_config(header: bytes, control: int | None) -> bytes:
    """A 4096-byte config space: ``header``, a fill pattern, AER at 0x100 and (``control`` not None) ACS at 0x148."""
    config = bytearray((i * 7 + 3) & 0xFF for i in range(p2p.EXTENDED_CONFIG_SIZE))
    config[: len(header)] = header
    following = ACS_AT if control is not None else 0
    struct.pack_into("<I", config, 0x100, 0x0001 | (1 << 16) | (following << 20))
    if control is not None:
        struct.pack_into("<IHH", config, ACS_AT, p2p.ACS_CAP_ID | (1 << 16), 0x005F, control)
    return bytes(config)


def config_file(root, bdf):
    return os.path.join(root, "sys", "bus", "pci", "devices", bdf, "config")


def set_config(root, bdf, control):
    path = config_file(root, bdf)
    with open(path, "rb") as fh:
        header = fh.read(64)
    with open(path, "wb") as fh:
        fh.write(extended_config(header, control))


def snapshot(root):
    found = {}
    devices = os.path.join(root, "sys", "bus", "pci", "devices")
    for bdf in sorted(os.listdir(devices)):
        with open(os.path.join(devices, bdf, "config"), "rb") as fh:
            found[bdf] = fh.read()
    return found


def build(tmp_path, gpu_driver="nvidia"):
    root = str(tmp_path / "node")
    sysfs_builder.build(spec(gpu_driver), root)
    for bdf, control in ((ROOT, REDIRECTING), (UPSTREAM, 0x0001), (DOWN_GPU, REDIRECTING), (DOWN_NIC, 0x003D)):
        set_config(root, bdf, control)
    for bdf in (GPU, NIC, FAR_NIC):
        set_config(root, bdf, None)
    set_config(root, FAR_ROOT, REDIRECTING)
    return root


def topology(root, mode="passthrough", peer=None, vfio=()):
    found = dict(probe(f"{root}/sys", f"{root}/proc"))
    groups = {GPU: "identity" if mode == "passthrough" else "DMA", NIC: "identity" if mode == "passthrough" else "DMA"}
    found["gpudirect"] = {
        "iommu": {"mode": mode, "groups": groups, "cmdline": []},
        "peer_memory": peer or {},
        "vfio": list(vfio),
    }
    return found


def cmdline(root, text):
    with open(os.path.join(root, "proc", "cmdline"), "w", encoding="utf-8") as fh:
        fh.write(text + "\n")


class Grub:
    """TEST FAKE of update-grub: counts its runs; ``which`` finds it only when installed."""

    def __init__(self, installed=True):
        self.installed = installed
        self.runs = 0

    def __call__(self):
        self.runs += 1
        return 0, ""

    def which(self, name):
        return f"/usr/sbin/{name}" if self.installed and name == "update-grub" else None
