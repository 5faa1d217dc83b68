# SPDX-License-Identifier: Apache-2.0
"""The MIG side of the bundled driver run in process (tests only, never shipped): a node with a boot ID, the
strict NVML fake as the driver's ``pynvml``, and MIG devices published and claimed by hand.

    tree = m.node_tree()                      # h.NodeTree with <proc>/sys/kernel/random/boot_id = m.BOOT
    nvml = m.fake(tree, monkeypatch)          # an H100 in MIG mode at h.GPU_BDF (minor 0)
    driver, kube = m.make(tree)               # restored and scanned; four MIG devices published (m.publish)
    ref = m.claim(kube, "a", m.mig_name("1g.10gb", 0))
    driver.prepare([ref]); m.instances(nvml)  # [("1g.10gb", 0, [0])]

The scan's MIG part (``aligned_dra_driver.mig.devices``, tested on its own) is left out (:class:`AsProbed`):
the GPU whole stays as the topology probe has it, and :func:`publish` adds the MIG devices a test allocates.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from aligned_dra_driver.devices.inventory import Options
from aligned_dra_driver.kubelet import driver as drv
from aligned_dra_driver.mig import prepare as mig_prepare

from ansible_collections.aligned.dra.tests.support.fakes import nvml as fake_nvml
from ansible_collections.aligned.dra.tests.support.harnesses import driver as h
from ansible_collections.aligned.dra.tests.support.harnesses import driver_doubles as d

BOOT = "11111111-2222-3333-4444-555555555555"
PUBLISHED = (("1g.10gb", 0, 1), ("1g.10gb", 1, 1), ("2g.20gb", 0, 2), ("3g.40gb", 4, 4))


class Crash(BaseException):
    """The driver process dies here (no except clause of the driver catches it)."""


class AsProbed:
    """The scan's MIG part left out: devices as the topology probe has them (Prepare and Unprepare on their own)."""

    mig_gpus: set[str] = set()

    def apply(self, devices: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        return devices, []


def node_tree() -> Iterator[h.NodeTree]:
    """A node (one GPU at ``h.GPU_BDF``) whose boot ID is :data:`BOOT`; removed after (a fixture's body)."""
    root = h.memory_tmp()
    tree = h.NodeTree.build(root)
    (tree.proc / "sys" / "kernel" / "random").mkdir(parents=True, exist_ok=True)
    (tree.proc / "sys" / "kernel" / "random" / "boot_id").write_text(BOOT + "\n")
    yield tree
    shutil.rmtree(root, ignore_errors=True)


def fake(node: h.NodeTree, monkeypatch: Any, model: str = "H100-SXM5-80GB", mig: bool = True) -> fake_nvml.FakeNvml:
    """The node's GPU (minor 0) in tests/support/fakes/nvml.py, the driver's pynvml."""
    nvml = fake_nvml.FakeNvml(procfs=node.proc)
    nvml.add_gpu(h.GPU_BDF, model=model)
    if mig:
        nvml.enable_mig(h.GPU_BDF)
    monkeypatch.setattr(mig_prepare, "load_pynvml", lambda: nvml)
    return nvml


def mig_mode(nvml: fake_nvml.FakeNvml) -> list[int]:
    nvml.nvmlInit()
    return nvml.nvmlDeviceGetMigMode(nvml.nvmlDeviceGetHandleByPciBusId(h.GPU_BDF))


def mig_name(profile: str, start: int) -> str:
    return f"{h.GPU}-mig-{profile.replace('.', '-')}-{start}"


def publish(driver: drv.Driver, profile: str, start: int, size: int, static_uuid: str | None = None) -> str:
    """The MIG device as the scan publishes it (its name mapped to the parent GPU's topology entry)."""
    name = mig_name(profile, start)
    attributes: dict[str, Any] = {
        "dra.aligned.dev/kind": {"string": "mig"},
        "dra.aligned.dev/profile": {"string": profile},
        "dra.aligned.dev/placementStart": {"int": start},
        "dra.aligned.dev/placementSize": {"int": size},
    }
    if static_uuid:
        attributes["dra.aligned.dev/migUUID"] = {"string": static_uuid}
    driver.inventory.devices.append({"name": name, "attributes": attributes})
    driver.inventory.by_name[name] = driver.inventory.by_name[h.GPU]
    return name


def make(node: h.NodeTree, mode: str = "dynamic", kube: Any = None, metrics: Any = None, **extra: Any) -> tuple:
    """A Driver restored (the start-up check) and scanned, with :data:`PUBLISHED`; (driver, kube)."""
    opts = Options(**node.options(mig=mode, mig_scanner=AsProbed(), **extra))
    kube = kube or d.ClaimsInMemory()
    driver = drv.Driver(opts, kube, metrics=metrics, status_queue=d.StatusRecorder(kube))
    driver.restore()
    rescan(driver)
    return driver, kube


def rescan(driver: drv.Driver) -> None:
    """A rescan (the MIG retries of each scan run first), then :data:`PUBLISHED` published again."""
    driver.rescan()
    for profile, start, size in PUBLISHED:
        publish(driver, profile, start, size)


def claim(kube: Any, name: str, device: str) -> tuple[str, str, str]:
    return kube.add(h.claim_object(name, [{"request": "gpu", "device": device}]))


def on_disk(node: h.NodeTree) -> tuple[dict[str, Any], list[str]]:
    """The checkpoint file and the CDI spec files."""
    data = json.loads((node.state / "checkpoint.json").read_text())
    return data, sorted(p.name for p in node.cdi.iterdir())


def after_the_first_lock(driver: drv.Driver, monkeypatch: Any, call: Callable[[], Any]) -> list[bool]:
    """``call()`` runs once, right after the GPU lock next taken is released and before its holder goes on (a
    race made deterministic: the other call runs exactly there); True once it ran."""
    real, ran = driver.mig.lock, []

    class Released:
        def __init__(self, lock: Any) -> None:
            self.lock = lock

        def __enter__(self) -> Any:
            return self.lock.__enter__()

        def __exit__(self, *exc: Any) -> None:
            self.lock.__exit__(*exc)
            if not ran:
                ran.append(True)
                call()

    monkeypatch.setattr(driver.mig, "lock", lambda pci: real(pci) if ran else Released(real(pci)))
    return ran


def instances(nvml: fake_nvml.FakeNvml) -> list[tuple[str, int, list[int]]]:
    return sorted((i["profile"], i["start"], i["cis"]) for i in nvml.instances(h.GPU_BDF))


def process(node: h.NodeTree, pid: int, comm: str, device_open: bool = False) -> None:
    """``<procfs>/<pid>/comm`` (and, ``device_open``, an fd on ``/dev/nvidia0``, as an NVML client holds it)."""
    base = Path(node.proc) / str(pid)
    base.mkdir(parents=True, exist_ok=True)
    (base / "comm").write_text(comm + "\n")
    if device_open:
        (base / "fd").mkdir(exist_ok=True)
        (base / "fd" / "3").symlink_to("/dev/nvidia0")
