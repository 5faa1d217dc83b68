# SPDX-License-Identifier: Apache-2.0
"""The DRA device model: devices from probed topologies, their attributes and names.

Expected names and attributes are written from the fixture layouts in
tests/fixtures/layouts/ (which function sits where), not copied from output.
"""

from __future__ import annotations

import kubernetes_validate
import pytest

from ansible_collections.aligned.dra.plugins.module_utils.dra import gates as dra_gates
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra
from ansible_collections.aligned.dra.plugins.module_utils.dra import slices as dra_slices
from ansible_collections.aligned.dra.plugins.module_utils.node.topology import probe


def by_name(devices: list[dict]) -> dict[str, dict]:
    return {d["name"]: d for d in devices}


def attr(device: dict, name: str):
    value = device["attributes"].get(name)
    return None if value is None else next(iter(value.values()))


# -- devices_from_topology ---------------------------------------------------------


def test_dgx_h100_devices(layouts):
    devices = by_name(dra.devices_from_topology(layouts("dgx-h100")))
    gpus = sorted(n for n in devices if n.startswith("gpu-"))
    nics = sorted(n for n in devices if n.startswith("nic-"))
    assert gpus == [f"gpu-0000-{b}-00-0" for b in ("1a", "2b", "3c", "4d", "9a", "ab", "bc", "cd")]
    # 8 ConnectX-7 plus the two ports of the management card: all own RDMA devices.
    assert nics == [
        f"nic-0000-{b}"
        for b in (
            "1d-00-0",
            "2e-00-0",
            "3f-00-0",
            "50-00-0",
            "5a-00-0",
            "5a-00-1",
            "9d-00-0",
            "ae-00-0",
            "bf-00-0",
            "d0-00-0",
        )
    ]
    gpu = devices["gpu-0000-1a-00-0"]
    assert attr(gpu, dra.ATTR_PCIE_ROOT) == "pci0000:15"
    assert attr(gpu, dra.ATTR_PCI_BUS_ID) == "0000:1a:00.0"
    assert attr(gpu, dra.ATTR_NUMA_NODE) == 0
    assert attr(gpu, "dra.aligned.dev/kind") == "gpu"
    assert attr(gpu, "dra.aligned.dev/vendorID") == "0x10de"
    assert attr(gpu, "dra.aligned.dev/gpuIndex") == 0
    assert attr(gpu, "dra.aligned.dev/minor") == 0
    assert attr(gpu, "dra.aligned.dev/uuid").startswith("GPU-")
    assert gpu["capacity"] == {"memory": {"value": "80Gi"}}
    assert attr(devices["gpu-0000-cd-00-0"], "dra.aligned.dev/gpuIndex") == 7
    assert attr(devices["gpu-0000-cd-00-0"], dra.ATTR_NUMA_NODE) == 1
    nic = devices["nic-0000-1d-00-0"]
    assert attr(nic, dra.ATTR_PCIE_ROOT) == "pci0000:15"
    assert attr(nic, "dra.aligned.dev/rdma") is True
    assert attr(nic, "dra.aligned.dev/rdmaDevice") == "mlx5_0"
    assert attr(nic, "dra.aligned.dev/netdev") == "ibp29s0"
    assert attr(nic, "dra.aligned.dev/linkSpeed") == 400
    assert attr(nic, "dra.aligned.dev/linkType") == "infiniband"
    assert nic["capacity"] == {"bandwidth": {"value": "400G"}}
    assert "dra.aligned.dev/sriovRole" not in nic["attributes"]
    # nvme and the BMC's VGA are never published
    assert not [n for n in devices if "0000-01-00-0" in n or "0000-03-00-0" in n]


def test_exclude_keeps_management_nics_out(layouts):
    topology = layouts("dgx-h100")
    by_netdev = by_name(dra.devices_from_topology(topology, {"exclude": ["eno*"]}))
    by_address = by_name(dra.devices_from_topology(topology, {"exclude": ["0000:5a:00.*"]}))
    for devices in (by_netdev, by_address):
        assert "nic-0000-5a-00-0" not in devices and "nic-0000-5a-00-1" not in devices
        assert "nic-0000-1d-00-0" in devices
        assert len(devices) == 16


