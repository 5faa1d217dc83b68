# SPDX-License-Identifier: Apache-2.0
"""NVMe controllers: ``<function>/nvme/<name>``, its namespaces, ``class/nvme`` and ``block``."""

from __future__ import annotations

import os

from .layouts import LayoutError, Spec, integer
from .pci import PciFunction


class NvmeWriter:
    """Part of the builder (:class:`~.builder.Builder`): a function's ``nvme:``."""

    def _nvme(self, func: PciFunction, nvme: Spec, label: str) -> None:
        name = nvme.get("name")
        if name is None or name == "auto":
            idx = self._next("nvme", {int(n[4:]) for n in self.nvme_names})
            name = f"nvme{idx}"
        name = str(name)
        if name in self.nvme_names:
            raise LayoutError(f"{label}: duplicate NVMe controller {name}")
        self.nvme_names.add(name)
        d = os.path.join(func.path, "nvme", name)
        idx = int(name[4:]) if name[4:].isdigit() else 0
        self.w.files(
            d,
            {
                "dev": f"243:{idx}",
                "model": nvme.get("model", "SAMSUNG MZQL23T8HCLS-00A07"),
                "serial": nvme.get("serial", "S6" + self._hash("nvme", func.bdf).hex()[:12].upper()),
                "firmware_rev": nvme.get("firmware_rev", "GDC5602Q"),
                "address": func.bdf,
                "transport": "pcie",
                "state": "live",
            },
        )
        self.w.link(os.path.join(d, "device"), func.path)
        self.class_link("nvme", name, d)
        for ns in range(1, integer(nvme.get("namespaces", 1), f"{label}.namespaces") + 1):
            bd = os.path.join(d, f"{name}n{ns}")
            self.w.files(bd, {"size": nvme.get("size_sectors", 7501476528), "dev": f"259:{ns - 1}"})
            self.w.link(os.path.join(bd, "device"), d)
            self.class_link("block", f"{name}n{ns}", bd)
            self.w.link(os.path.join(self.sys, "block", f"{name}n{ns}"), bd)
