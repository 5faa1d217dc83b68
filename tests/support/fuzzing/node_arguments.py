# SPDX-License-Identifier: Apache-2.0
"""TEST FIXTURE: valid arguments and semantic garbage for the node-side modules the fuzzer runs.

``base_<module>`` draws a valid argument set on a scratch tree,
``semantic_<module>`` breaks it the way only that module understands
(PCI addresses, VF settings, kernel modules, paths). Never shipped.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from ansible_collections.aligned.dra.tests.support.fakes.nvml import FakeNvml
from ansible_collections.aligned.dra.tests.support.fuzzing.values import Broken
from ansible_collections.aligned.dra.tests.support.sites.plan_inputs import PAIR_NODE_TOPOLOGY as TOPOLOGY


def _sriov_pf(draw) -> dict[str, Any]:
    which = draw(st.sampled_from(["cx0", "cx1", "e810"]))
    if which == "cx0":
        pf: dict[str, Any] = {"pci_address": "0000:01:00.0"}
        total = 8
    elif which == "cx1":
        pf = {"netdev": draw(st.sampled_from(["enp1s0f1np0"]))}
        total = 8
    else:
        pf = {"vendor_id": draw(st.sampled_from(["0x8086", "8086"])), "device_id": "0x1592", "index": 0}
        total = 16
    if which == "cx1":
        numvfs = draw(st.sampled_from([None, 2]))  # its two VFs exist; a change would be refused as in use
    else:
        numvfs = draw(st.sampled_from([None, 0, 1, 2, total]))
    if numvfs is not None:
        pf["numvfs"] = numvfs
    if draw(st.booleans()):
        pf["drivers_autoprobe"] = draw(st.booleans())
    if draw(st.booleans()):
        pf["mtu"] = draw(st.sampled_from([68, 1500, 9000]))
    count = numvfs if numvfs is not None else (2 if which == "cx1" else 0)
    if count and draw(st.booleans()):
        vfs = []
        for index in range(min(count, 2)):
            vf = {"index": index, "vlan": draw(st.integers(0, 4095)), "spoofchk": draw(st.booleans())}
            if draw(st.booleans()):
                vf["mac"] = f"02:00:00:00:0{which == 'e810':d}:{index:02x}"
            if vf["vlan"] and draw(st.booleans()):
                vf["qos"] = draw(st.integers(0, 7))
            vfs.append(vf)
        pf["vfs"] = vfs
    if draw(st.booleans()):
        pf["vf_defaults"] = {"trust": draw(st.booleans()), "link_state": draw(st.sampled_from(["auto", "enable"]))}
    if draw(st.booleans()):
        pf["missing"] = "fail"
    return pf


def base_topology_info(draw, root: Path) -> dict[str, Any]:
    args = {"sysfs_root": str(root / "node/sys"), "procfs_root": str(root / "node/proc")}
    if draw(st.booleans()):
        args["pci_ids_path"] = str(root / "pci.ids")
    return args


def base_rdma(draw, root: Path) -> dict[str, Any]:
    args = {
        "sysfs_root": str(root / "sys"),
        "procfs_root": str(root / "proc"),
        "modprobe_dir": str(root / "etc/modprobe.d"),
        "modules_load_dir": str(root / "etc/modules-load.d"),
    }
    if draw(st.booleans()):
        args["netns_mode"] = draw(st.sampled_from(["shared", "exclusive"]))
    if draw(st.booleans()):
        args["modules"] = draw(st.lists(st.sampled_from(["ib_core", "mlx5_ib", "ib-umad", "rdma_ucm"]), unique=True))
    return args


def base_sriov(draw, root: Path) -> dict[str, Any]:
    pfs = [_sriov_pf(draw)]
    if draw(st.booleans()):
        second = _sriov_pf(draw)
        if not any(set(second) & {"pci_address", "netdev", "vendor_id"} & set(pf) for pf in pfs):
            pfs.append(second)
    args = {
        "pfs": pfs,
        "sysfs_root": str(root / "node/sys"),
        "procfs_root": str(root / "node/proc"),
        "driver_state_dir": str(root / "state"),
    }
    if draw(st.booleans()):
        args["settle_timeout"] = draw(st.sampled_from([0.5, 1, 10]))
    if draw(st.booleans()):
        args["vf_drivers"] = ["vfio-pci"]
    return args


def base_topology_capture(draw, root: Path) -> dict[str, Any]:
    args = {"sysfs_root": str(root / "node/sys"), "procfs_root": str(root / "node/proc"), "dest": "node.tar.gz"}
    if draw(st.booleans()):
        args["redact_addresses"] = draw(st.booleans())
    return args


def base_topology_snapshot(draw, root: Path) -> dict[str, Any]:
    return {"src": str(root / "node.tar.gz"), "dest": draw(st.sampled_from(["cache/node", str(root / "tree")]))}


def base_network_plan(draw, root: Path) -> dict[str, Any]:
    """The rdma and sriov modules' bases on one node tree (the options have the same names)."""
    rdma = base_rdma(draw, root)
    args = {key: rdma[key] for key in ("netns_mode", "modules") if key in rdma}
    args["modprobe_dir"] = str(root / "etc/modprobe.d")
    args["modules_load_dir"] = str(root / "etc/modules-load.d")
    if draw(st.booleans()):
        sriov = base_sriov(draw, root)
        args.update({key: sriov[key] for key in ("pfs", "driver_state_dir", "vf_drivers") if key in sriov})
    args.update(sysfs_root=str(root / "node/sys"), procfs_root=str(root / "node/proc"))
    return args