def test_sriov_vfs_and_parent(layouts):
    devices = dra.devices_from_topology(layouts("sriov-8x64"))
    vfs = [d for d in devices if d["name"].startswith("vf-")]
    assert len(vfs) == 8 * 64
    named = by_name(devices)
    vf = named["vf-0000-19-00-1"]
    assert attr(vf, "dra.aligned.dev/kind") == "vf"
    assert attr(vf, "dra.aligned.dev/sriovRole") == "vf"
    assert attr(vf, "dra.aligned.dev/sriovParent") == "0000:19:00.0"
    assert attr(vf, dra.ATTR_PCIE_ROOT) == attr(named["nic-0000-19-00-0"], dra.ATTR_PCIE_ROOT) == "pci0000:15"
    assert attr(vf, "dra.aligned.dev/linkSpeed") == 400
    pf = named["nic-0000-19-00-0"]
    assert attr(pf, "dra.aligned.dev/sriovRole") == "pf"
    assert attr(pf, "dra.aligned.dev/sriovNumVFs") == 64
    no_vfs = dra.devices_from_topology(layouts("sriov-8x64"), {"vfs": False})
    assert len(no_vfs) == 16
    # excluding a PF also drops its VFs
    without_first = dra.devices_from_topology(layouts("sriov-8x64"), {"exclude": ["enp25s0np0"]})
    assert not [d for d in without_first if attr(d, "dra.aligned.dev/sriovParent") == "0000:19:00.0"]
    assert len(without_first) == len(devices) - 65


def test_kinds_are_selectable(layouts):
    topology = layouts("dgx-h100")
    only_nics = dra.devices_from_topology(topology, {"gpus": False})
    assert {attr(d, "dra.aligned.dev/kind") for d in only_nics} == {"nic"}
    assert dra.devices_from_topology(topology, {"gpus": False, "rdma_nics": False}) == []


def test_plain_nics_are_optional(layouts):
    topology = layouts("vm-flat")
    default = by_name(dra.devices_from_topology(topology))
    # the virtio NIC has no RDMA device: off by default; the EFA function is RDMA
    assert "nic-0000-00-02-0" not in default
    assert attr(default["nic-0000-00-03-0"], "dra.aligned.dev/rdma") is True
    with_plain = by_name(dra.devices_from_topology(topology, {"plain_nics": True}))
    assert attr(with_plain["nic-0000-00-02-0"], "dra.aligned.dev/rdma") is False


def test_unknown_numa_and_pcie_root_are_omitted(layouts):
    # Hyper-V: devices sit on VMBUS, Kubernetes publishes no pcieRoot for them
    for device in dra.devices_from_topology(layouts("hyperv-ndv4")):
        assert dra.ATTR_PCIE_ROOT not in device["attributes"]
        assert dra.ATTR_NUMA_NODE in device["attributes"]
    # the VM has one NUMA node that the kernel reports as -1: the inferred node is used and marked
    for device in dra.devices_from_topology(layouts("vm-flat")):
        assert attr(device, dra.ATTR_NUMA_NODE) == 0
        assert attr(device, "dra.aligned.dev/numaNodeInferred") is True


def test_five_digit_domain_has_no_standard_pci_attributes():
    topology = {
        "devices": [
            {"pci_address": "10000:e1:00.0", "kind": "gpu", "pcie_root": None, "numa_node": 0, "vendor_id": "0x10de"},
        ]
    }
    (device,) = dra.devices_from_topology(topology)
    assert device["name"] == "gpu-10000-e1-00-0"
    assert dra.ATTR_PCIE_ROOT not in device["attributes"]
    assert dra.ATTR_PCI_BUS_ID not in device["attributes"]


