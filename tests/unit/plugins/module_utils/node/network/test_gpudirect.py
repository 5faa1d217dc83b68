# SPDX-License-Identifier: Apache-2.0
"""GPUDirect RDMA on a node: ACS Control writes in config space, the IOMMU's kernel arguments, peer memory.

The trees are built by the sysfs builder (one PCIe switch with a GPU and a
NIC below it, at PIX; a second NIC on another root, at NODE); the config
files of the bridges on the way are then replaced by full 4096-byte spaces
with an extended capability list (AER at 0x100, ACS at 0x148), as a root
reader of a live node gets them. They are plain files: a write at an offset
changes those bytes only, as on sysfs. The probe's ``gpudirect`` part (IOMMU
mode, peer memory) is given with the topology, as the probe reports it.
"""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.node.network import gpudirect, netconf
from ansible_collections.aligned.dra.plugins.module_utils.node.topology import p2p
from ansible_collections.aligned.dra.tests.unit.plugins.module_utils.node.network.gpudirect_node import (
    ACS_AT,
    CLEARED,
    DOWN_GPU,
    DOWN_NIC,
    GPU,
    NIC,
    REDIRECTING,
    ROOT,
    UPSTREAM,
    Grub,
    build,
    cmdline,
    config_file,
    snapshot,
    topology,
)


def run(root, tmp_path, desired, topo=None, grub=None, **kwargs):
    grub = grub or Grub()
    kwargs.setdefault("check_mode", False)
    return gpudirect.apply(
        desired,
        sysfs_root=f"{root}/sys",
        procfs_root=f"{root}/proc",
        modules_load_dir=str(tmp_path / "modules-load.d"),
        grub_dir=str(tmp_path / "grub.d"),
        topology=topo if topo is not None else topology(root),
        update_grub=grub,
        which=grub.which,
        **kwargs,
    )


@pytest.fixture
def node(tmp_path):
    (tmp_path / "grub.d").mkdir()
    return build(tmp_path)


def test_disable_clears_redirect_on_exactly_the_aligned_path_two_bytes_each(node, tmp_path):
    before = snapshot(node)
    result = run(node, tmp_path, {"acs": "disable"})
    after = snapshot(node)
    changed = {bdf for bdf in before if before[bdf] != after[bdf]}
    # the switch's two downstream ports; not the root port above the switch, not the far NIC's root (NODE)
    assert changed == {DOWN_GPU, DOWN_NIC}
    offset = ACS_AT + p2p.ACS_CONTROL
    for bdf, wanted in ((DOWN_GPU, CLEARED), (DOWN_NIC, 0x0011)):
        assert after[bdf][offset : offset + 2] == wanted.to_bytes(2, "little")
        assert after[bdf][:offset] == before[bdf][:offset] and after[bdf][offset + 2 :] == before[bdf][offset + 2 :]
    assert result["changed"] and result["disruptive"] and not result["reboot_required"]
    assert result["actions"] == [
        f"write {DOWN_GPU} ACS Control @0x14e: 0x001d -> 0x0011",
        f"write {DOWN_NIC} ACS Control @0x14e: 0x003d -> 0x0011",
    ]
    assert [item["pairs"] for item in result["acs"]] == [[f"{GPU} x {NIC}"]] * 2
    # a second run finds nothing to do
    again = run(node, tmp_path, {"acs": "disable"})
    assert not again["changed"] and again["actions"] == [] and snapshot(node) == after


def test_check_mode_shows_each_register_and_changes_nothing(node, tmp_path):
    before = snapshot(node)
    result = run(node, tmp_path, {"acs": "disable"}, check_mode=True)
    assert snapshot(node) == before
    assert result["changed"]
    assert result["diff"]["before"][f"{DOWN_GPU} ACS Control @0x14e"] == "0x001d"
    assert result["diff"]["after"][f"{DOWN_GPU} ACS Control @0x14e"] == "0x0011"


def test_a_write_that_does_not_stick_fails_naming_function_register_and_values(node, tmp_path, monkeypatch):
    """The read-back is replaced by one that answers the old value, as a register that ignores writes does."""
    monkeypatch.setattr(gpudirect, "read_register", lambda path, offset: REDIRECTING)
    with pytest.raises(gpudirect.GpuDirectError) as error:
        run(node, tmp_path, {"acs": "disable"})
    assert str(error.value) == (
        f"acs: the write to {DOWN_GPU} ACS Control @0x14e did not stick: wanted 0x0011, read back 0x001d"
    )