def base_topology_output(draw, root: Path) -> dict[str, Any]:
    nodes = {"n1": {"site": "lab", "topology": copy.deepcopy(TOPOLOGY)}}
    if draw(st.booleans()):
        nodes["n2.example"] = {"site": draw(st.sampled_from(["lab", "west-2"])), "topology": copy.deepcopy(TOPOLOGY)}
    return {
        "output_dir": draw(st.sampled_from([str(root / "out"), "out/new"])),
        "nodes": nodes,
        "sites": draw(st.sampled_from([[], ["lab"], ["lab", "empty"]])),
    }


def _pick_pf(draw, args: dict[str, Any]) -> int | None:
    pfs = args.get("pfs")
    if not isinstance(pfs, list) or not pfs or not all(isinstance(pf, dict) for pf in pfs):
        return None
    return draw(st.integers(0, len(pfs) - 1))


def _break_pf_selector(draw, what: str, pf: dict[str, Any], i: int, broken: Broken) -> None:
    """Break how PF ``i`` is selected: its PCI address, its netdev, or its vendor/device IDs and index."""
    if what == "pci_address":
        for key in ("netdev", "vendor_id", "device_id", "index"):
            pf.pop(key, None)
        pf["pci_address"] = draw(
            st.sampled_from(
                [
                    "0000:01:00.9",
                    "01:00.0",
                    "0000:01:00.0 ",
                    "ZZZZ:01:00.0",
                    "0000:ff:1f.7",
                    "0000:01:02.0",
                    "0000:02:00.0",
                    "0000:01:00",
                    "",
                    "0000:01:00.0\x00",
                ]
            )
        )
        broken.add(("pfs", i, "pci_address"))
    elif what == "netdev":
        for key in ("pci_address", "vendor_id", "device_id", "index"):
            pf.pop(key, None)
        pf["netdev"] = draw(st.sampled_from(["lo0", "a/b", "a b", "x" * 16, "", "eth:0", "enp1s0f1np0v0", "ünï"]))
        broken.add(("pfs", i, "netdev"))
    elif what == "ids":
        for key in ("pci_address", "netdev"):
            pf.pop(key, None)
        key = draw(st.sampled_from(["vendor_id", "device_id", "index"]))
        pf.setdefault("vendor_id", "0x15b3")
        pf.setdefault("device_id", "0x1021")
        pf[key] = draw(
            st.sampled_from(
                ["0x15b", "zzzz", "", "0x15b3x", 5555, -1, 7, 4096] if key != "index" else [-1, 2, 99, 5000]
            )
        )
        broken.add(("pfs", i, key))