def test_every_device_is_valid_for_every_minor(layouts):
    for layout in ("dgx-h100", "mi300x", "hyperv-ndv4", "vm-flat", "pci-domain-5digit"):
        devices = dra.devices_from_topology(layouts(layout), {"plain_nics": True})
        for item in dra_slices.resource_slices("node-1", devices):
            assert dra_slices.validate_slice(item) == []
            for minor in dra_gates.SUPPORTED_MINORS:
                kubernetes_validate.validate(item, minor + ".0", strict=True)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"bogus": 1}, "unknown key 'bogus'"),
        ({"exclude": "eno*"}, "options.exclude"),
        ({"gpus": "yes"}, "options.gpus"),
        ({"domain": "Not_A_Domain"}, "options.domain"),
    ],
)
def test_bad_options_are_refused(options, message):
    with pytest.raises(dra.DeviceModelError, match=message):
        dra.devices_from_topology({"devices": []}, options)


def test_gpu_memory_from_model():
    assert dra.gpu_memory_gib("NVIDIA H100 80GB HBM3") == 80
    assert dra.gpu_memory_gib("NVIDIA A100-SXM4-40GB") == 40
    assert dra.gpu_memory_gib("NVIDIA L40S") is None
    assert dra.gpu_memory_gib(None) is None


# -- names ---------------------------------------------------------------------------


def test_qualified_names():
    assert dra.is_qualified_name("resource.kubernetes.io/pcieRoot")
    assert dra.is_qualified_name("kind")
    assert not dra.is_qualified_name("a/b/c")
    assert not dra.is_qualified_name("dra.aligned.dev/" + "x" * 33)
    assert dra.split_qualified_name("kind") == (dra.DRIVER_NAME, "kind")
    assert dra.split_qualified_name("gpu.nvidia.com/uuid") == ("gpu.nvidia.com", "uuid")


@pytest.mark.parametrize(
    "check, value",
    [
        (dra.is_dns_label, "gpu-0\n"),
        (dra.is_dns_subdomain, "dra.aligned.dev\n"),
        (dra.is_qualified_name, "dra.aligned.dev/kind\n"),
        (dra.is_qualified_name, "dra.aligned.dev\n/kind"),
    ],
)
def test_a_trailing_newline_is_not_part_of_a_name(check, value):
    assert check(value.replace("\n", ""))
    assert not check(value)


# -- list-typed attributes (DRAListTypeAttributes) ----------------------------------------------------

# Two sockets in SNC2 mode: nodes 0 and 1 on package 0, nodes 2 and 3 on package 1,
# SLIT 12 inside a socket and 21 across. The firmware reports gpu A's locality as
# its whole socket (local_cpulist 0-15 = nodes 0 and 1); gpu C's local_cpulist also
# covers node 2, on the other socket; gpu B and D have their own node's CPUs only.
SNC2_LAYOUT = {
    "name": "snc2-two-sockets",
    "cpu": {"vendor": "GenuineIntel", "model": "Intel(R) Xeon(R) Platinum 8480C", "threads_per_core": 1},
    "numa": {
        "nodes": [
            {"id": 0, "cpus": "0-7", "memory_kb": 1000000, "package": 0},
            {"id": 1, "cpus": "8-15", "memory_kb": 1000000, "package": 0},
            {"id": 2, "cpus": "16-23", "memory_kb": 1000000, "package": 1},
            {"id": 3, "cpus": "24-31", "memory_kb": 1000000, "package": 1},
        ],
        "distances": [[10, 12, 21, 21], [12, 10, 21, 21], [21, 21, 10, 12], [21, 21, 12, 10]],
    },
    "hostbridges": [
        {"bus": bus, "numa_node": node,
         "children": [{"addr": "00.0", "vendor": 0x10DE, "device": 0x2330, "class": 0x030200, "link": "gen5x16",
                       **({"files": {"local_cpulist": cpus, "local_cpus": mask}} if cpus else {})}]}
        for bus, node, cpus, mask in (
            (0x10, 0, "0-15", "0000ffff"),  # A: local to nodes 0 and 1
            (0x20, 1, None, None),  # B: node 1 only
            (0x30, 0, "0-23", "00ffffff"),  # C: node 2's CPUs too, but node 2 is on the other socket
            (0x40, 2, None, None),  # D: node 2 only
        )
    ],
}  # fmt: skip


