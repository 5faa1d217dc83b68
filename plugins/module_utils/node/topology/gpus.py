# SPDX-License-Identifier: Apache-2.0
"""The probe's GPU details: DRM nodes and the NVIDIA driver's view of a GPU."""

from __future__ import annotations

from .parsers import parse_nvidia_information

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from .sysfs import Reader


class GpuProbe:
    """Part of the probe (:class:`prober._Probe`): reads ``class/drm`` and ``/proc/driver/nvidia``."""

    # Set by the probe's __init__; _owner comes from pci_walk.PciWalk.
    sys: str
    proc: str
    r: Reader
    _owner: Callable[[str], str | None]

    def drm_nodes(self) -> dict[str, dict[str, str]]:
        by_function: dict[str, dict[str, str]] = {}
        base = self.sys + "/class/drm"
        for name, path in self.r.class_links(base):
            if name.startswith("card") and name[4:].isdigit():
                key = "card"
            elif name.startswith("renderD") and name[7:].isdigit():
                key = "render_node"
            else:
                continue
            bdf = self._owner(path)
            if bdf is not None:
                by_function.setdefault(bdf, {})[key] = name
        return by_function

    def nvidia_gpu(self, bdf: str) -> dict[str, Any]:
        text = self.r.read(f"{self.proc}/driver/nvidia/gpus/{bdf}/information")
        return parse_nvidia_information(text)
