# SPDX-License-Identifier: Apache-2.0
"""VFs: routing IDs, bus numbers, physfn and virtfnN links, one writer for layouts and the fake kernel
(tests/support/node_side/sysfs_builder/sriov.py)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from ansible_collections.aligned.dra.tests.support.node_side import sysfs_builder as sb
from ansible_collections.aligned.dra.tests.support.node_side.fake_sysfs_sriov import FakeSriovKernel
from ansible_collections.aligned.dra.tests.unit.support.node_side.sysfs_builder.trees import (
    NUMA1,
    TESTS,
    pci_class,
    pci_functions,
    read,
)


def test_sriov_8x64_has_512_consistent_vfs(trees: dict[str, Path]) -> None:
    root = trees["sriov-8x64"]
    funcs = pci_functions(root)
    pfs = sorted(b for b, d in funcs.items() if (d / "sriov_numvfs").exists())
    assert len(pfs) == 8
    vfs_seen = set()
    for pf in pfs:
        pdir = funcs[pf]
        numvfs = int(read(pdir / "sriov_numvfs"))
        assert numvfs == 64 and read(pdir / "sriov_totalvfs") == "127"
        assert read(pdir / "sriov_vf_device") == "101e"
        virtfns = sorted(pdir.glob("virtfn*"), key=lambda p: int(p.name[6:]))
        assert len(virtfns) == numvfs
        offset, stride = int(read(pdir / "sriov_offset")), int(read(pdir / "sriov_stride"))
        dom, bus, devfn = pf.split(":")
        pf_rid = int(bus, 16) << 8 | int(devfn[:2], 16) << 3 | int(devfn[3])
        for n, link in enumerate(virtfns):
            assert link.name == f"virtfn{n}"
            assert os.readlink(link).startswith("../")
            vdir = link.resolve()
            assert vdir.parent == pdir.parent  # VFs are siblings of their PF
            rid = pf_rid + offset + stride * n
            assert vdir.name == f"{dom}:{rid >> 8:02x}:{(rid & 0xFF) >> 3:02x}.{rid & 7}"
            assert (vdir / "physfn").resolve() == pdir
            assert funcs[vdir.name] == vdir
            assert read(vdir / "device") == "0x101e"
            assert read(vdir / "numa_node") == read(pdir / "numa_node")
            assert not (vdir / "sriov_numvfs").exists()
            assert len(list((vdir / "net").iterdir())) == 1
            assert len(list((vdir / "infiniband").iterdir())) == 1
            vfs_seen.add(vdir.name)
    assert len(vfs_seen) == 512
    with_physfn = {b for b, d in funcs.items() if (d / "physfn").is_symlink()}
    assert with_physfn == vfs_seen
    assert len(list((root / "sys" / "class" / "infiniband").iterdir())) == 8 + 512
    assert len(list((root / "sys" / "class" / "net").iterdir())) == 1 + 8 + 512
    gpus = [b for b, d in funcs.items() if pci_class(d) >> 8 == 0x0302]
    assert len(gpus) == 8


def test_vfs_spill_onto_the_next_bus_and_reserve_it(tmp_path: Path) -> None:
    spec = {
        "numa": NUMA1,
        "hostbridges": [
            {
                "bus": 0x10,
                "children": [
                    {
                        "type": "bridge",
                        "addr": "01.0",
                        "vendor": 0x8086,
                        "device": 0x352A,
                        "link": "gen4x16",
                        "children": [
                            {
                                "vendor": 0x8086,
                                "device": 0x1592,
                                "class": 0x020000,
                                "netdevs": ["auto"],
                                "sriov": {"totalvfs": 128, "numvfs": 100, "offset": 0x80, "stride": 2},
                            }
                        ],
                    },
                    {"type": "bridge", "addr": "02.0", "vendor": 0x8086, "device": 0x352A, "children": []},
                ],
            }
        ],
    }
    result = sb.build(spec, tmp_path)
    funcs = pci_functions(tmp_path)
    vfs = [f for f in result.functions if f.physfn]
    assert len(vfs) == 100
    assert {f.bus for f in vfs} == {0x11, 0x12}
    assert vfs[0].bdf == "0000:11:10.0"  # 0x1100 + 0x80
    assert vfs[-1].bdf == "0000:12:08.6"  # 0x1100 + 0x80 + 2 * 99 = 0x1246
    for vf in vfs:
        assert funcs[vf.bdf].parent == funcs["0000:11:00.0"].parent
    # The VF bus 0x12 belongs to the first root port; the second gets 0x13.
    assert read(funcs["0000:10:01.0"] / "subordinate_bus_number") == str(0x12)
    assert read(funcs["0000:10:02.0"] / "secondary_bus_number") == str(0x13)
    assert read(funcs["0000:12:08.6"] / "physfn" / "sriov_numvfs") == "100"


def _entries(root: Path) -> dict[str, object]:
    """Every path under ``root``: a link's target, a file's bytes or ``dir``."""
    found: dict[str, object] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                found[rel] = os.readlink(path)
            elif path.is_dir():
                found[rel] = "dir"
            else:
                found[rel] = path.read_bytes()
    return found


def test_the_fake_kernels_vfs_are_the_layouts_but_for_mac_and_ifindex(tmp_path: Path) -> None:
    """One VF writer: VFs the fake kernel makes on a write equal those a layout's numvfs makes."""
    layout = TESTS / "fixtures" / "network" / "sriov-lab.yml"
    spec = sb.load_layout(layout)
    spec["hostbridges"][0]["children"][0]["children"][0]["functions"][0]["sriov"]["numvfs"] = 3
    spec["hostbridges"][1]["children"][0]["children"][0]["sriov"]["numvfs"] = 2
    built = sb.build_tree(spec, tmp_path / "layout")
    written = sb.build_tree(sb.load_layout(layout), tmp_path / "kernel")
    kernel = FakeSriovKernel(str(written / "sys"))
    kernel.write(os.path.join(kernel.pf_dir("0000:01:00.0"), "sriov_numvfs"), "3")
    kernel.write(os.path.join(kernel.pf_dir("0000:81:00.0"), "sriov_numvfs"), "2")
    layout_entries, kernel_entries = _entries(built), _entries(written)
    assert sorted(layout_entries) == sorted(kernel_entries)
    differ = sorted(rel for rel in layout_entries if layout_entries[rel] != kernel_entries[rel])
    vf_netdev_files = re.compile(r"sys/devices/.*/net/[a-z0-9]+v\d/(address|ifindex)")
    assert differ and all(vf_netdev_files.fullmatch(rel) for rel in differ), differ
    assert all(kernel_entries[rel] == b"00:00:00:00:00:00\n" for rel in differ if rel.endswith("/address"))