def _break_vf_setting(draw, pf: dict[str, Any], i: int, broken: Broken) -> None:
    """Give one VF of PF ``i`` a bad VLAN, QoS, MAC, rate, link state, flag or an unknown key."""
    if "vfs" not in pf:
        pf["vfs"] = [{"index": 0}]
        broken.add(("pfs", i, "vfs", 0, "index"))  # VF 0 need not exist on this PF
    vfs = pf["vfs"]
    if not isinstance(vfs, list) or not vfs or not isinstance(vfs[0], dict):
        return
    key, value = draw(
        st.sampled_from(
            [
                ("vlan", -1),
                ("vlan", 4096),
                ("vlan", "100x"),
                ("qos", 8),
                ("qos", -1),
                ("mac", "01:00:5e:00:00:01"),
                ("mac", "02:00:00:00:00"),
                ("mac", "zz:00:00:00:00:01"),
                ("mac", 42),
                ("min_tx_rate", -1),
                ("max_tx_rate", 2**32),
                ("link_state", "up"),
                ("link_state", 1),
                ("trust", "maybe"),
                ("spoofchk", 3),
                ("colour", "red"),
            ]
        )
    )
    j = draw(st.integers(0, len(vfs) - 1))
    if not isinstance(vfs[j], dict):
        return
    vfs[j][key] = value
    if key == "colour":
        broken.words.append("colour")
    broken.add(("pfs", i, "vfs", j, key))


def _break_vf_index(draw, pf: dict[str, Any], i: int, broken: Broken) -> None:
    """Break the VF list of PF ``i``: indexes missing, negative, beyond numvfs, repeated or not numbers; QoS without VLAN; rates."""
    pf.setdefault("numvfs", 2 if "netdev" in pf else 1)
    numvfs = pf["numvfs"]
    if isinstance(numvfs, bool) or not isinstance(numvfs, int) or numvfs < 1:
        broken.add(("pfs", i, "vfs", 0, "index"))  # an earlier mutation left no VF 0
    shape = draw(
        st.sampled_from(["missing", "negative", "beyond", "dup", "text", "not-a-dict", "qos-no-vlan", "rates"])
    )
    if shape == "missing":
        pf["vfs"] = [{"vlan": 3}]
        broken.add(("pfs", i, "vfs", 0, "index"))
    elif shape == "negative":
        pf["vfs"] = [{"index": -1}]
        broken.add(("pfs", i, "vfs", 0, "index"))
    elif shape == "beyond":
        pf["vfs"] = [{"index": 40}]
        broken.add(("pfs", i, "vfs", 0, "index"))
        broken.add(("pfs", i, "vfs"))
        broken.add(("pfs", i, "numvfs"))
    elif shape == "dup":
        pf["numvfs"] = 2
        pf["vfs"] = [{"index": 0}, {"index": 0}]
        broken.add(("pfs", i, "vfs", 1, "index"))
    elif shape == "text":
        pf["vfs"] = [{"index": "first"}]
        broken.add(("pfs", i, "vfs", 0, "index"))
    elif shape == "not-a-dict":
        pf["vfs"] = ["0"]
        broken.add(("pfs", i, "vfs", 0, "index"))
        broken.add(("pfs", i, "vfs"))
    elif shape == "qos-no-vlan":
        pf["vfs"] = [{"index": 0, "qos": 3}]
        broken.add(("pfs", i, "vfs", 0, "qos"))
    else:
        pf["vfs"] = [{"index": 0, "min_tx_rate": 500, "max_tx_rate": 100}]
        broken.add(("pfs", i, "vfs", 0, "min_tx_rate"))


