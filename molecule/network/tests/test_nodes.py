# SPDX-License-Identifier: Apache-2.0
"""On every node after converge: VFs, persistent files, boot-time units."""

from __future__ import annotations

import json

PF = "/fixture/sys/bus/pci/devices"
EXPECTED = {
    "net-node1": {"0000:01:00.0": 4, "0000:81:00.0": 2, "0000:01:00.1": 2},
    "net-node2": {"0000:01:00.0": 0, "0000:81:00.0": 0, "0000:01:00.1": 6},
}


def name(host):
    return host.backend.get_hostname()


def test_vf_counts_and_links(host):
    for address, count in EXPECTED[name(host)].items():
        assert host.file(f"{PF}/{address}/sriov_numvfs").content_string.strip() == str(count)
        if count:
            assert host.file(f"{PF}/{address}/virtfn{count - 1}").is_symlink
        assert not host.file(f"{PF}/{address}/virtfn{count}").exists


def test_autoprobe_off_leaves_new_vfs_unbound(host):
    if name(host) != "net-node1":
        return
    assert host.file(f"{PF}/0000:81:00.0/sriov_drivers_autoprobe").content_string.strip() == "0"
    assert not host.file(f"{PF}/0000:81:02.0/driver").exists


def test_rdma_settings_persisted(host):
    options = host.file("/etc/modprobe.d/aligned-dra-rdma.conf")
    assert options.contains("^options ib_core netns_mode=0$")
    modules = host.file("/etc/modules-load.d/aligned-dra-rdma.conf").content_string.splitlines()
    assert modules[1:] == ["ib_core", "mlx5_ib"]


def test_boot_units_installed_enabled_and_working(host):
    for kind in ("rdma", "sriov"):
        unit = host.service(f"aligned-dra-{kind}.service")
        assert unit.is_enabled
        state = json.loads(host.file(f"/etc/aligned-dra/{kind}.json").content_string)
        assert state["sysfs_root"] == "/fixture/sys"
        # What the node does at boot: the same library, nothing left to change.
        start = host.run(f"systemctl start aligned-dra-{kind}.service")
        assert start.rc == 0, start.stderr
        assert unit.is_running or host.run(f"systemctl is-active aligned-dra-{kind}.service").stdout.strip() == "active"
        journal = host.run(f"journalctl -u aligned-dra-{kind}.service -o cat --no-pager")
        assert '"changed": false' in journal.stdout


def test_the_earlier_flat_boot_library_is_gone(host):
    """prepare.yml left copies of the flat layout, as an upgraded node has them; the roles remove them
    (and the package layout of the release after it): the units run the library's zip."""
    library = "/usr/local/lib/aligned-dra"
    assert not host.file(f"{library}/ansible_collections").exists
    assert host.file(f"{library}/network.zip").is_file
    assert host.file(f"{library}/network.zip").mode == 0o644


def test_boot_unit_recreates_vfs_after_a_reset(host):
    """As after a reboot: VFs gone, the unit puts them back."""
    if name(host) != "net-node2":
        return
    assert host.run(f"echo 0 > {PF}/0000:01:00.1/sriov_numvfs").rc == 0
    assert host.run("sleep 0.5; ls " + f"{PF}/0000:01:00.1/").stdout.count("virtfn") == 0
    restart = host.run("systemctl restart aligned-dra-sriov.service")
    assert restart.rc == 0, restart.stderr
    assert host.file(f"{PF}/0000:01:00.1/sriov_numvfs").content_string.strip() == "6"
    assert host.file(f"{PF}/0000:01:00.1/virtfn5").is_symlink


ACS_CONTROL = 0x14E  # molecule/network/files/acs_configs.py: ACS at 0x148, Control at +6


def acs_control(host, bdf):
    config = host.file(f"{PF}/{bdf}/config").content
    assert len(config) == 4096
    return int.from_bytes(config[ACS_CONTROL : ACS_CONTROL + 2], "little")


def test_gpudirect_clears_acs_redirect_on_the_pairs_switch_only(host):
    """net-node1 (acs: disable): RR/CR/EC cleared on the switch's two ports, the root port above left as it was."""
    cleared = name(host) == "net-node1"
    assert acs_control(host, "0000:17:00.0") == (0x0011 if cleared else 0x001D)
    assert acs_control(host, "0000:17:01.0") == (0x0011 if cleared else 0x003D)
    assert acs_control(host, "0000:15:01.0") == 0x001D
    assert acs_control(host, "0000:16:00.0") == 0x0001
    assert host.file("/etc/aligned-dra/gpudirect.json").exists == cleared


def test_gpudirect_boot_unit_puts_acs_redirect_back_to_cleared(host):
    """As after a reboot (the firmware sets the bits again): the unit clears them before the kubelet."""
    if name(host) != "net-node1":
        return
    config = f"{PF}/0000:17:00.0/config"
    reset = host.run(f"printf '\\035\\000' | dd of={config} bs=1 seek={ACS_CONTROL} conv=notrunc status=none")
    assert reset.rc == 0, reset.stderr
    assert acs_control(host, "0000:17:00.0") == 0x001D
    restart = host.run("systemctl restart aligned-dra-gpudirect.service")
    assert restart.rc == 0, restart.stderr
    assert acs_control(host, "0000:17:00.0") == 0x0011
    assert host.service("aligned-dra-gpudirect.service").is_enabled


def test_gpudirect_grub_drop_in_and_peer_memory_at_boot(host):
    """net-node1: iommu=pt in the GRUB drop-in, update-grub (prepare.yml's fake) run once, nvidia_peermem at boot
    (the proprietary NVIDIA modules rule DMA-BUF out); net-node2 (all keep): none of these."""
    grub = host.file("/etc/default/grub.d/aligned-dra-gpudirect.cfg")
    modules = host.file("/etc/modules-load.d/aligned-dra-gpudirect.conf")
    runs = host.file("/var/log/update-grub.runs")
    if name(host) != "net-node1":
        assert not grub.exists and not modules.exists and not runs.exists
        return
    assert 'GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX iommu=pt"' in grub.content_string.splitlines()
    assert [line for line in modules.content_string.splitlines() if not line.startswith("#")] == ["nvidia_peermem"]
    assert runs.content_string.splitlines() == ["update-grub"]
    # The tree is not /sys: nothing was loaded into it.
    assert not host.file("/fixture/sys/module/nvidia_peermem").exists
