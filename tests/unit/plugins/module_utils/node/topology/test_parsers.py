# SPDX-License-Identifier: Apache-2.0
"""The topology library's pure functions: parsers, classification, levels."""

from __future__ import annotations

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.node import topology as t


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0-3", [0, 1, 2, 3]),
        ("0-7,16-23", list(range(8)) + list(range(16, 24))),
        ("5", [5]),
        ("0,2,4\n", [0, 2, 4]),
        ("", []),
        ("0-7:2/4", [0, 2, 4, 6]),
        (None, None),
        ("x-y", None),
    ],
)
def test_parse_cpulist(text, expected):
    assert t.parse_cpulist(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0000ff00", list(range(8, 16))),
        ("00000001,00000000", [32]),
        ("00000000,00000000", []),
        ("zz", None),
        (None, None),
    ],
)
def test_parse_cpumask(text, expected):
    assert t.parse_cpumask(text) == expected


@pytest.mark.parametrize(
    ("cpus", "expected"),
    [([0, 1, 2, 5], "0-2,5"), ([], ""), ([7], "7"), ([3, 1, 2], "1-3"), ([0, 2, 4], "0,2,4")],
)
def test_format_cpulist_round_trips(cpus, expected):
    assert t.format_cpulist(cpus) == expected
    assert t.parse_cpulist(expected) == sorted(cpus)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("16.0 GT/s PCIe", 16.0), ("8 GT/s", 8.0), ("2.5 GT/s PCIe", 2.5), ("Unknown", None), ("", None), (None, None)],
)
def test_parse_link_speed(text, expected):
    assert t.parse_link_speed(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("400 Gb/sec (4X NDR)", 400.0), ("56 Gb/sec (4X FDR)", 56.0), ("2.5 Gb/sec (1X SDR)", 2.5), ("garbage", None)],
)
def test_parse_rate(text, expected):
    assert t.parse_rate(text) == expected


def test_parse_enum_and_uevent():
    assert t.parse_enum("4: ACTIVE") == "ACTIVE"
    assert t.parse_enum("InfiniBand") == "InfiniBand"
    assert t.parse_uevent("DRIVER=mlx5_core\nPCI_CLASS=20700\nnoise") == {"DRIVER": "mlx5_core", "PCI_CLASS": "20700"}


def test_parse_nvidia_information():
    text = (
        "Model: \t\t NVIDIA H100 80GB HBM3\n"
        "IRQ:   \t\t 0\n"
        "GPU UUID: \t GPU-0b7c7a63-5b0a-4a4e-9d3e-000000000001\n"
        "Bus Location: \t 0000:1b:00.0\n"
        "Device Minor: \t 3\n"
    )
    assert t.parse_nvidia_information(text) == {
        "minor": 3,
        "uuid": "GPU-0b7c7a63-5b0a-4a4e-9d3e-000000000001",
        "model": "NVIDIA H100 80GB HBM3",
    }
    assert t.parse_nvidia_information(None) == {}


SYS = "/x/sys"


@pytest.mark.parametrize(
    ("bdf", "resolved", "expected"),
    [
        ("0000:1a:00.0", SYS + "/devices/pci0000:17/0000:17:00.0/0000:1a:00.0", "pci0000:17"),
        ("0000:00:02.0", SYS + "/devices/pci0000:00/0000:00:02.0", "pci0000:00"),
        # VMD: the device's domain has five hex digits.
        ("10000:e1:00.0", SYS + "/devices/pci0000:00/0000:00:0e.0/pci10000:e0/10000:e0:06.0/10000:e1:00.0", None),
        # Hyper-V vPCI: the path does not start with /sys/devices/pci.
        (
            "0001:00:00.0",
            SYS + "/devices/LNXSYSTM:00/LNXSYBUS:00/ACPI0004:00/VMBUS:00/abc/pci0001:00/0001:00:00.0",
            None,
        ),
        # The path must end in the bdf.
        ("0000:1a:00.0", SYS + "/devices/pci0000:17/0000:17:00.0/0000:1b:00.0", None),
        # A host bridge with a five-digit domain is not a Kubernetes value either.
        ("0000:01:00.0", SYS + "/devices/pci10000:00/0000:01:00.0", None),
        ("0000:1a:00.0", None, None),
        ("0000:1A:00.0", SYS + "/devices/pci0000:17/0000:1A:00.0", None),
    ],
)
def test_kubernetes_pcie_root(bdf, resolved, expected):
    assert t.kubernetes_pcie_root(bdf, resolved, SYS) == expected


