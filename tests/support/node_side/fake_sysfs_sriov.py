# SPDX-License-Identifier: Apache-2.0
"""TEST FAKE: a writable sysfs tree that answers SR-IOV writes like the kernel.

Lives in ``tests/`` only, never shipped. A plain directory cannot react to a
write, so the kernel's side of ``echo N > sriov_numvfs`` is played by this
module, strictly following ``drivers/pci/iov.c`` (``sriov_numvfs_store``):

- the value must be a decimal number (``EINVAL`` otherwise);
- above ``sriov_totalvfs`` is ``ERANGE``;
- writing the current count is a no-op that succeeds;
- a non-zero count over a non-zero count is ``EBUSY``;
- 0 removes every VF (its directory, ``virtfnN`` link, bus and driver links,
  network interface); N creates VFs at routing ID PF + offset + N * stride
  as siblings of the PF, with ``physfn`` and ``virtfnN`` links, bound to the
  VF driver when ``sriov_drivers_autoprobe`` is 1, each bound VF with a
  network interface ``<pf interface>vN`` when the PF has one. The entries
  are written by the fixture builder's VF writer
  (``tests/support/node_side/sysfs_builder/sriov.py``), so a VF made here looks like one a
  layout makes: its attributes copied from the PF, a config header whose
  IDs read FFFFh; its interface has a zero MAC and the next free ifindex;
- ``sriov_drivers_autoprobe`` takes 0 or 1 (``EINVAL`` otherwise).

Two ways to drive it:

- :class:`FakeSriovKernel` is a :class:`~sriov.SysfsWriter`: the library's
  writes go through it and fail with the kernel's errno (unit tests).
- ``python tests/support/node_side/fake_sysfs_sriov.py watch SYSFS_ROOT`` polls the tree's
  ``sriov_numvfs`` files and reacts to plain file writes (Molecule nodes, where
  the module and the boot-time unit write with ``open()``); a refused value is
  written back to the previous count, which the library notices because the
  VFs it waits for never appear. A Molecule node runs a copy of this file
  with ``sysfs_builder/`` beside it (standard library only, Python 3.9 and
  later).

TEST FAULT (``watch`` only): ``--drop-vfs-above N [--drop-after SECONDS]``
plays a PF whose firmware cannot keep more than N VFs. A count above N is
accepted and its VFs appear as usual (the writer sees its ``virtfnN`` links),
then SECONDS later (default 1) the function resets: every VF vanishes and
``sriov_numvfs`` reads 0. The Molecule ``rollout`` scenario runs one node's
fake kernel this way, so that the node passes the apply step and fails the
verification after it. A count of N or fewer is never dropped.

:class:`FakeLinks` plays rtnetlink for VF properties and MTU on PFs of the
tree (the kernel of the test machines has no SR-IOV devices): new VFs start
with a zero MAC, VLAN 0, spoof check on, trust off, link state auto and no
rate limits, as mlx5 reports them.
"""

from __future__ import annotations

import errno
import os
import shutil
import sys
import time
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))

try:  # pytest: the collection's tests/ package
    from ansible_collections.aligned.dra.tests.support.node_side.sysfs_builder import netdevs, pci, sriov, sysfs
except ImportError:  # a script: the builder package lies beside this file (here, or a node's copy)
    if _HERE not in sys.path:
        sys.path.insert(0, _HERE)
    from sysfs_builder import netdevs, pci, sriov, sysfs


def _library(name: str) -> Any:
    """A module of the collection's library (pytest puts it on the path; a script finds it)."""
    import importlib

    full = f"ansible_collections.aligned.dra.plugins.module_utils.{name}"
    try:
        return importlib.import_module(full)
    except ImportError:
        # Run as a script: from a checkout (.cache/collections) or on a Molecule node,
        # where the role installed the library for the boot-time unit.
        for path in (
            os.environ.get("ALIGNED_DRA_LIBRARY", "/usr/local/lib/aligned-dra"),
            os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(_HERE))), ".cache", "collections"),
        ):
            if path not in sys.path:
                sys.path.insert(0, path)
        return importlib.import_module(full)


