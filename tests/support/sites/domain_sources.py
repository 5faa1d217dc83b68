# SPDX-License-Identifier: Apache-2.0
"""TEST FIXTURE: the providers' Nodes and DRANET ResourceSlices of tests/fixtures/placement_sources/, by preset.
Never shipped.

- ``FILES``: each preset's Node file and slice file; ``setting``: the ``files`` source that reads them;
  ``objects``: the Nodes and slices read; ``levels_of``: the levels setting of a preset (GCE's DRANET
  levels named one by one, ``GCE_DRANET``).
"""

from __future__ import annotations

from pathlib import Path

from ansible_collections.aligned.dra.plugins.module_utils.controller.domains import sources

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "placement_sources"


FILES = {
    "gke": ("gke-nodes.yaml", None),
    "eks": ("eks-nodes.json", None),
    "oke": ("oke-nodes.yaml", None),
    "nebius": ("nebius-nodes.yaml", None),
    "coreweave": ("coreweave-nodes.yaml", None),
    "topograph": ("topograph-nodes.yaml", None),
    "azure-dranet": ("azure-dranet-nodes.yaml", "azure-dranet-slices.yaml"),
    "oke-dranet": ("oke-dranet-nodes.yaml", "oke-dranet-slices.yaml"),
    "gce-dranet": ("gce-dranet-nodes.yaml", "gce-dranet-slices.yaml"),
}


GCE_DRANET = [
    {"name": name, "source": "device_attribute", "driver": "dra.net", "attribute": f"gce.dra.net/{attribute}"}
    for name, attribute in (("block", "block"), ("subblock", "subBlock"), ("host", "host"))
]


def setting(preset: str) -> dict:
    node_file, slice_file = FILES[preset]
    return {
        "source": "files",
        "node_files": [str(FIXTURES / node_file)],
        "slice_files": [str(FIXTURES / slice_file)] if slice_file else [],
    }


def objects(preset: str) -> tuple[list, list]:
    return sources.load_files(setting(preset))


def levels_of(preset: str):
    return GCE_DRANET if preset == "gce-dranet" else {"preset": preset}