@pytest.mark.parametrize(
    ("class_code", "vendor", "rdma", "kind"),
    [
        (0x030200, "0x10de", False, "gpu"),  # NVIDIA 3D controller
        (0x030000, "0x1002", False, "gpu"),  # AMD VGA
        (0x038000, "0x1002", False, "gpu"),  # AMD Instinct (display, other)
        (0x030000, "0x1a03", False, "other"),  # ASPEED BMC VGA is no GPU
        (0x030200, "0x1234", False, "gpu"),  # any 3D controller
        (0x120000, "0x1da3", False, "accelerator"),  # processing accelerator
        (0x0B4000, "0x1bcf", False, "accelerator"),  # co-processor (NEC VE)
        (0x020000, "0x8086", False, "nic"),
        (0x020000, "0x15b3", True, "rdma"),  # RoCE NIC
        (0x020700, "0x15b3", False, "nic"),  # InfiniBand without a driver bound
        (0x028000, "0x15b3", True, "rdma"),
        (0x0C0600, "0x1077", True, "rdma"),  # InfiniBand serial bus class
        (0x010802, "0x8086", False, "nvme"),
        (0x010601, "0x8086", False, "other"),
        (None, None, False, "other"),
    ],
)
def test_classify(class_code, vendor, rdma, kind):
    assert t.classify(class_code, vendor, rdma) == kind


def test_bridge_classes():
    assert t.is_bridge_class(0x060400)
    assert t.is_bridge_class(0x060401)
    assert t.is_bridge_class(0x060900)
    assert not t.is_bridge_class(0x060000)  # host bridge function
    assert not t.is_bridge_class(None)


# A DGX-like tree: root port -> upper switch -> two lower switches.
ROLES = {
    "rp": "root_port",
    "up0": "switch_upstream",
    "up0.d1": "switch_downstream",
    "up0.d2": "switch_downstream",
    "lo1": "switch_upstream",
    "lo1.d": "switch_downstream",
    "lo1.d2": "switch_downstream",
    "lo2": "switch_upstream",
    "lo2.d": "switch_downstream",
    "rp2": "root_port",
    "pcib": "pci_bridge",
}
PARENT = {
    "up0": "rp",
    "up0.d1": "up0",
    "up0.d2": "up0",
    "lo1": "up0.d1",
    "lo1.d": "lo1",
    "lo1.d2": "lo1",
    "lo2": "up0.d2",
    "lo2.d": "lo2",
    "pcib": "rp2",
}
GPU_CHAIN = ["rp", "up0", "up0.d1", "lo1", "lo1.d"]
NIC_CHAIN = ["rp", "up0", "up0.d2", "lo2", "lo2.d"]


def level(a_chain, b_chain, a="0000:01:00.0", b="0000:02:00.0", hosts=("h", "h"), numa=(0, 0)):
    return t.pair_level(a_chain, b_chain, a, b, hosts[0], hosts[1], numa[0], numa[1], ROLES, PARENT)


