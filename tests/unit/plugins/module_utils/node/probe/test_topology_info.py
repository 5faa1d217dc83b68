# SPDX-License-Identifier: Apache-2.0
"""node/probe/topology_info.py: the probe module's run, from its parameters to its result.

The module is its arguments, this ``run`` and the exit (its own tests, against the module, are
``tests/unit/plugins/modules/test_topology_info.py``). A captured tree gives the probe's topology and
nothing this machine would add; the live node (a test names its tree as the live sysfs) adds each
NVIDIA GPU's ``mig`` entry, read through the NVML it is given.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.node.probe import topology_info
from ansible_collections.aligned.dra.plugins.module_utils.node.topology import probe
from ansible_collections.aligned.dra.tests.fixtures import materialize as fixtures
from ansible_collections.aligned.dra.tests.support.fakes.nvml import FakeNvml

REPO = Path(__file__).resolve().parents[6]
TREES = REPO / ".cache" / "sysfs"
NO_DRIVER = "nvmlInit: NVML Shared Library Not Found (NVML error 12)"
DGX_GPUS = ["0000:1a:00.0", "0000:2b:00.0", "0000:3c:00.0", "0000:4d:00.0"]


def params(root: Path, **extra) -> dict:
    args = {
        "sysfs_root": str(root / "sys"),
        "procfs_root": str(root / "proc"),
        "pci_ids_path": None,
        "rails_record": str(root / "no-record.json"),
        "mig": True,
        "network_plan": None,
        "fact": False,
    }
    args.update(extra)
    return args


class Loader:
    """``load_nvml`` for the run: counts its calls, returns ``nvml`` (or raises ImportError without one)."""

    def __init__(self, nvml=None) -> None:
        self.nvml = nvml
        self.calls = 0

    def __call__(self):
        self.calls += 1
        if self.nvml is None:
            raise ImportError("No module named 'pynvml'")
        return self.nvml


@pytest.fixture(scope="module")
def dgx() -> Path:
    return fixtures.materialize("dgx-h100", TREES)


@pytest.fixture(scope="module")
def mi300x() -> Path:
    return fixtures.materialize("mi300x", TREES)


def live(root: Path) -> str:
    return str((root / "sys").resolve())


def test_a_captured_tree_is_the_probe_and_asks_no_nvml(dgx):
    loader = Loader(FakeNvml())
    result = topology_info.run(params(dgx), load_nvml=loader)
    expected = probe(str(dgx / "sys"), str(dgx / "proc"), topology_info.find_pci_ids())
    expected["netdev_addresses"] = None
    assert result == {"changed": False, "topology": expected}
    assert loader.calls == 0
    assert not [d for d in result["topology"]["devices"] if "mig" in d]


def test_the_live_node_gives_each_nvidia_gpu_a_mig_entry(dgx):
    loader = Loader()  # no nvidia-ml-py on this node
    topology = topology_info.run(params(dgx), live_sysfs=live(dgx), load_nvml=loader)["topology"]
    with_mig = [d["pci_address"] for d in topology["devices"] if "mig" in d]
    gpus = [d["pci_address"] for d in topology["devices"] if d["kind"] == "gpu" and d["vendor_id"] == "0x10de"]
    assert len(gpus) == 8
    assert with_mig == gpus
    assert set(DGX_GPUS) <= set(with_mig)
    assert loader.calls == 1  # loaded once for all the GPUs
    entry = topology["devices"][[d["pci_address"] for d in topology["devices"]].index(gpus[0])]["mig"]
    assert entry["readable"] is False
    assert entry["reason"].startswith("nvidia-ml-py (module pynvml) is not installed for ")


def test_mig_false_leaves_the_entries_out_and_loads_nothing(dgx):
    loader = Loader(FakeNvml())
    topology = topology_info.run(params(dgx, mig=False), live_sysfs=live(dgx), load_nvml=loader)["topology"]
    assert not [d for d in topology["devices"] if "mig" in d]
    assert loader.calls == 0


def test_a_node_without_nvidia_gpus_never_loads_nvml(mi300x):
    loader = Loader(FakeNvml())
    topology = topology_info.run(params(mi300x), live_sysfs=live(mi300x), load_nvml=loader)["topology"]
    assert [d for d in topology["devices"] if d["kind"] in ("gpu", "accelerator") and d["vendor_id"] == "0x1002"]
    assert not [d for d in topology["devices"] if "mig" in d]
    assert loader.calls == 0


def test_no_gpu_driver_is_said_on_every_nvidia_gpu_and_the_probe_goes_on(dgx):
    nvml = FakeNvml(library=False)
    result = topology_info.run(params(dgx), live_sysfs=live(dgx), load_nvml=Loader(nvml))
    entries = [d["mig"] for d in result["topology"]["devices"] if "mig" in d]
    assert entries == [{"readable": False, "reason": NO_DRIVER}] * 8
    assert result["changed"] is False


@pytest.mark.parametrize("name", ["sysfs_root", "procfs_root"])
def test_a_root_that_is_not_a_directory_names_the_parameter(dgx, tmp_path, name):
    with pytest.raises(topology_info.ProbeError, match=f"^{name}: .* is not a directory$"):
        topology_info.run(params(dgx, **{name: str(tmp_path / "absent")}))


def test_an_unreadable_pci_ids_file_names_the_parameter(dgx, tmp_path):
    with pytest.raises(topology_info.ProbeError, match="^pci_ids_path: .* is not a readable file$"):
        topology_info.run(params(dgx, pci_ids_path=str(tmp_path)))


def test_a_pci_ids_file_names_the_devices(dgx, tmp_path):
    ids = tmp_path / "pci.ids"
    ids.write_text("10de  NVIDIA Corporation\n\t2330  GH100 [H100 SXM5 80GB]\n")
    topology = topology_info.run(params(dgx, pci_ids_path=str(ids)))["topology"]
    (gpu,) = [d for d in topology["devices"] if d["pci_address"] == DGX_GPUS[0]]
    assert (gpu["vendor_name"], gpu["device_name"]) == ("NVIDIA Corporation", "GH100 [H100 SXM5 80GB]")


def test_the_network_plan_comes_with_the_topology_when_asked(dgx):
    result = topology_info.run(params(dgx, network_plan={"netns_mode": 7}))
    assert list(result) == ["changed", "topology", "network_plan"]
    assert "not_planned" in result["network_plan"]  # an option the module refuses: left to it
