# SPDX-License-Identifier: Apache-2.0
"""``aligned.dra.topology_info``'s run: the node's topology, and what only the live node can add to it.

The module passes its parameters to :func:`run` and exits with the result, or fails with the message of
:class:`ProbeError`. The topology is the probe's (``node/topology/prober``), the same whoever reads it.
On the live node (``sysfs_root`` is this machine's ``/sys``) the result also has what a captured tree
cannot say about the machine that reads it: the IPv4 addresses of the RDMA NICs' interfaces, the
driver's record of the NICs a pod holds, and each NVIDIA GPU's MIG state from NVML (``gpu_mig``).

Runs on nodes (Python >= 3.9); imports ``node/`` only.
"""

from __future__ import annotations

import os

from ansible_collections.aligned.dra.plugins.module_utils.node.network import plan as network_plan
from ansible_collections.aligned.dra.plugins.module_utils.node.topology.addresses import ipv4_addresses
from ansible_collections.aligned.dra.plugins.module_utils.node.topology.pci import find_pci_ids
from ansible_collections.aligned.dra.plugins.module_utils.node.topology.prober import probe
from ansible_collections.aligned.dra.plugins.module_utils.node.topology.rail_record import with_record
from ansible_collections.aligned.dra.plugins.module_utils.node.topology.rails import rail_nics

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

LIVE_SYSFS = "/sys"


class ProbeError(Exception):
    """A parameter the probe cannot work with: the message the module fails with (it names the parameter)."""


def is_live(sysfs_root: str, live_sysfs: str = LIVE_SYSFS) -> bool:
    """Whether ``sysfs_root`` is this machine's sysfs: a captured tree's interfaces, NICs and GPUs are not this machine's."""
    return os.path.realpath(sysfs_root) == live_sysfs


def netdev_addresses(topology: dict, sysfs_root: str, live_sysfs: str = LIVE_SYSFS) -> dict | None:
    """IPv4 addresses of the RDMA NIC PFs' interfaces on the live node; ``None`` (unknown) for a captured tree.

    A captured tree's interfaces are not this machine's: reading addresses by
    their names here would give whatever this machine has under those names.
    """
    if not is_live(sysfs_root, live_sysfs):
        return None
    names = sorted({n["name"] for d in rail_nics(topology) for n in d.get("netdevs") or [] if n.get("name")})
    return ipv4_addresses(names)


def _pci_ids(path: str | None) -> str | None:
    if path is None:
        return find_pci_ids()
    if not os.access(path, os.R_OK) or not os.path.isfile(path):
        raise ProbeError(f"pci_ids_path: {path} is not a readable file")
    return path


def run(
    params: Mapping[str, Any], live_sysfs: str = LIVE_SYSFS, load_nvml: Callable[[], Any] | None = None
) -> dict[str, Any]:
    """The module's result: ``changed`` (false), ``topology``, and ``network_plan`` when the option is given.

    ``live_sysfs`` is this machine's sysfs (a test names a tree of its own as the live one);
    ``load_nvml`` returns the loaded ``pynvml`` (default ``gpu_mig.load_pynvml``), called only on a
    live node with NVIDIA GPUs and ``mig`` on. Raises :class:`ProbeError` on a parameter it cannot use.
    """
    for name in ("sysfs_root", "procfs_root"):
        if not os.path.isdir(params[name]):
            raise ProbeError(f"{name}: {params[name]} is not a directory")
    pci_ids = _pci_ids(params["pci_ids_path"])
    sysfs_root = params["sysfs_root"]
    live = is_live(sysfs_root, live_sysfs)
    topology = probe(sysfs_root, params["procfs_root"], pci_ids)
    topology["netdev_addresses"] = netdev_addresses(topology, sysfs_root, live_sysfs)
    if live:
        # after the addresses: a NIC read as last seen takes the addresses its record has
        topology = with_record(topology, params["rails_record"])
        if params.get("mig", True):
            # imported here: a captured tree (the demo, the tests) never compiles it
            from ansible_collections.aligned.dra.plugins.module_utils.node.probe import gpu_mig

            gpu_mig.add_entries(topology["devices"], load_nvml)
    result: dict[str, Any] = {"changed": False, "topology": topology}
    if params["network_plan"] is not None:
        # read-only, in this round: the network stage reuses it instead of reading the node again
        result["network_plan"] = network_plan.for_probe(params["network_plan"])
    return result
