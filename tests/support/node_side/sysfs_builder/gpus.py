# SPDX-License-Identifier: Apache-2.0
"""GPUs: the NVIDIA driver's ``/proc/driver/nvidia`` files and DRM ``cardN``/``renderDN`` nodes."""

from __future__ import annotations

import os
import uuid

from .layouts import LayoutError, Spec, integer
from .pci import PciFunction

_NVIDIA_MODELS = {
    0x2330: "NVIDIA H100 80GB HBM3",
    0x2335: "NVIDIA H200",
    0x20B0: "NVIDIA A100-SXM4-40GB",
    0x20B2: "NVIDIA A100-SXM4-80GB",
    0x20B5: "NVIDIA A100 80GB PCIe",
    0x26B9: "NVIDIA L40S",
    0x15F8: "Tesla P100-PCIE-16GB",
}


class GpuWriter:
    """Part of the builder (:class:`~.builder.Builder`): a function's ``gpu:`` and ``drm:``."""

    def _nvidia(self, func: PciFunction, gpu: Spec, label: str) -> None:
        if "minor" in gpu:
            minor = integer(gpu["minor"], f"{label}.gpu.minor")
            if minor in self.nvidia_minors:
                raise LayoutError(f"{label}: duplicate NVIDIA minor {minor}")
        else:
            minor = self._next("nvidia_minor", self.nvidia_minors)
        self.nvidia_minors.add(minor)
        uid = gpu.get("uuid") or "GPU-" + str(uuid.UUID(bytes=self._hash("gpu", func.bdf)[:16], version=4))
        model = gpu.get("model") or _NVIDIA_MODELS.get(func.device, "NVIDIA Graphics Device")
        rows = [
            ("Model: \t\t", model),
            ("IRQ:   \t\t", gpu.get("irq", 0)),
            ("GPU UUID: \t", uid),
            ("Video BIOS: \t", gpu.get("vbios", "96.00.99.00.01")),
            ("Bus Type: \t", "PCIe"),
            ("DMA Size: \t", "52 bits"),
            ("DMA Mask: \t", "0xfffffffffffff"),
            ("Bus Location: \t", func.bdf),
            ("Device Minor: \t", minor),
            ("GPU Excluded:\t", "Yes" if gpu.get("excluded") else "No"),
        ]
        d = os.path.join(self.proc, "driver", "nvidia", "gpus", func.bdf)
        self.w.mkdir(d)
        self.w.write(os.path.join(d, "information"), "".join(f"{k} {v}\n" for k, v in rows))
        version = str(self.spec.get("nvidia_driver", "570.124.06"))
        vfile = os.path.join(self.proc, "driver", "nvidia", "version")
        modules = str(self.spec.get("nvidia_kernel_modules", "open"))
        if modules not in ("open", "proprietary"):
            raise LayoutError(f"nvidia_kernel_modules: 'open' or 'proprietary', got {modules!r}")
        kind = "Open Kernel Module for x86_64" if modules == "open" else "x86_64 Kernel Module"
        if not os.path.exists(vfile):
            self.w.write(
                vfile,
                f"NVRM version: NVIDIA UNIX {kind}  {version}  "
                "Release Build  (synthetic@fixture)\n"
                "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)",
            )

    def _drm(self, func: PciFunction, drm: Spec, label: str) -> None:
        if "card" in drm:
            card = integer(drm["card"], f"{label}.card")
        else:
            card = self._next("drm_card", self.drm_cards)
        if card in self.drm_cards:
            raise LayoutError(f"{label}: duplicate DRM card{card}")
        self.drm_cards.add(card)
        base = os.path.join(func.path, "drm")
        cd = os.path.join(base, f"card{card}")
        self.w.files(cd, {"dev": f"226:{card}", "uevent": f"MAJOR=226\nMINOR={card}\nDEVNAME=dri/card{card}"})
        self.w.link(os.path.join(cd, "device"), func.path)
        self.class_link("drm", f"card{card}", cd)
        render = drm.get("render", True)
        if render is False:
            return
        if render is True:
            minor = self._next("drm_render", self.drm_renders, start=128)
        else:
            minor = integer(render, f"{label}.render")
        if minor in self.drm_renders:
            raise LayoutError(f"{label}: duplicate DRM renderD{minor}")
        self.drm_renders.add(minor)
        rd = os.path.join(base, f"renderD{minor}")
        self.w.files(rd, {"dev": f"226:{minor}", "uevent": f"MAJOR=226\nMINOR={minor}\nDEVNAME=dri/renderD{minor}"})
        self.w.link(os.path.join(rd, "device"), func.path)
        self.class_link("drm", f"renderD{minor}", rd)