def test_a_device_bound_to_vfio_below_the_bridge_is_refused_before_any_change(tmp_path):
    root = build(tmp_path, gpu_driver="vfio-pci")
    before = snapshot(root)
    with pytest.raises(gpudirect.GpuDirectError, match=rf"{DOWN_GPU} \(device {GPU}\).*vfio-pci"):
        run(root, tmp_path, {"acs": "disable"})
    assert snapshot(root) == before


def test_an_iommu_that_translates_is_refused_unless_passthrough_is_asked(node, tmp_path):
    before = snapshot(node)
    with pytest.raises(gpudirect.GpuDirectError, match=r"IOMMU translates \(groups: .*=DMA"):
        run(node, tmp_path, {"acs": "disable"}, topo=topology(node, mode="translated"))
    cmdline(node, "BOOT_IMAGE=/vmlinuz ro quiet")
    grub = Grub()
    result = run(
        node, tmp_path, {"acs": "disable", "iommu": "passthrough"}, topo=topology(node, mode="translated"), grub=grub
    )
    # the writes wait for the boot into passthrough: the kernel arguments now, the ACS at boot
    assert snapshot(node) == before
    assert result["reboot_required"] and result["disruptive"] and grub.runs == 1
    assert any(f"{DOWN_GPU} ACS Control @0x14e: 0x001d -> 0x0011 is written at boot" in r for r in result["reasons"])


def test_passthrough_writes_the_grub_drop_in_once_and_needs_a_reboot(node, tmp_path):
    cmdline(node, "BOOT_IMAGE=/vmlinuz ro quiet")
    grub = Grub()
    desired = {"iommu": "passthrough", "iommu_vendor_args": ["intel_iommu=on"]}
    result = run(node, tmp_path, desired, topo=topology(node, mode="translated"), grub=grub)
    content = (tmp_path / "grub.d" / gpudirect.GRUB_FILE).read_text()
    assert content.endswith('GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX iommu=pt intel_iommu=on"\n')
    assert result["reboot_required"] and grub.runs == 1
    assert "the kernel runs without iommu=pt intel_iommu=on" in result["reasons"][0]
    again = run(node, tmp_path, desired, topo=topology(node, mode="translated"), grub=grub)
    assert not again["changed"] and again["reboot_required"] and grub.runs == 1
    # after the reboot: the arguments are there and the groups are identity
    cmdline(node, "BOOT_IMAGE=/vmlinuz ro iommu=pt intel_iommu=on")
    booted = run(node, tmp_path, desired, grub=grub)
    assert not booted["changed"] and not booted["reboot_required"]


def test_a_reboot_that_leaves_the_iommu_translating_fails(node, tmp_path):
    cmdline(node, "ro iommu=pt")
    with pytest.raises(gpudirect.GpuDirectError) as error:
        run(node, tmp_path, {"iommu": "passthrough"}, topo=topology(node, mode="translated"), check_mode=True)
    assert str(error.value).startswith(f"iommu: the IOMMU still translates after the reboot (groups: {GPU}=DMA, ")


def test_passthrough_without_grub_names_what_is_missing(node, tmp_path):
    os.rmdir(tmp_path / "grub.d")
    with pytest.raises(gpudirect.GpuDirectError) as error:
        run(node, tmp_path, {"iommu": "passthrough"}, grub=Grub(installed=False))
    assert f"lacks {tmp_path / 'grub.d'} and update-grub" in str(error.value)


PROPRIETARY = {
    "dma_buf": False,
    "open_kernel_modules": False,
    "kernel_release": "6.8.0-45-generic",
    "nvidia_peermem": False,
}
OPEN = {"dma_buf": True, "open_kernel_modules": True, "kernel_release": "6.8.0-45-generic", "nvidia_peermem": False}


def test_auto_loads_nvidia_peermem_now_and_at_boot_only_without_dma_buf(node, tmp_path):
    loaded = []

    def modprobe(name):
        loaded.append(name)
        return 0, ""

    conf = tmp_path / "modules-load.d" / gpudirect.MODULES_FILE
    topo = topology(node, peer=PROPRIETARY)
    result = run(node, tmp_path, {"peer_memory": "auto"}, topo=topo, modprobe=modprobe, live=True)
    assert loaded == ["nvidia_peermem"] and conf.read_text().splitlines()[1:] == ["nvidia_peermem"]
    assert result["actions"] == ["modprobe nvidia_peermem", f"write {conf}"]
    # DMA-BUF possible (open modules): the collection's file goes, nothing is loaded
    result = run(node, tmp_path, {"peer_memory": "auto"}, topo=topology(node, peer=OPEN), modprobe=modprobe, live=True)
    assert not conf.exists() and loaded == ["nvidia_peermem"] and result["actions"] == [f"remove {conf}"]