def _topology() -> Any:
    return _library("node.topology")


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii") as fh:
            return fh.read().strip()
    except OSError:
        return None


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="ascii") as fh:
        fh.write(text)


def _rel_link(target: str, link: str) -> None:
    if os.path.lexists(link):
        os.unlink(link)
    os.symlink(os.path.relpath(target, os.path.dirname(link)), link)


class FakeSriovKernel:
    """The kernel's reaction to SR-IOV sysfs writes in a fake tree."""

    def __init__(self, sysfs_root: str) -> None:
        self.sys = os.path.abspath(sysfs_root)
        self.writes: list[tuple[str, str]] = []

    # -- the SysfsWriter interface --------------------------------------------------
    def write(self, path: str, value: str) -> None:
        self.writes.append((path, value))
        name = os.path.basename(path)
        pf_dir = os.path.realpath(os.path.dirname(path))
        if name == "sriov_numvfs":
            self.set_numvfs(pf_dir, value)
        elif name == "sriov_drivers_autoprobe":
            if value.strip() not in ("0", "1"):
                raise OSError(errno.EINVAL, os.strerror(errno.EINVAL), path)
            _write(path, value.strip() + "\n")
        else:
            _write(path, value)

    # -- kernel behaviour ---------------------------------------------------------------
    def set_numvfs(self, pf_dir: str, value: str, current: int | None = None, write_back: bool = True) -> None:
        """Apply a write of ``value``; ``write_back`` False when the file already holds it (watch mode:
        writing it again could overwrite the writer's next value)."""
        path = os.path.join(pf_dir, "sriov_numvfs")
        text = value.strip()
        if not text.isdigit():
            raise OSError(errno.EINVAL, os.strerror(errno.EINVAL), path)
        wanted = int(text)
        total = int(_read(os.path.join(pf_dir, "sriov_totalvfs")) or 0)
        if current is None:
            current = int(_read(path) or 0)
        if wanted > total:
            raise OSError(errno.ERANGE, os.strerror(errno.ERANGE), path)
        if wanted == current:
            if write_back:
                _write(path, f"{current}\n")
            return
        if wanted and current:
            raise OSError(errno.EBUSY, os.strerror(errno.EBUSY), path)
        if wanted == 0:
            self._remove_vfs(pf_dir, current)
        else:
            self._create_vfs(pf_dir, wanted)
        if write_back:
            _write(path, f"{wanted}\n")

    def _vf_addresses(self, pf_dir: str, count: int) -> list[str]:
        top = _topology()
        offset = top.parse_int(_read(os.path.join(pf_dir, "sriov_offset")))
        stride = top.parse_int(_read(os.path.join(pf_dir, "sriov_stride")))
        addresses = top.vf_addresses(os.path.basename(pf_dir), count, offset, stride)
        if addresses is None:
            raise OSError(errno.EINVAL, "the PF has no usable sriov_offset/sriov_stride", pf_dir)
        return addresses

    def _pf_netdev(self, pf_dir: str) -> str | None:
        try:
            names = sorted(os.listdir(os.path.join(pf_dir, "net")))
        except OSError:
            return None
        return names[0] if names else None

    def _driver(self, pf_dir: str) -> str | None:
        link = os.path.join(pf_dir, "driver")
        return os.path.basename(os.readlink(link)) if os.path.islink(link) else None

    def _create_vfs(self, pf_dir: str, count: int) -> None:
        autoprobe = (_read(os.path.join(pf_dir, "sriov_drivers_autoprobe")) or "1") == "1"
        driver = self._driver(pf_dir) if autoprobe else None
        if driver is not None:
            driver = _library("node.network.sriov").VF_DRIVERS.get(driver, driver)
        pf_netdev = self._pf_netdev(pf_dir)
        ifindex = self._last_ifindex()
        tree = sysfs.TreeWriter(self.sys)
        for index, address in enumerate(self._vf_addresses(pf_dir, count)):
            vf = self._new_vf(pf_dir, index, address, driver)
            if driver and pf_netdev:
                ifindex += 1
                vf.netdev = self._vf_netdev(pf_dir, pf_netdev, vf, ifindex)
            sriov.write_vf(tree, self.sys, vf)

    def _new_vf(self, pf_dir: str, index: int, address: str, driver: str | None) -> sriov.VirtualFunction:
        """VF ``index`` as the kernel makes it from its PF: same vendor, class, subsystem, revision and place."""

        def pf_int(name: str, default: str) -> int:
            return int(_read(os.path.join(pf_dir, name)) or default, 16)

        def pf_link(prefix: str) -> tuple[str, str] | None:
            speed = _read(os.path.join(pf_dir, f"{prefix}_link_speed"))
            width = _read(os.path.join(pf_dir, f"{prefix}_link_width"))
            return (speed, width) if speed is not None and width is not None else None

        vendor = pf_int("vendor", "0x0000")
        domain, bus, devfn = address.split(":")
        dev, fn = devfn.split(".")
        function = pci.PciFunction(
            domain=int(domain, 16),
            bus=int(bus, 16),
            dev=int(dev, 16),
            fn=int(fn, 16),
            path=os.path.join(os.path.dirname(pf_dir), address),
            vendor=vendor,
            device=pf_int("sriov_vf_device", "0000"),
            pci_class=pf_int("class", "0x020000"),
            numa_node=int(_read(os.path.join(pf_dir, "numa_node")) or "-1"),
            driver=driver,
            physfn=os.path.basename(pf_dir),
            role="vf",
            multifunction=True,
            link=pf_link("current"),
            max_link=pf_link("max"),
        )
        attributes = pci.FunctionAttributes(
            subsystem_vendor=pf_int("subsystem_vendor", f"{vendor:x}"),
            subsystem_device=pf_int("subsystem_device", "0x0000"),
            revision=pf_int("revision", "0x00"),
            irq=0,
            local_cpulist=_read(os.path.join(pf_dir, "local_cpulist")) or "",
            local_cpus=_read(os.path.join(pf_dir, "local_cpus")) or "",
        )
        return sriov.VirtualFunction(index, pf_dir, function, attributes)

    def _vf_netdev(self, pf_dir: str, pf_netdev: str, vf: sriov.VirtualFunction, ifindex: int) -> netdevs.NetdevEntry:
        """The VF's interface: its PF's type, speed and state, MTU 1500 and a zero MAC (as mlx5 shows a new VF's)."""
        pf_net = os.path.join(pf_dir, "net", pf_netdev)
        ntype = int(_read(os.path.join(pf_net, "type")) or "1")
        files = netdevs.netdev_files(
            vf.function,
            ntype,
            0,
            address=":".join(["00"] * netdevs.address_length(ntype)),
            mtu=1500,
            speed=int(_read(os.path.join(pf_net, "speed")) or "-1"),
            operstate=_read(os.path.join(pf_net, "operstate")) or "up",
            ifindex=ifindex,
        )
        return netdevs.NetdevEntry(vf.function.path, sriov.vf_netdev_name(pf_netdev, vf.index), files)

    def _last_ifindex(self) -> int:
        """The highest ifindex of the tree's interfaces (a new one takes the next, as the kernel's do)."""
        net = os.path.join(self.sys, "class", "net")
        found = [_read(os.path.join(net, name, "ifindex")) for name in os.listdir(net)] if os.path.isdir(net) else []
        return max([1] + [int(value) for value in found if value and value.isdigit()])

    def _remove_vfs(self, pf_dir: str, count: int) -> None:
        bus_dir = os.path.join(self.sys, "bus", "pci")
        index = 0
        while True:
            link = os.path.join(pf_dir, f"virtfn{index}")
            if not os.path.islink(link):
                if index >= count:
                    break
                index += 1
                continue
            vf_dir = os.path.realpath(link)
            address = os.path.basename(vf_dir)
            for name in os.listdir(os.path.join(vf_dir, "net")) if os.path.isdir(os.path.join(vf_dir, "net")) else []:
                class_link = os.path.join(self.sys, "class", "net", name)
                if os.path.lexists(class_link):
                    os.unlink(class_link)
            driver_link = os.path.join(vf_dir, "driver")
            if os.path.islink(driver_link):
                bound = os.path.join(os.path.realpath(driver_link), address)
                if os.path.lexists(bound):
                    os.unlink(bound)
            dev_link = os.path.join(bus_dir, "devices", address)
            if os.path.lexists(dev_link):
                os.unlink(dev_link)
            shutil.rmtree(vf_dir)
            os.unlink(link)
            index += 1

    # -- helpers for tests -------------------------------------------------------------
    def pf_dir(self, address: str) -> str:
        return os.path.realpath(os.path.join(self.sys, "bus", "pci", "devices", address))

    def bind(self, vf_address: str, driver: str) -> None:
        """Rebind a VF to another driver (e.g. vfio-pci), as ``driver_override`` + bind would."""
        bus_dir = os.path.join(self.sys, "bus", "pci")
        vf_dir = os.path.realpath(os.path.join(bus_dir, "devices", vf_address))
        old = os.path.join(vf_dir, "driver")
        if os.path.islink(old):
            bound = os.path.join(os.path.realpath(old), vf_address)
            if os.path.lexists(bound):
                os.unlink(bound)
        net = os.path.join(vf_dir, "net")
        if os.path.isdir(net):
            for name in os.listdir(net):
                class_link = os.path.join(self.sys, "class", "net", name)
                if os.path.lexists(class_link):
                    os.unlink(class_link)
            shutil.rmtree(net)
        drv_dir = os.path.join(bus_dir, "drivers", driver)
        os.makedirs(drv_dir, exist_ok=True)
        _rel_link(drv_dir, old)
        _rel_link(vf_dir, os.path.join(drv_dir, vf_address))
        # uevent names the bound driver, as the kernel's does.
        lines = [line for line in (_read(os.path.join(vf_dir, "uevent")) or "").splitlines() if line]
        lines = [f"DRIVER={driver}"] + [line for line in lines if not line.startswith("DRIVER=")]
        _write(os.path.join(vf_dir, "uevent"), "\n".join(lines) + "\n")

    def move_netdev_away(self, vf_address: str) -> None:
        """The VF's interface leaves this namespace (it vanishes from this sysfs view)."""
        vf_dir = os.path.realpath(os.path.join(self.sys, "bus", "pci", "devices", vf_address))
        net = os.path.join(vf_dir, "net")
        for name in os.listdir(net):
            os.unlink(os.path.join(self.sys, "class", "net", name))
        shutil.rmtree(net)