def semantic_sriov(draw, args: dict[str, Any], root: Path, broken: Broken) -> None:
    i = _pick_pf(draw, args)
    if i is None:
        return
    pf = args["pfs"][i]
    what = draw(
        st.sampled_from(
            [
                "pci_address",
                "netdev",
                "ids",
                "numvfs",
                "vf",
                "vf_index",
                "dup_mac",
                "selectors",
                "same_pf",
                "mtu",
                "vf_defaults",
                "settle_timeout",
                "checkpoint",
                "state_dir",
            ]
        )
    )
    if what in ("pci_address", "netdev", "ids"):
        _break_pf_selector(draw, what, pf, i, broken)
    elif what == "numvfs":
        pf["numvfs"] = draw(st.sampled_from([-1, 9, 17, 65536, 2**40]))
        broken.add(("pfs", i, "numvfs"))
    elif what == "vf":
        _break_vf_setting(draw, pf, i, broken)
    elif what == "vf_index":
        _break_vf_index(draw, pf, i, broken)
    elif what == "dup_mac":
        pf["numvfs"] = 2
        pf["vfs"] = [{"index": 0, "mac": "02:00:00:00:00:01"}, {"index": 1, "mac": "02:00:00:00:00:01"}]
        broken.add(("pfs", i, "vfs"))
    elif what == "selectors":
        shape = draw(st.sampled_from(["two", "none", "index-alone"]))
        if shape == "two":
            pf.update(pci_address="0000:01:00.0", netdev="enp1s0f0np0")
        elif shape == "none":
            for key in ("pci_address", "netdev", "vendor_id", "device_id", "index"):
                pf.pop(key, None)
        else:
            pf.pop("vendor_id", None)
            pf.pop("device_id", None)
            pf["index"] = 0
            if "netdev" not in pf:
                pf["pci_address"] = "0000:01:00.0"
            broken.add(("pfs", i, "index"))
        broken.add(("pfs", i))
    elif what == "same_pf":
        args["pfs"].append({"pci_address": "0000:01:00.1"})
        args["pfs"].append({"netdev": "enp1s0f1np0"})
        broken.add(("pfs", len(args["pfs"]) - 1))
        broken.add(("pfs", len(args["pfs"]) - 2))
    elif what == "mtu":
        pf["mtu"] = draw(st.sampled_from([0, 67, 65536, -9000]))
        broken.add(("pfs", i, "mtu"))
    elif what == "vf_defaults":
        pf["vf_defaults"] = draw(
            st.sampled_from([{"vlan": 5000}, {"qos": 2}, {"mac": "ff:ff:ff:ff:ff:ff"}, {"bogus": 1}, {"index": "x"}])
        )
        broken.add(("pfs", i, "vf_defaults"))
        broken.words.append("bogus")
    elif what == "settle_timeout":
        args["settle_timeout"] = draw(st.sampled_from([-1, "nan", "inf", "-inf", -0.001]))
        broken.add(("settle_timeout",))
    elif what == "checkpoint":
        (root / "state" / "checkpoint.json").write_text(
            draw(
                st.sampled_from(
                    ["{", "[]", '{"claims": 5}', '{"claims": {"u": {"devices": [{"pci_address": 5}]}}}', "\xff"]
                )
            )
        )
        broken.add(("driver_state_dir",))
    else:
        args["driver_state_dir"] = draw(
            st.sampled_from([str(root / "afile"), str(root / "missing"), str(root / "binary.bin")])
        )
        broken.add(("driver_state_dir",))