def test_levels_under_switches():
    # Under one switch (different downstream ports): PIX.
    assert level(GPU_CHAIN, ["rp", "up0", "up0.d1", "lo1", "lo1.d2"]) == "PIX"
    # Two lower switches under one upper switch: three switches, PXB.
    assert level(GPU_CHAIN, NIC_CHAIN) == "PXB"
    # Directly under the upper switch vs. under a lower switch: PXB.
    assert level(GPU_CHAIN, ["rp", "up0", "up0.d2"]) == "PXB"
    # Two functions of one device: PIX.
    assert level(GPU_CHAIN, GPU_CHAIN, "0000:05:00.0", "0000:05:00.1") == "PIX"
    # Different root ports of one host bridge: PHB.
    assert level(GPU_CHAIN, ["rp2"]) == "PHB"
    assert level([], []) == "PHB"
    # A legacy PCI bridge below a root port holding both devices: one bridge, PIX.
    assert level(["rp2", "pcib"], ["rp2", "pcib"]) == "PIX"


def test_levels_across_host_bridges():
    assert level(GPU_CHAIN, NIC_CHAIN, hosts=("h1", "h2"), numa=(0, 0)) == "NODE"
    assert level(GPU_CHAIN, NIC_CHAIN, hosts=("h1", "h2"), numa=(0, 1)) == "SYS"
    # Unknown locality is never reported as close.
    assert level(GPU_CHAIN, NIC_CHAIN, hosts=("h1", "h2"), numa=(None, None)) == "SYS"
    assert level(GPU_CHAIN, NIC_CHAIN, hosts=(None, None), numa=(0, 0)) == "NODE"


def test_vf_addresses_follow_routing_ids():
    assert t.vf_addresses("0000:19:00.0", 3, 2, 1) == ["0000:19:00.2", "0000:19:00.3", "0000:19:00.4"]
    # VFs spill past function 7 into the next devices, and past the bus.
    assert t.vf_addresses("0000:19:00.0", 2, 7, 1) == ["0000:19:00.7", "0000:19:01.0"]
    assert t.vf_addresses("0000:1a:00.1", 2, 255, 2)[-1] == "0000:1b:00.2"
    assert t.vf_addresses("10000:e1:00.0", 1, 1, 1) == ["10000:e1:00.1"]
    assert t.vf_addresses("0000:ff:1f.7", 1, 1, 1) is None  # beyond bus ff
    assert t.vf_addresses("0000:19:00.0", 2, None, 1) is None
    assert t.vf_addresses("0000:19:00.0", 2, 0, 1) is None


# -- Reader: reads relative to kept directory descriptors ---------------------


def test_reader_reads_and_resolves_links_under_a_kept_directory(tmp_path):
    (tmp_path / "vf").mkdir()
    (tmp_path / "vf" / "numa_node").write_text("1\n")
    (tmp_path / "vf" / "driver").symlink_to("../drivers/vfio-pci")
    reader = t.Reader()
    try:
        assert reader.read_under(str(tmp_path), "vf/numa_node") == "1"
        assert reader.readlink_under(str(tmp_path), "vf/driver") == "../drivers/vfio-pci"
        assert reader.readlink_under(str(tmp_path), "vf/numa_node") is None  # not a link: no warning
        assert reader.read_under(str(tmp_path), "vf/absent") is None
        assert reader.read_under(str(tmp_path), "vf/absent", expected=True) is None
        # One descriptor for the directory, however many reads.
        assert list(reader._dirs) == [str(tmp_path)]
    finally:
        reader.close()
    assert reader._dirs == {}
    assert reader.warnings == [f"missing file {tmp_path}/vf/absent"]


def test_reader_falls_back_to_full_paths_when_the_directory_cannot_be_opened(tmp_path):
    reader = t.Reader()
    missing = str(tmp_path / "gone")
    assert reader.read_under(missing, "numa_node", expected=True) is None
    assert reader.readlink_under(missing, "driver") is None
    assert reader.warnings == [f"missing file {missing}/numa_node"]
    reader.close()


def test_reader_warns_when_a_file_under_a_kept_directory_cannot_be_read(tmp_path):
    (tmp_path / "numa_node").mkdir()  # reading a directory fails, even for root
    reader = t.Reader()
    assert reader.read_under(str(tmp_path), "numa_node") is None
    reader.close()
    assert len(reader.warnings) == 1 and "cannot read" in reader.warnings[0]