class FakeLinks:
    """rtnetlink for PFs of a fake tree: MTU and VF properties, kept in memory."""

    def __init__(self, kernel: FakeSriovKernel, mtu: int = 1500) -> None:
        self.kernel = kernel
        self.default_mtu = mtu
        self.mtu: dict[str, int] = {}
        self.vfs: dict[tuple[str, int], dict[str, Any]] = {}
        self.calls: list[tuple[Any, ...]] = []
        self.closed = 0

    def close(self) -> None:
        self.closed += 1

    def _numvfs(self, ifname: str) -> int:
        path = os.path.join(self.kernel.sys, "class", "net", ifname)
        if not os.path.lexists(path):
            from ansible_collections.aligned.dra.plugins.module_utils.node.network.netlink_link import LinkError

            raise LinkError(f"no network interface named {ifname!r}", errno.ENODEV)
        device = os.path.realpath(os.path.join(path, "..", ".."))
        return int(_read(os.path.join(device, "sriov_numvfs")) or 0)

    def _vf(self, ifname: str, index: int) -> dict[str, Any]:
        key = (ifname, index)
        if key not in self.vfs:
            self.vfs[key] = {
                "vf": index,
                "mac": "00:00:00:00:00:00",
                "vlan": 0,
                "qos": 0,
                "spoofchk": True,
                "trust": False,
                "link_state": "auto",
                "min_tx_rate": 0,
                "max_tx_rate": 0,
            }
        return self.vfs[key]

    def reset_vfs(self, ifname: str) -> None:
        """VFs were destroyed: recreated ones start from the defaults."""
        for key in [k for k in self.vfs if k[0] == ifname]:
            del self.vfs[key]

    def get(self, ifname: str, vfs: bool = False) -> dict[str, Any]:
        count = self._numvfs(ifname)
        result: dict[str, Any] = {"ifname": ifname, "mtu": self.mtu.get(ifname, self.default_mtu), "num_vf": count}
        if vfs:
            result["vfs"] = [dict(self._vf(ifname, i)) for i in range(count)]
        return result

    def set_mtu(self, ifname: str, mtu: int) -> None:
        self._numvfs(ifname)
        self.calls.append(("mtu", ifname, mtu))
        self.mtu[ifname] = mtu

    def set_vf(self, ifname: str, vf: int, props: dict[str, Any], current: dict[str, Any] | None = None) -> None:
        from ansible_collections.aligned.dra.plugins.module_utils.node.network.netlink_link import LinkError

        if vf >= self._numvfs(ifname):
            raise LinkError(f"set VF {vf} of {ifname}: Invalid argument (errno 22)", errno.EINVAL)
        self.calls.append(("vf", ifname, vf, dict(props)))
        self._vf(ifname, vf).update(props)