def semantic_rdma(draw, args: dict[str, Any], root: Path, broken: Broken) -> None:
    what = draw(st.sampled_from(["modules", "duplicate", "file_dirs", "sysfs"]))
    if what == "modules":
        args["modules"] = [
            "ib_core",
            draw(st.sampled_from(["ib core", "", "a" * 65, "../x", "mlx5_ib\x00", "ünï", "-", "a.b"])),
        ]
        broken.add(("modules",))
    elif what == "duplicate":
        args["modules"] = ["mlx5_ib", "mlx5-ib"]
        broken.add(("modules",))
    elif what == "file_dirs":
        key = draw(st.sampled_from(["modprobe_dir", "modules_load_dir"]))
        args[key] = draw(st.sampled_from([str(root / "afile"), str(root / "afile" / "sub"), str(root / "binary.bin")]))
        args.setdefault("netns_mode", "exclusive")
        args.setdefault("modules", ["ib_core"])
        broken.add((key,))
    else:
        args["sysfs_root"] = draw(st.sampled_from([str(root / "missing"), str(root / "afile")]))
        broken.add(("sysfs_root",))


def semantic_topology_info(draw, args: dict[str, Any], root: Path, broken: Broken) -> None:
    key = draw(st.sampled_from(["sysfs_root", "procfs_root", "pci_ids_path"]))
    if key == "pci_ids_path":
        args[key] = draw(
            st.sampled_from(
                [str(root / "binary.bin"), str(root / "emptydir"), str(root / "node"), str(root / "garbage.json")]
            )
        )
    else:
        args[key] = draw(st.sampled_from([str(root / "afile"), str(root / "emptydir"), str(root / "node/sys/bus")]))
    broken.add((key,))


def semantic_topology_capture(draw, args: dict[str, Any], root: Path, broken: Broken) -> None:
    key = draw(st.sampled_from(["sysfs_root", "procfs_root", "dest"]))
    if key == "dest":
        args[key] = draw(st.sampled_from(["emptydir", "missing/node.tar.gz", "afile/node.tar.gz", "emptydir/"]))
    else:
        args[key] = draw(st.sampled_from([str(root / "afile"), str(root / "missing")]))
    broken.add((key,))


def semantic_topology_snapshot(draw, args: dict[str, Any], root: Path, broken: Broken) -> None:
    key = draw(st.sampled_from(["src", "src", "dest"]))
    if key == "src":
        args[key] = draw(
            st.sampled_from(["binary.bin", "garbage.json", "escape.tar.gz", "emptydir", "missing.tar.gz", "afile"])
        )
    else:
        # The scratch directory itself and emptydir's parent are not trees this module made.
        args[key] = draw(st.sampled_from(["afile", "afile/sub", str(root), "."]))
    broken.add((key,))


def semantic_network_plan(draw, args: dict[str, Any], root: Path, broken: Broken) -> None:
    """The rdma and sriov modules' own semantic garbage (the same option names)."""
    if draw(st.booleans()):
        semantic_sriov(draw, args, root, broken)
        args.pop("settle_timeout", None)
    else:
        semantic_rdma(draw, args, root, broken)
        if args.get("sysfs_root") == str(root / "sys"):
            args["sysfs_root"] = str(root / "node/sys")


def semantic_topology_output(draw, args: dict[str, Any], root: Path, broken: Broken) -> None:
    what = draw(st.sampled_from(["site", "node", "topology", "sites", "output_dir"]))
    nodes = args.get("nodes")
    if not isinstance(nodes, dict) or not all(isinstance(v, dict) for v in nodes.values()) or not nodes:
        args["nodes"] = nodes = {"n1": {"site": "lab", "topology": {}}}
    name = sorted(nodes)[0]
    if what == "site":
        nodes[name]["site"] = draw(st.sampled_from(["../up", ".hidden", "a/b", "", "sp ace"]))
        broken.add(("nodes", name, "site"))
    elif what == "node":
        nodes[draw(st.sampled_from(["../x", ".dot", "a/b"]))] = {"site": "lab", "topology": {}}
        broken.add(("nodes",))
    elif what == "topology":
        nodes[name]["topology"] = draw(st.sampled_from([[], "x", None, 5]))
        broken.add(("nodes", name))
    elif what == "sites":
        args["sites"] = ["lab", draw(st.sampled_from(["../up", "a/b", ""]))]
        broken.add(("sites",))
    else:
        args["output_dir"] = draw(
            st.sampled_from([str(root / "afile"), str(root / "afile" / "sub"), str(root / "binary.bin")])
        )
        broken.add(("output_dir",))


