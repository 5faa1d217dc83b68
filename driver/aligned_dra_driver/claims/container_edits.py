# SPDX-License-Identifier: Apache-2.0
"""The CDI container edits a prepared device gets: device nodes, environment, sharing mounts, the NIC hook.

A GPU gets its device nodes (NVIDIA: ``nvidia<minor>`` and the control nodes;
others: the DRI render node and card, AMD also ``kfd``) and its sharing
settings; an RDMA NIC gets ``rdma_cm`` and its verbs nodes, and, when its
network interface moves into the pod, the ``createRuntime`` hook that moves it
with the IPv4 addresses and routes it has on the host now (or those of the
claim's ``NicConfig``), which the checkpoint keeps for Unprepare.

A MIG device (:mod:`aligned_dra_driver.mig.prepare`) gets its parent GPU's
device nodes and the two ``nvidia-caps`` nodes of its GPU and compute instance
(minors from ``<procfs>/driver/nvidia/capabilities/gpu<minor>/mig/gi<G>[/ci<C>]/access``,
major from ``<procfs>/devices``), and the MIG UUID as ``NVIDIA_VISIBLE_DEVICES``.
"""

from __future__ import annotations

import os
from typing import Any

from ..devices.inventory import Inventory, Options
from ..network import addresses as layer3
from ..network.interfaces import netdevs_of, read_host
from ..sharing.fractional import gpu_sharing_edits

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
        nodes.extend(nvidia_nodes(opts, gpu))
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


def nvidia_nodes(opts: Options, gpu: dict[str, Any]) -> list[dict[str, str]]:
    """An NVIDIA GPU's ``/dev/nvidia<minor>`` (required) and the control nodes the host has."""
    nodes: list[dict[str, str]] = []
    if isinstance(gpu.get("minor"), int):
        nodes.append(device_node(opts.dev_root, f"/dev/nvidia{gpu['minor']}"))  # type: ignore[arg-type]
    nodes.extend(
        n for n in (device_node(opts.dev_root, f"/dev/{c}", required=False) for c in NVIDIA_CONTROL_NODES) if n
    )
    return nodes


def _caps_major(procfs_root: str) -> int:
    path = os.path.join(procfs_root, "devices")
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                parts = line.split()
                if len(parts) == 2 and parts[1] == "nvidia-caps" and parts[0].isdigit():
                    return int(parts[0])
    except OSError as exc:
        raise PrepareError(f"reading {path}: {exc}") from exc
    raise PrepareError(f"{path} has no nvidia-caps line (is the NVIDIA driver loaded?)")


def _caps_minor(path: str) -> int:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                key, _sep, value = line.partition(":")
                if key.strip() == "DeviceFileMinor" and value.strip().isdigit():
                    return int(value.strip())
    except OSError as exc:
        raise PrepareError(f"reading {path}: {exc}") from exc
    raise PrepareError(f"{path} has no DeviceFileMinor line")


def caps_nodes(opts: Options, gpu_minor: int, gpu_instance: int, compute_instance: int) -> list[dict[str, Any]]:
    """The ``nvidia-caps`` device nodes of a MIG device's GPU instance and compute instance."""
    major = _caps_major(opts.procfs_root)
    gi_dir = os.path.join(
        opts.procfs_root, "driver", "nvidia", "capabilities", f"gpu{gpu_minor}", "mig", f"gi{gpu_instance}"
    )
    nodes: list[dict[str, Any]] = []
    for access in (os.path.join(gi_dir, "access"), os.path.join(gi_dir, f"ci{compute_instance}", "access")):
        minor = _caps_minor(access)
        path = f"/dev/nvidia-caps/nvidia-cap{minor}"
        node: dict[str, Any] = {"path": path, "type": "c", "major": major, "minor": minor}
        host = device_node(opts.dev_root, path, required=False)
        if host:
            node["hostPath"] = host["hostPath"]
        nodes.append(node)
    return nodes