@pytest.fixture(scope="module")
def snc2(tmp_path_factory):
    from ansible_collections.aligned.dra.tests.support.node_side import sysfs_builder

    root = sysfs_builder.build_tree(SNC2_LAYOUT, tmp_path_factory.mktemp("snc2"))
    return probe(str(root / "sys"), str(root / "proc"))


def numa_values(devices: list[dict]) -> dict[str, dict]:
    return {d["name"]: d["attributes"][dra.ATTR_NUMA_NODE] for d in devices}


def test_numa_node_stays_a_scalar_without_list_attributes(snc2):
    assert numa_values(dra.devices_from_topology(snc2)) == {
        "gpu-0000-10-00-0": {"int": 0},
        "gpu-0000-20-00-0": {"int": 1},
        "gpu-0000-30-00-0": {"int": 0},
        "gpu-0000-40-00-0": {"int": 2},
    }


def test_numa_node_is_a_list_where_a_device_is_local_to_several_nodes(snc2):
    devices = dra.devices_from_topology(snc2, {"list_attributes": True})
    assert numa_values(devices) == {
        "gpu-0000-10-00-0": {"ints": [0, 1]},  # its own node first
        "gpu-0000-20-00-0": {"int": 1},
        "gpu-0000-30-00-0": {"ints": [0, 1]},  # node 2 is local by CPUs but at SLIT 21, not 12
        "gpu-0000-40-00-0": {"int": 2},
    }
    assert all(dra_slices.validate_device(d) == [] for d in devices)


@pytest.mark.parametrize(
    ("local_cpulist", "expected"),
    [
        ("0-31", [1]),  # every CPU: the kernel's "no affinity", says nothing
        ("0-7", [1]),  # does not even cover node 1's own CPUs
        ("8-23", [1]),  # node 2 at 21, not at node 1's nearest distance 12; node 0 only partly
        ("0-15", [1, 0]),
        (None, [1]),
    ],
)
def test_local_numa_nodes(snc2, local_cpulist, expected):
    assert dra.local_numa_nodes(1, local_cpulist, snc2["numa_nodes"]) == expected


def test_list_attributes_need_the_gate_of_the_minor(snc2):
    devices = dra.devices_from_topology(snc2, {"list_attributes": True})
    (item,) = dra_slices.resource_slices("node-1", devices)
    # alpha in 1.36 and 1.37: off unless the site turns it on
    assert dra_gates.fields_disabled(item, "1.36") == [
        f"spec.devices[{i}].attributes[{dra.ATTR_NUMA_NODE}].ints needs feature gate DRAListTypeAttributes, "
        "which is off on Kubernetes 1.36"
        for i in (0, 2)
    ]
    assert len(dra_gates.fields_disabled(item, "1.37")) == 2
    assert dra_gates.fields_disabled(item, "1.36", {"DRAListTypeAttributes": True}) == []
    scalar = dra_slices.resource_slices("node-1", dra.devices_from_topology(snc2))[0]
    assert dra_gates.fields_disabled(scalar, "1.36") == []


def test_attribute_value_sets():
    assert dra.attribute_value_set({"int": 1}) == {("int", 1)}
    assert dra.attribute_value_set({"ints": [1, 2]}) == {("int", 1), ("int", 2)}
    assert not dra.attribute_value_set({"bool": True}) & dra.attribute_value_set({"int": 1})
    assert dra.attribute_value_set({"versions": ["1.0.0"]}) == {("version", "1.0.0")}
    assert dra.attribute_value_set({"ints": 1}) is None
    assert dra.attribute_value_set({"int": 1, "string": "x"}) is None