# -- mig: a node of an A100 (MIG on, one instance), an H100 (MIG off) and an L40S, faked per run --------
MIG_GPUS = ("0000:18:00.0", "0000:2a:00.0", "0000:3b:00.0")  # A100 (MIG on), H100 (MIG off), L40S
MIG_CONFIGS = {
    "all-1g": [
        {"device-filter": "0x233010DE", "devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}},
        {"device-filter": ["0x20B010DE"], "devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 7}},
    ],
    "balanced": [
        {"device-filter": ["0x233010DE"], "devices": [1], "mig-enabled": True,
         "mig-devices": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}},
        {"device-filter": ["0x20B010DE"], "devices": [0], "mig-enabled": True,
         "mig-devices": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}},
    ],
    "all-enabled": [{"devices": "all", "mig-enabled": True, "mig-devices": {}}],
    "hopper-off": [{"device-filter": "0x233010DE", "devices": "all", "mig-enabled": False}],
}  # fmt: skip


def mig_nvml() -> FakeNvml:
    """The node every mig run sees (fresh per run: a run changes it)."""
    nvml = FakeNvml()
    for bus, model in zip(MIG_GPUS, ("A100-SXM4-40GB", "H100-SXM5-80GB", "L40S"), strict=True):
        nvml.add_gpu(bus, model=model)
    nvml.enable_mig(MIG_GPUS[0])
    nvml.create(MIG_GPUS[0], "3g.20gb", start=4)
    return nvml


def base_mig(draw, root: Path) -> dict[str, Any]:
    args: dict[str, Any] = {"mode": draw(st.sampled_from(["off", "static", "static", "dynamic"]))}
    args["procfs_root"] = str(root / "node/proc")
    if args["mode"] == "static":
        args["mig_configs"] = copy.deepcopy(MIG_CONFIGS)
        if draw(st.booleans()):
            args["mig_configs"] = {"version": "v1", "mig-configs": args["mig_configs"]}
        args["layout"] = draw(st.sampled_from(sorted(MIG_CONFIGS)))
    if draw(st.booleans()):
        key = draw(st.sampled_from(["pci_addresses", "device_ids", "models", "indices"]))
        args["gpus"] = {
            "pci_addresses": {"pci_addresses": [draw(st.sampled_from(MIG_GPUS[:2]))]},
            "device_ids": {"device_ids": [draw(st.sampled_from(["0x20b0", "0x2330", "0x20B0"]))]},
            "models": {"models": [draw(st.sampled_from(["NVIDIA A100*", "NVIDIA H100*", "*"]))]},
            "indices": {"indices": draw(st.lists(st.sampled_from([0, 1]), min_size=1, unique=True))},
        }[key]
    if draw(st.booleans()):
        args["drained"] = False  # drained: true resets an Ampere GPU through run_command (the harness refuses it)
    if draw(st.booleans()):
        args["reset_command"] = ["nvidia-smi", "--gpu-reset", "-i", "{pci_address}"]
    return args


