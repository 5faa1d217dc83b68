# SPDX-License-Identifier: Apache-2.0
"""Fractional GPUs: shareable devices in the slices, enforced limits in Prepare.

On clusters with consumable capacity (Kubernetes >= 1.36, or the
``DRAConsumableCapacity`` gate on), GPUs are published with
``allowMultipleAllocations: true`` and two capacities with a request policy:
``memory`` (bytes, in steps of 1 GiB, when the memory size is known) and
``compute`` (percent of the streaming multiprocessors, 1..100). The scheduler
then writes each allocation's share into the result (``consumedCapacity``) and
a ``shareID``; Prepare turns it into CUDA MPS limits
(``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE``, ``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT``)
served by one MPS control daemon per GPU that the driver starts.

On older clusters the same limits come from a ``GpuConfig`` with
``sharing.strategy: MPS`` in a claim that several pods share. The MPS limits
are the share's *limit*: its request, or ``sharing.mps.limits`` where given
(thin provisioning, :mod:`aligned_dra_driver.sharing.limits`). ``TimeSlicing``
sets the GPU's time slice (``nvidia-smi compute-policy --set-timeslice``:
Default 0, Short 1, Medium 2, Long 3) when it is not ``Default``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any

from ..collection import dra
from .limits import gpu_share

GIB = 2**30
MPS_CONTROL = "nvidia-cuda-mps-control"


class SharingError(RuntimeError):
    """The requested share cannot be enforced."""


def make_shareable(device: dict[str, Any]) -> dict[str, Any]:
    """A copy of a published GPU that several claims may allocate, with memory and compute capacities.

    The collection's device model holds the rule (``dra.make_shareable``), so that the planner plans on
    the GPUs the driver publishes.
    """
    return dra.make_shareable(device)


def mps_directory(mps_root: str, pci_address: str) -> str:
    return os.path.join(mps_root, pci_address.replace(":", "-"))


def mps_daemons(mps_root: str) -> list[str]:
    """PCI addresses of the GPUs whose MPS control daemon (its control pipe) is there."""
    try:
        names = sorted(os.listdir(mps_root))
    except OSError:
        return []
    found = []
    for name in names:
        parts = name.split("-")
        if len(parts) == 3 and os.path.exists(os.path.join(mps_root, name, "pipe", "control")):
            found.append(":".join(parts))
    return found


def ensure_mps_daemon(mps_root: str, pci_address: str, uuid: str | None) -> str:
    """Start the GPU's MPS control daemon unless its pipe directory shows one; return the directory."""
    directory = mps_directory(mps_root, pci_address)
    pipe = os.path.join(directory, "pipe")
    if os.path.exists(os.path.join(pipe, "control")):
        return directory
    binary = shutil.which(MPS_CONTROL)
    if binary is None:
        raise SharingError(f"MPS sharing needs {MPS_CONTROL}, which is not on PATH")
    os.makedirs(pipe, exist_ok=True)
    os.makedirs(os.path.join(directory, "log"), exist_ok=True)
    env = dict(os.environ)
    env.update(
        CUDA_VISIBLE_DEVICES=uuid or pci_address,
        CUDA_MPS_PIPE_DIRECTORY=pipe,
        CUDA_MPS_LOG_DIRECTORY=os.path.join(directory, "log"),
    )
    done = subprocess.run([binary, "-d"], env=env, capture_output=True, text=True, timeout=30, check=False)
    if done.returncode != 0:
        raise SharingError(f"{MPS_CONTROL} -d failed: {done.stderr.strip() or done.returncode}")
    return directory


def stop_mps_daemon(mps_root: str, pci_address: str) -> bool:
    """Ask the GPU's MPS control daemon to quit; True when one was running."""
    directory = mps_directory(mps_root, pci_address)
    pipe = os.path.join(directory, "pipe")
    binary = shutil.which(MPS_CONTROL)
    if binary is None or not os.path.exists(os.path.join(pipe, "control")):
        return False
    env = dict(os.environ, CUDA_MPS_PIPE_DIRECTORY=pipe)
    subprocess.run([binary], input="quit\n", env=env, capture_output=True, text=True, timeout=30, check=False)
    return True


TIME_SLICE_VALUES = {"Default": 0, "Short": 1, "Medium": 2, "Long": 3}


def set_time_slice(topo: dict[str, Any], time_slice: str) -> None:
    """Set an NVIDIA GPU's compute time slice with nvidia-smi."""
    if topo.get("vendor_id") != "0x10de":
        raise SharingError(f"time slices are set on NVIDIA GPUs only; {topo['pci_address']} is {topo.get('vendor_id')}")
    binary = shutil.which("nvidia-smi")
    if binary is None:
        raise SharingError("TimeSlicing with a timeSlice needs nvidia-smi, which is not on PATH")
    gpu = (topo.get("gpu") or {}).get("uuid") or topo["pci_address"]
    done = subprocess.run(
        [binary, "compute-policy", "-i", gpu, f"--set-timeslice={TIME_SLICE_VALUES[time_slice]}"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    if done.returncode != 0:
        raise SharingError(f"nvidia-smi compute-policy failed: {(done.stderr or done.stdout).strip()}")


def gpu_sharing_edits(
    opts: Any, topo: dict[str, Any], uid: str, result: dict[str, Any], cfg: dict[str, Any], claim: dict[str, Any]
) -> dict[str, Any]:
    """Environment and mounts that enforce a GPU share (its limit); empty when the GPU is not shared."""
    sharing = cfg.get("sharing") or {}
    share = gpu_share(result, cfg)
    if share is None and sharing.get("strategy") != "MPS":
        if sharing.get("strategy") != "TimeSlicing":
            return {}
        time_slice = sharing.get("timeSlice", "Default")
        if time_slice != "Default":
            set_time_slice(topo, time_slice)
        return {"env": [f"ALIGNED_DRA_GPU_SHARING=TimeSlicing/{time_slice}"]}
    limit = share["limit"] if share else {}  # MPS without a share of its own: no limits, as before
    if topo.get("vendor_id") != "0x10de":
        raise SharingError(f"MPS sharing needs an NVIDIA GPU; {topo['pci_address']} is {topo.get('vendor_id')}")
    gpu = topo.get("gpu") or {}
    directory = ensure_mps_daemon(opts.mps_root, topo["pci_address"], gpu.get("uuid"))
    env = [
        "ALIGNED_DRA_GPU_SHARING=MPS",
        "CUDA_MPS_PIPE_DIRECTORY=/run/nvidia-mps",
    ]
    if "compute" in limit:
        env.append(f"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE={limit['compute']}")
    if "memory" in limit:
        mib = max(1, limit["memory"] // 2**20)
        env.append(f"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT={gpu.get('uuid') or 0}={mib}M")
    mounts = [
        {
            "hostPath": os.path.join(directory, "pipe"),
            "containerPath": "/run/nvidia-mps",
            "options": ["rbind", "rw"],
        }
    ]
    return {"env": env, "mounts": mounts}