@pytest.mark.parametrize(
    ("peer", "why"),
    [
        (PROPRIETARY, "proprietary kernel modules"),
        (dict(OPEN, dma_buf=False, kernel_release="5.10.0-28-amd64"), "the kernel 5.10.0-28-amd64 is older than 5.12"),
        ({"dma_buf": None, "open_kernel_modules": None}, "unknown: the probe could not read the NVIDIA driver's"),
    ],
)
def test_dma_buf_refuses_a_node_without_it_naming_why(node, tmp_path, peer, why):
    with pytest.raises(gpudirect.GpuDirectError, match=why):
        run(node, tmp_path, {"peer_memory": "dma_buf"}, topo=topology(node, peer=peer))


def test_bad_settings_name_the_field():
    with pytest.raises(gpudirect.GpuDirectError, match=r"^acs: must be one of keep, disable \(got 'off'\)"):
        gpudirect.validate({"acs": "off"})
    with pytest.raises(gpudirect.GpuDirectError, match=r"^iommu_vendor_args: 'intel_iommu=on quiet'"):
        gpudirect.validate({"iommu": "passthrough", "iommu_vendor_args": ["intel_iommu=on quiet"]})


def test_an_unreadable_acs_on_the_way_is_refused(tmp_path):
    """A 64-byte config space (a probe without root) on the aligned path: nothing is known, nothing is written."""
    root = build(tmp_path)
    with open(config_file(root, DOWN_NIC), "rb") as fh:
        header = fh.read(64)
    with open(config_file(root, DOWN_NIC), "wb") as fh:
        fh.write(header)
    before = snapshot(root)
    with pytest.raises(gpudirect.GpuDirectError, match=rf"ACS state of {DOWN_NIC} .* cannot be read"):
        run(root, tmp_path, {"acs": "disable"})
    assert snapshot(root) == before


def test_the_boot_unit_command_clears_acs_and_a_second_boot_changes_nothing(node, tmp_path, capsys):
    state = tmp_path / "gpudirect.json"
    state.write_text(json.dumps({"acs": "disable", "sysfs_root": f"{node}/sys", "procfs_root": f"{node}/proc"}))
    assert netconf.main(["gpudirect", str(state)]) == 0
    assert json.loads(capsys.readouterr().out)["changed"] is True
    offset = ACS_AT + p2p.ACS_CONTROL
    assert snapshot(node)[DOWN_GPU][offset : offset + 2] == CLEARED.to_bytes(2, "little")
    assert netconf.main(["gpudirect", str(state)]) == 0
    assert json.loads(capsys.readouterr().out)["changed"] is False


def test_a_failed_update_grub_puts_the_drop_in_back_so_the_next_run_tries_again(node, tmp_path):
    cmdline(node, "BOOT_IMAGE=/vmlinuz ro quiet")
    drop_in = tmp_path / "grub.d" / gpudirect.GRUB_FILE

    class FailingGrub(Grub):
        """TEST FAKE of update-grub that fails (a full /boot, a broken grub.cfg template)."""

        def __call__(self):
            self.runs += 1
            return 1, "/usr/sbin/grub-mkconfig: No space left on device"

    failing = FailingGrub()
    with pytest.raises(gpudirect.GpuDirectError) as error:
        run(node, tmp_path, {"iommu": "passthrough"}, topo=topology(node, mode="translated"), grub=failing)
    assert str(error.value) == (
        "iommu: update-grub failed (1): /usr/sbin/grub-mkconfig: No space left on device; "
        "the drop-in was put back as it was"
    )
    assert failing.runs == 1 and not drop_in.exists()
    grub = Grub()
    again = run(node, tmp_path, {"iommu": "passthrough"}, topo=topology(node, mode="translated"), grub=grub)
    assert again["changed"] and grub.runs == 1 and drop_in.exists()