def semantic_mig(draw, args: dict[str, Any], root: Path, broken: Broken) -> None:
    what = draw(st.sampled_from(["entry", "profile", "fit", "layout", "pci", "device_id", "reset"]))
    if what == "reset":
        args["reset_command"] = draw(st.sampled_from([[], [""]]))
        broken.add(("reset_command",))
        return
    if what in ("pci", "device_id"):
        key = "pci_addresses" if what == "pci" else "device_ids"
        value = draw(
            st.sampled_from(
                ["0000:ff:00.0", MIG_GPUS[2], "18:00", "x"] if what == "pci" else ["20b0", "0x20b0de", "A100"]
            )
        )
        args["gpus"] = {key: [value]}
        broken.add(("gpus", key, 0))
        return
    # a fresh static set: earlier mutations may have left mig_configs in any shape
    args.update(mode="static", mig_configs=copy.deepcopy(MIG_CONFIGS))
    configs = args["mig_configs"]
    if what == "layout":
        args["layout"] = draw(st.sampled_from(["missing", ""]))
        broken.add(("layout",))
        return
    name = draw(st.sampled_from(sorted(configs)))
    args["layout"] = name
    entry = configs[name][0]
    if what == "entry":
        key, value = draw(
            st.sampled_from(
                [("devices", "some"), ("devices", [-1]), ("mig-enabled", "yes"), ("device-filter", "A100"),
                 ("mig-devices", {"1g.5gb": 0}), ("colour", 1), ("mig-devices", [1])]
            )
        )  # fmt: skip
        entry[key] = value
    elif what == "profile":
        entry.update({"mig-enabled": True, "mig-devices": {draw(st.sampled_from(["9g.5gb", "5gb", "1c.3g.20gb"])): 1}})
        entry.pop("device-filter", None)
        entry["devices"] = "all"
    else:  # counts that do not fit any GPU
        entry.update({"mig-enabled": True, "devices": "all", "mig-devices": {"1g.5gb": 8, "1g.10gb": 8}})
        entry.pop("device-filter", None)
    broken.add(("mig_configs",))


# -- gpudirect: a GPU and a NIC below one switch whose two downstream ports redirect (ACS 0x1d) --------
GPUDIRECT_GPU, GPUDIRECT_NIC = "0000:18:00.0", "0000:19:00.0"
# root port, switch upstream port, the GPU's and the NIC's downstream ports
GPUDIRECT_BRIDGES = ("0000:15:01.0", "0000:16:00.0", "0000:17:00.0", "0000:17:01.0")
_GPUDIRECT_PCIE = {"link": "gen5x16"}
GPUDIRECT_LAYOUT: dict[str, Any] = {
    "name": "gpudirect-fuzz",
    "cpu": {"vendor": "GenuineIntel", "model": "test", "threads_per_core": 1},
    "numa": {"nodes": [{"id": 0, "cpus": "0-3", "memory_kb": 1000000, "package": 0}]},
    "extended_config": True,  # 4096-byte config spaces, as root reads them
    "iommu": {"type": "identity"},
    "cmdline": "BOOT_IMAGE=/boot/vmlinuz-6.8.0-45-generic ro iommu=pt intel_iommu=on quiet",
    "kernel_release": "6.8.0-45-generic",
    "modules": ["nvidia", "mlx5_core", "ib_core"],
    "nvidia_kernel_modules": "open",  # DMA-BUF possible
    "hostbridges": [
        {
            "bus": 0x15,
            "numa_node": 0,
            "children": [
                dict(
                    _GPUDIRECT_PCIE,
                    type="bridge",
                    addr="01.0",
                    vendor=0x8086,
                    device=0x352A,
                    children=[
                        dict(
                            _GPUDIRECT_PCIE,
                            type="switch",
                            vendor=0x1000,
                            device=0xC030,
                            downstream=[
                                {
                                    "acs": 0x1D,
                                    "children": [
                                        dict(_GPUDIRECT_PCIE, vendor=0x10DE, device=0x2330, driver="nvidia",
                                             **{"class": 0x030200}),
                                    ],
                                },
                                {
                                    "acs": 0x1D,
                                    "children": [
                                        dict(_GPUDIRECT_PCIE, vendor=0x15B3, device=0x1021, driver="mlx5_core",
                                             rdma={"name": "mlx5_0", "link_layer": "InfiniBand"},
                                             **{"class": 0x020700}),
                                    ],
                                },
                            ],
                        )
                    ],
                )
            ],
        }
    ],
}  # fmt: skip
GPUDIRECT_VENDOR_ARGS = [[], ["intel_iommu=on"], ["amd_iommu=on", "iommu.strict=0"]]


