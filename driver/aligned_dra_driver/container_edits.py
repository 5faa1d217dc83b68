# SPDX-License-Identifier: Apache-2.0
"""The CDI container edits a prepared device gets: device nodes, environment, sharing mounts, the NIC hook.

A GPU gets its device nodes (NVIDIA: ``nvidia<minor>`` and the control nodes;
others: the DRI render node and card, AMD also ``kfd``) and its sharing
settings; an RDMA NIC gets ``rdma_cm`` and its verbs nodes, and, when its
network interface moves into the pod, the ``createRuntime`` hook that moves it.
"""

from __future__ import annotations

import os
from typing import Any

from .inventory import Inventory, Options
from .netdev import netdevs_of
from .sharing import gpu_sharing_edits

NVIDIA_CONTROL_NODES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")


class PrepareError(RuntimeError):
    """This claim cannot be prepared; the message goes into the claim's answer."""


def device_node(dev_root: str, container_path: str, required: bool = True) -> dict[str, str] | None:
    """The CDI device node for ``container_path`` (under ``/dev``), taken from the same path under ``dev_root``."""
    relative = os.path.relpath(container_path, "/dev")
    host = os.path.join(dev_root, relative)
    if not os.path.exists(host):
        if required:
            raise PrepareError(f"device node {host} does not exist")
        return None
    return {"path": container_path, "hostPath": host}


def gpu_edits(
    opts: Options, topo: dict[str, Any], uid: str, result: dict[str, Any], cfg: dict[str, Any], claim: dict[str, Any]
) -> dict[str, Any]:
    """A GPU's edits: its device nodes (a required one missing fails the claim), environment and sharing."""
    gpu = topo.get("gpu") or {}
    nodes: list[dict[str, str]] = []
    vendor = topo.get("vendor_id")
    if vendor == "0x10de":
        if isinstance(gpu.get("minor"), int):
            nodes.append(device_node(opts.dev_root, f"/dev/nvidia{gpu['minor']}"))  # type: ignore[arg-type]
        nodes.extend(
            n for n in (device_node(opts.dev_root, f"/dev/{c}", required=False) for c in NVIDIA_CONTROL_NODES) if n
        )
    else:
        if gpu.get("render_node"):
            nodes.append(device_node(opts.dev_root, f"/dev/dri/{gpu['render_node']}"))  # type: ignore[arg-type]
        if gpu.get("card"):
            card = device_node(opts.dev_root, f"/dev/dri/{gpu['card']}", required=False)
            if card:
                nodes.append(card)
        if vendor == "0x1002":
            kfd = device_node(opts.dev_root, "/dev/kfd", required=False)
            if kfd:
                nodes.append(kfd)
    if not nodes:
        raise PrepareError(f"no device node found for GPU {topo['pci_address']}")
    key = topo["pci_address"].replace(":", "_").replace(".", "_").upper()
    env = [f"ALIGNED_DRA_GPU_{key}={gpu.get('uuid') or topo['pci_address']}"]
    if vendor == "0x10de" and gpu.get("uuid"):
        env.append(f"NVIDIA_VISIBLE_DEVICES={gpu['uuid']}")
    edits: dict[str, Any] = {"deviceNodes": nodes, "env": env}
    sharing = gpu_sharing_edits(opts, topo, uid, result, cfg, claim)
    if sharing:
        edits["env"].extend(sharing.get("env", []))
        if sharing.get("mounts"):
            edits["mounts"] = sharing["mounts"]
    return edits


def nic_edits(
    opts: Options, topo: dict[str, Any], cfg: dict[str, Any], inventory: Inventory
) -> tuple[dict[str, Any], dict[str, Any] | None, dict[str, Any] | None]:
    """A NIC's edits, the record of its moved interface (for Unprepare) and its status networkData, or None each."""
    bdf = topo["pci_address"]
    key = bdf.replace(":", "_").replace(".", "_").upper()
    edits: dict[str, Any] = {"env": []}
    nodes: list[dict[str, str]] = []
    rdma_names = topo.get("rdma_devices") or []
    if rdma_names:
        cm = device_node(opts.dev_root, "/dev/infiniband/rdma_cm", required=False)
        if cm:
            nodes.append(cm)
        for rdma_name in rdma_names:
            for char in (inventory.rdma.get(rdma_name) or {}).get("char_devices") or []:
                nodes.append(device_node(opts.dev_root, f"/dev/infiniband/{char}"))  # type: ignore[arg-type]
        edits["env"].append(f"ALIGNED_DRA_RDMA_{key}={rdma_names[0]}")
    if nodes:
        edits["deviceNodes"] = nodes
    netdevs = topo.get("netdevs") or []
    netdev_record = None
    network: dict[str, Any] | None = None
    if netdevs and cfg.get("moveToPod", True):
        original = dict(netdevs[0])
        # the name now, not the last scan's: a NIC renamed since (back from a pod) must not be
        # recorded under a passing name
        now = netdevs_of(opts.sysfs_root, bdf)
        if now:
            original["name"] = now[0]
        name = cfg.get("interfaceName") or original["name"]
        args = [
            "aligned-dra-netdev-hook",
            "--pci-address",
            bdf,
            "--sysfs-root",
            opts.sysfs_root,
            "--name",
            name,
        ]
        if cfg.get("mtu"):
            args += ["--mtu", str(cfg["mtu"])]
        for address in cfg.get("addresses", []):
            args += ["--address", address]
        for route in cfg.get("routes", []):
            args += ["--route", route["destination"] + ("," + route["gateway"] if route.get("gateway") else "")]
        if inventory.rdma_exclusive and rdma_names:
            args += ["--rdma-device", rdma_names[0]]
        edits["hooks"] = [{"hookName": "createRuntime", "path": opts.netdev_hook, "args": args, "timeout": 30}]
        edits["env"].append(f"ALIGNED_DRA_NIC_{key}={name}")
        netdev_record = {
            "original_name": original["name"],
            "original_mtu": original.get("mtu"),
            "interface_name": name,
        }
        network = {"interfaceName": name}
        if cfg.get("addresses"):
            network["ips"] = list(cfg["addresses"])
        if original.get("address"):
            network["hardwareAddress"] = original["address"]
    elif netdevs:
        edits["env"].append(f"ALIGNED_DRA_NIC_{key}={netdevs[0]['name']}")
    return edits, netdev_record, network