def mig_edits(opts: Options, topo: dict[str, Any], mig: dict[str, Any]) -> dict[str, Any]:
    """A MIG device's edits: the parent GPU's nodes, the instance's two nvidia-caps nodes, its MIG UUID."""
    gpu = topo.get("gpu") or {}
    if not isinstance(gpu.get("minor"), int):
        raise PrepareError(f"GPU {topo['pci_address']} has no NVIDIA minor number: its MIG devices cannot be given")
    nodes: list[dict[str, Any]] = list(nvidia_nodes(opts, gpu))
    nodes.extend(caps_nodes(opts, gpu["minor"], mig["gpu_instance"], mig["compute_instance"]))
    key = topo["pci_address"].replace(":", "_").replace(".", "_").upper()
    # NVML's MIG UUID; the older form MIG-<GPU UUID>/<GI>/<CI> where NVML gave none
    visible = mig.get("uuid") or f"MIG-{gpu.get('uuid')}/{mig['gpu_instance']}/{mig['compute_instance']}"
    env = [f"ALIGNED_DRA_MIG_{key}_GI{mig['gpu_instance']}={visible}", f"NVIDIA_VISIBLE_DEVICES={visible}"]
    return {"deviceNodes": nodes, "env": env}


def host_records(name: str) -> dict[str, Any] | None:
    """The interface's state on the host now (:func:`~aligned_dra_driver.network.interfaces.read_host`); PrepareError naming it."""
    try:
        records = read_host(name)
    except Exception as exc:  # netlink errors carry their own type
        raise PrepareError(f"reading the addresses and routes of {name}: {layer3.why(exc)}") from exc
    if records is None:
        return None
    for key, most in (("addresses", layer3.MAX_HOST_ADDRESSES), ("routes", layer3.MAX_HOST_ROUTES)):
        if len(records[key]) > most:
            raise PrepareError(
                f"{name} has {len(records[key])} IPv4 {key}; the driver keeps at most {most} to put back"
            )
    return records


def hook_args(name: str, cfg: dict[str, Any], host: dict[str, Any] | None) -> tuple[list[str], list[str]]:
    """The hook's address and route arguments, and the pod's addresses (CIDR) for the claim's status.

    The claim's ``NicConfig`` addresses and routes (``--address``, ``--route``) and the host's
    that go with the NIC (``--host-address``, ``--host-route``, :func:`aligned_dra_driver.network.addresses.carried`).
    """
    args: list[str] = []
    for address in cfg.get("addresses", []):
        args += ["--address", address]
    for route in cfg.get("routes", []):
        args += ["--route", route["destination"] + ("," + route["gateway"] if route.get("gateway") else "")]
    share = layer3.carried(host, cfg)
    for key, most in (("addresses", layer3.MAX_POD_ADDRESSES), ("routes", layer3.MAX_POD_ROUTES)):
        if len(share[key]) > most:
            raise PrepareError(
                f"{name} has {len(share[key])} IPv4 {key} to take into the pod, at most {most} go with a NIC: "
                f"give the pod's {key} in the claim's NicConfig"
            )
    for record in share["addresses"]:
        args += ["--host-address", layer3.address_arg(record)]
    for record in share["routes"]:
        args += ["--host-route", layer3.route_arg(record)]
    ips = list(cfg["addresses"]) if "addresses" in cfg else [r["address"] for r in share["addresses"]]
    return args, ips


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
        # its addresses and routes now, while it is on the host: the pod's share goes to the hook,
        # all of them to the checkpoint (the kernel flushes them when the NIC leaves)
        host = host_records(original["name"])
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
        layer3_args, ips = hook_args(original["name"], cfg, host)
        args += layer3_args
        if inventory.rdma_exclusive and rdma_names:
            args += ["--rdma-device", rdma_names[0]]
        edits["hooks"] = [{"hookName": "createRuntime", "path": opts.netdev_hook, "args": args, "timeout": 30}]
        edits["env"].append(f"ALIGNED_DRA_NIC_{key}={name}")
        netdev_record = {
            "original_name": original["name"],
            "original_mtu": original.get("mtu"),
            "interface_name": name,
        }
        if host is not None:
            netdev_record.update(
                original_up=host["up"], original_addresses=host["addresses"], original_routes=host["routes"]
            )
        network = {"interfaceName": name}
        if ips:
            network["ips"] = ips
        if original.get("address"):
            network["hardwareAddress"] = original["address"]
    elif netdevs:
        edits["env"].append(f"ALIGNED_DRA_NIC_{key}={netdevs[0]['name']}")
    return edits, netdev_record, network