def base_gpudirect(draw, root: Path) -> dict[str, Any]:
    """Valid settings on the template's node (IOMMU in passthrough, DMA-BUF possible): every part may change."""
    args: dict[str, Any] = {
        "sysfs_root": str(root / "node/sys"),
        "procfs_root": str(root / "node/proc"),
        "modules_load_dir": str(root / "etc/modules-load.d"),
        "grub_dir": str(root / "etc/default/grub.d"),
    }
    for key in ("acs", "iommu", "peer_memory"):
        if draw(st.booleans()):
            args[key] = draw(st.sampled_from(["keep", "disable"] if key == "acs" else ["keep", "passthrough"]))
    if "peer_memory" in args or draw(st.booleans()):
        args["peer_memory"] = draw(st.sampled_from(["keep", "auto", "dma_buf"]))
    if args.get("iommu") == "passthrough" and draw(st.booleans()):
        args["iommu_vendor_args"] = list(draw(st.sampled_from(GPUDIRECT_VENDOR_ARGS)))
    return args


def _gpudirect_tree(draw, root: Path, broken: Broken) -> str:
    """Break the node tree on an aligned pair's path; returns the setting that then reads it."""
    devices = root / "node/sys/bus/pci/devices"
    what = draw(st.sampled_from(["short", "vfio", "proprietary"]))
    if what == "short":  # a config space as a non-root reader gets it
        bdf = draw(
            st.sampled_from([GPUDIRECT_GPU, GPUDIRECT_NIC, *GPUDIRECT_BRIDGES[1:]])
        )  # the root port is above the pair
        config = devices / bdf / "config"
        config.write_bytes(config.read_bytes()[:64])
        broken.add(("acs",))
        return "acs"
    if what == "vfio":  # a device passed to a VM below the redirecting ports
        bdf = draw(st.sampled_from([GPUDIRECT_GPU, GPUDIRECT_NIC]))
        link = devices / bdf / "driver"
        target = Path(str(link.readlink()).rsplit("/", 1)[0]) / "vfio-pci"
        (link.parent / target).mkdir(exist_ok=True)
        link.unlink()
        link.symlink_to(target)
        broken.add(("acs",))
        return "acs"
    version = root / "node/proc/driver/nvidia/version"
    version.write_text(version.read_text().replace("Open Kernel Module", "Kernel Module"))
    broken.add(("peer_memory",))
    return "peer_memory"


def semantic_gpudirect(draw, args: dict[str, Any], root: Path, broken: Broken) -> None:
    what = draw(st.sampled_from(["vendor_args", "no_passthrough", "sysfs_root", "tree", "grub_dir", "modules_load"]))
    if what == "vendor_args":
        args["iommu"] = "passthrough"
        args["iommu_vendor_args"] = [
            "intel_iommu=on",
            draw(st.sampled_from(["a;reboot", "$(id)", "`id`", "x|y", "a b", "q='1'", "", "-", "a=b=c", "ü=1", "a>b"])),
        ]
        broken.add(("iommu_vendor_args",))
    elif what == "no_passthrough":
        if draw(st.booleans()):
            args["iommu"] = "keep"
        else:
            args.pop("iommu", None)
        args["iommu_vendor_args"] = ["intel_iommu=on"]
        broken.add(("iommu_vendor_args",))
    elif what == "sysfs_root":
        args["sysfs_root"] = draw(st.sampled_from([str(root / "missing"), str(root / "afile"), "relative/missing"]))
        broken.add(("sysfs_root",))
    elif what == "tree":
        setting = _gpudirect_tree(draw, root, broken)
        args[setting] = "disable" if setting == "acs" else "dma_buf"
    elif what == "grub_dir":
        args.update(iommu="passthrough", grub_dir=draw(st.sampled_from([str(root / "afile"), str(root / "missing")])))
        broken.add(("grub_dir",))
    else:
        args["peer_memory"] = draw(st.sampled_from(["auto", "dma_buf"]))
        args["modules_load_dir"] = draw(st.sampled_from([str(root / "afile"), str(root / "binary.bin")]))
        broken.add(("modules_load_dir",))