def watch(
    sysfs_root: str,
    interval: float = 0.05,
    stop: Any = None,
    ready: Any = None,
    drop_vfs_above: int | None = None,
    drop_after: float = 1.0,
) -> None:
    """React to plain writes of sriov_numvfs in a tree (Molecule nodes).

    ``stop`` and ``ready`` are threading.Events: set ``stop`` to end the loop;
    ``ready`` is set once the current counts are known (writes before that
    would be taken for the kernel's own state). ``drop_vfs_above`` and
    ``drop_after``: the test fault of the module docstring.
    """
    kernel = FakeSriovKernel(sysfs_root)
    devices = os.path.join(kernel.sys, "bus", "pci", "devices")
    known: dict[str, int] = {}
    for address in os.listdir(devices):
        value = _read(os.path.join(devices, address, "sriov_numvfs"))
        if value is not None:
            known[os.path.realpath(os.path.join(devices, address))] = int(value or 0)
    print(f"watching {len(known)} PFs under {kernel.sys}", file=sys.stderr, flush=True)
    if ready is not None:
        ready.set()
    drops: dict[str, float] = {}  # PF -> when its VFs vanish (test fault)
    while stop is None or not stop.is_set():
        for pf_dir, when in list(drops.items()):
            if time.monotonic() < when:
                continue
            del drops[pf_dir]
            count = known[pf_dir]
            if drop_vfs_above is None or count <= drop_vfs_above:
                continue
            kernel._remove_vfs(pf_dir, count)
            _write(os.path.join(pf_dir, "sriov_numvfs"), "0\n")
            known[pf_dir] = 0
            print(f"{os.path.basename(pf_dir)}: TEST FAULT: reset, {count} -> 0 VFs", file=sys.stderr, flush=True)
        for pf_dir, current in list(known.items()):
            value = _read(os.path.join(pf_dir, "sriov_numvfs"))
            # Empty: caught between open(O_TRUNC) and write(); the value follows.
            if not value or value == str(current):
                continue
            try:
                kernel.set_numvfs(pf_dir, value, current=current, write_back=False)
                known[pf_dir] = int(value)
                print(f"{os.path.basename(pf_dir)}: {current} -> {value} VFs", file=sys.stderr, flush=True)
                if drop_vfs_above is not None and int(value) > drop_vfs_above:
                    drops[pf_dir] = time.monotonic() + drop_after
            except OSError as exc:
                _write(os.path.join(pf_dir, "sriov_numvfs"), f"{current}\n")
                print(f"{os.path.basename(pf_dir)}: refused {value!r}: {exc.strerror}", file=sys.stderr, flush=True)
        time.sleep(interval)


def main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="fake_sysfs_sriov.py", description="TEST FAKE: the kernel side of SR-IOV")
    parser.add_argument("action", choices=["watch"])
    parser.add_argument("sysfs_root")
    parser.add_argument(
        "--drop-vfs-above", type=int, metavar="N", help="TEST FAULT: VF counts above N vanish shortly after"
    )
    parser.add_argument("--drop-after", type=float, default=1.0, metavar="SECONDS", help="delay of the fault")
    args = parser.parse_args(argv)
    watch(args.sysfs_root, drop_vfs_above=args.drop_vfs_above, drop_after=args.drop_after)


if __name__ == "__main__":
    main()