def test_no_reboot_where_the_iommu_is_already_in_passthrough_by_other_arguments(node, tmp_path):
    cmdline(node, "BOOT_IMAGE=/vmlinuz ro iommu.passthrough=1")
    grub = Grub()
    result = run(node, tmp_path, {"iommu": "passthrough"}, grub=grub)  # the probe's groups: identity
    assert result["changed"] and grub.runs == 1 and not result["reboot_required"]
    assert result["reasons"] == [
        "the IOMMU is passthrough already: iommu=pt take effect at the next boot, none is needed now"
    ]


def test_an_unknown_iommu_refuses_acs_unless_passthrough_is_asked(node, tmp_path):
    before = snapshot(node)
    unknown = topology(node, mode=None)
    unknown["gpudirect"]["iommu"]["groups"] = {GPU: None, NIC: None}
    with pytest.raises(gpudirect.GpuDirectError, match=r"^acs: disable is refused while the IOMMU mode is unknown"):
        run(node, tmp_path, {"acs": "disable"}, topo=unknown)
    cmdline(node, "BOOT_IMAGE=/vmlinuz ro quiet")
    result = run(node, tmp_path, {"acs": "disable", "iommu": "passthrough"}, topo=unknown)
    assert snapshot(node) == before and result["reboot_required"]  # the boot-time unit clears ACS after the reboot


@pytest.mark.parametrize(
    ("device", "driver", "physfn", "bridges"),
    [
        ("0000:19:00.2", "vfio-pci", NIC, [ROOT, UPSTREAM, DOWN_NIC]),  # a VF of a redirecting PF
        ("0000:19:00.1", "mlx5_vfio_pci", None, [ROOT, UPSTREAM, DOWN_NIC]),  # a vfio variant driver
    ],
)
def test_vfs_and_vfio_variant_drivers_below_a_target_are_refused(device, driver, physfn, bridges):
    topo = {
        "devices": [{"pci_address": device, "driver": driver, "physfn": physfn, "bridges": bridges}],
        "gpudirect": {"vfio": []},
    }
    targets = {NIC: [f"{GPU} x {NIC}"], DOWN_NIC: [f"{GPU} x {NIC}"]}
    found = gpudirect._vfio_below(topo, targets)
    assert found == [f"{DOWN_NIC} (device {device})"] + ([f"{NIC} (device {device})"] if physfn else [])


def test_a_config_write_the_kernel_refuses_fails_naming_the_function_and_writes_no_other(node, tmp_path, monkeypatch):
    """EPERM, as a non-root writer past the first 64 bytes gets on sysfs: the first write fails, no later one runs."""
    before = snapshot(node)

    def refuse(path, offset, value):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(gpudirect, "write_register", refuse)
    with pytest.raises(gpudirect.GpuDirectError) as error:
        run(node, tmp_path, {"acs": "disable"})
    assert str(error.value) == f"acs: writing {DOWN_GPU} ACS Control @0x14e failed: Operation not permitted"
    assert snapshot(node) == before


def test_peer_memory_errors_fail_the_module_and_the_next_run_tries_again(node, tmp_path, monkeypatch):
    conf = tmp_path / "modules-load.d" / gpudirect.MODULES_FILE
    topo = topology(node, peer=PROPRIETARY)
    # the modules-load directory on a read-only /etc
    real_write = gpudirect.kmod.write_file

    def read_only(path, content, mode=0o644):
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(gpudirect.kmod, "write_file", read_only)
    with pytest.raises(gpudirect.GpuDirectError, match=r"^modules_load_dir: cannot write .*Read-only file system"):
        run(node, tmp_path, {"peer_memory": "auto"}, topo=topo, modprobe=lambda name: (0, ""), live=True)
    monkeypatch.setattr(gpudirect.kmod, "write_file", real_write)
    # modprobe fails (the module is missing from this kernel): the file is written, the module fails
    with pytest.raises(
        gpudirect.GpuDirectError, match=r"^peer_memory: modprobe nvidia_peermem failed \(1\): not found"
    ):
        run(node, tmp_path, {"peer_memory": "auto"}, topo=topo, modprobe=lambda name: (1, "not found"), live=True)
    assert conf.exists()
    loaded = []
    result = run(
        node, tmp_path, {"peer_memory": "auto"}, topo=topo, modprobe=lambda n: (loaded.append(n), (0, ""))[1], live=True
    )
    assert loaded == ["nvidia_peermem"] and result["actions"] == ["modprobe nvidia_peermem"]