# -- the driver split by kind (split_gpu_driver) ------------------------------------------


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("Gpu.Aligned.Dev", "DNS subdomain of at most 63"),
        ("gpu_aligned.dev", "DNS subdomain of at most 63"),
        (42, "DNS subdomain of at most 63"),
        ("gpu." + "a" * 57 + ".dev", "DNS subdomain of at most 63"),  # 65 characters
        ("accelerators.aligned.dev", "must contain 'gpu'"),
        ("dra.aligned.dev", "must contain 'gpu'"),  # the main name lacks gpu: said first
    ],
)
def test_a_bad_split_gpu_driver_is_refused_naming_the_option(name, message):
    with pytest.raises(dra.DeviceModelError, match=rf"^device_options\.split_gpu_driver .*{message}"):
        dra.devices_from_topology({"devices": []}, {"split_gpu_driver": name})
    with pytest.raises(dra.DeviceModelError, match=r"^device_options\.split_gpu_driver "):
        dra.driver_of_kind("gpu", {"split_gpu_driver": name})


def test_the_split_gpu_driver_differs_from_the_main_driver(monkeypatch):
    # the main name has no "gpu" in it today; were it renamed to one that has, the rule still holds
    monkeypatch.setattr(dra, "DRIVER_NAME", "gpu.aligned.dev")
    assert "main driver's name" in dra.split_gpu_driver_problem("gpu.aligned.dev")


def test_the_driver_name_of_each_kind_with_and_without_the_split():
    assert {kind: dra.driver_of_kind(kind) for kind in dra.DEVICE_KINDS} == dict.fromkeys(
        dra.DEVICE_KINDS, "dra.aligned.dev"
    )
    for unset in (None, ""):  # one driver, as the driver role reads it
        assert {kind: dra.driver_of_kind(kind, {"split_gpu_driver": unset}) for kind in ("gpu", "nic")} == {
            "gpu": "dra.aligned.dev",
            "nic": "dra.aligned.dev",
        }
    split = {"split_gpu_driver": "gpu.aligned.dev", "exclude": ["eno*"]}
    assert {kind: dra.driver_of_kind(kind, split) for kind in dra.DEVICE_KINDS} == {
        "gpu": "gpu.aligned.dev",
        "accelerator": "gpu.aligned.dev",
        "nic": "dra.aligned.dev",
        "vf": "dra.aligned.dev",
    }
    assert dra.driver_of_kind("vf", {"split_gpu_driver": "nvidia-gpu.example.com"}) == "dra.aligned.dev"
    with pytest.raises(dra.DeviceModelError, match="kind 'cpu'"):
        dra.driver_of_kind("cpu")
    assert [dra.kind_of_name(n) for n in ("gpu-0000-1b-00-0", "acc-0000-1b-00-0", "nic-x", "vf-x", "eth0")] == [
        "gpu",
        "accelerator",
        "nic",
        "vf",
        None,
    ]


def test_the_split_changes_no_device_and_no_attribute(layouts):
    # the driver name is the slice's; the devices, attributes (under dra.aligned.dev/) and capacities stay
    topology = layouts("dgx-h100")
    split = dra.devices_from_topology(topology, {"split_gpu_driver": "gpu.aligned.dev"})
    assert split == dra.devices_from_topology(topology)
    assert attr(by_name(split)["gpu-0000-1a-00-0"], "dra.aligned.dev/kind") == "gpu"


def test_a_shareable_gpu_is_a_copy_with_capacities_and_policies(layouts):
    gpu = by_name(dra.devices_from_topology(layouts("dgx-h100")))["gpu-0000-1a-00-0"]
    before = repr(gpu)
    shared = dra.make_shareable(gpu)
    assert repr(gpu) == before  # the device itself is left as it was
    assert shared["allowMultipleAllocations"] is True
    assert shared["capacity"]["memory"] == {
        "value": "80Gi",
        "requestPolicy": {"default": "1Gi", "validRange": {"min": "1Gi", "max": "80Gi", "step": "1Gi"}},
    }
    assert shared["capacity"]["compute"]["requestPolicy"]["default"] == "100"
    # memory not stated in whole GiB (or not at all) gets no policy; compute always
    odd = dra.make_shareable({"name": "gpu-x", "capacity": {"memory": {"value": "81920Mi"}}})
    assert odd["capacity"]["memory"] == {"value": "81920Mi"}
    assert set(dra.make_shareable({"name": "gpu-y"})["capacity"]) == {"compute"}
