# SPDX-License-Identifier: Apache-2.0
"""Network interfaces and SR-IOV VF settings through rtnetlink and devlink.

A thin layer over pyroute2's ``IPRoute`` and ``DL`` (devlink) sockets with
the few operations the ``sriov`` module and the driver's network hook need:
read a link (MTU, state, VFs held by the PF), set MTU and state, rename, move
between network namespaces, set VF properties on a PF, and read or set a PCI
device's eswitch mode.

VF properties are attributes of the PF's link: the kernel reports every VF of
a PF in one ``IFLA_VFINFO_LIST`` when asked with ``RTEXT_FILTER_VF``, and
takes changes as ``IFLA_VFINFO_LIST`` in an ``RTM_SETLINK`` on the PF.

Runs on nodes (Python >= 3.9); pyroute2 is imported when a socket opens.
"""

from __future__ import annotations

import errno
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

RTEXT_FILTER_VF = 1

# include/uapi/linux/if_link.h: IFLA_VF_LINK_STATE_*
VF_LINK_STATES = {"auto": 0, "enable": 1, "disable": 2}
VF_LINK_STATE_NAMES = {value: name for name, value in VF_LINK_STATES.items()}

# include/uapi/linux/devlink.h: DEVLINK_ESWITCH_MODE_*
ESWITCH_MODES = {"legacy": 0, "switchdev": 1}
ESWITCH_MODE_NAMES = {value: name for name, value in ESWITCH_MODES.items()}

VF_PROPERTIES = ("mac", "vlan", "qos", "spoofchk", "trust", "link_state", "min_tx_rate", "max_tx_rate")


class LinkError(Exception):
    """A netlink request failed; ``errno`` is the kernel's error number."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.errno = code


def _strerror(exc: Exception) -> tuple[str, int | None]:
    code = getattr(exc, "code", None)
    if code is None:
        code = getattr(exc, "errno", None)
    if isinstance(code, int) and code > 0:
        return f"{os.strerror(code)} (errno {code})", code
    return str(exc), None


def vf_entry(info: Any) -> dict[str, Any]:
    """One decoded ``IFLA_VF_INFO`` as ``{"vf": N, "mac": ..., "vlan": ...}``."""
    entry: dict[str, Any] = {}
    mac = info.get_attr("IFLA_VF_MAC")
    if mac is not None:
        entry["vf"] = mac["vf"]
        entry["mac"] = mac["mac"]
    vlan = info.get_attr("IFLA_VF_VLAN")
    if vlan is not None:
        entry["vf"] = vlan["vf"]
        entry["vlan"] = vlan["vlan"]
        entry["qos"] = vlan["qos"]
    spoof = info.get_attr("IFLA_VF_SPOOFCHK")
    if spoof is not None:
        # 0xffffffff: the driver cannot report it.
        entry["spoofchk"] = None if spoof["spoofchk"] == 0xFFFFFFFF else bool(spoof["spoofchk"])
    trust = info.get_attr("IFLA_VF_TRUST")
    if trust is not None:
        entry["trust"] = None if trust["trust"] == 0xFFFFFFFF else bool(trust["trust"])
    state = info.get_attr("IFLA_VF_LINK_STATE")
    if state is not None:
        entry["link_state"] = VF_LINK_STATE_NAMES.get(state["link_state"], state["link_state"])
    rate = info.get_attr("IFLA_VF_RATE")
    if rate is not None:
        entry["min_tx_rate"] = rate["min_tx_rate"]
        entry["max_tx_rate"] = rate["max_tx_rate"]
    return entry


def vf_request(vf: int, props: dict[str, Any], current: dict[str, Any] | None = None) -> dict[str, Any]:
    """pyroute2's ``vf=`` argument that sets ``props`` of VF ``vf``.

    VLAN and QoS travel together, and so do the two rates: the value not
    being changed is taken from ``current``.
    """
    current = current or {}
    spec: dict[str, Any] = {"vf": vf}
    if "mac" in props:
        spec["mac"] = props["mac"]
    if "vlan" in props or "qos" in props:
        spec["vlan"] = {
            "vlan": props.get("vlan", current.get("vlan", 0)),
            "qos": props.get("qos", current.get("qos", 0)),
        }
    if "min_tx_rate" in props or "max_tx_rate" in props:
        spec["rate"] = {
            "min_tx_rate": props.get("min_tx_rate", current.get("min_tx_rate", 0)),
            "max_tx_rate": props.get("max_tx_rate", current.get("max_tx_rate", 0)),
        }
    if "spoofchk" in props:
        spec["spoofchk"] = 1 if props["spoofchk"] else 0
    if "trust" in props:
        spec["trust"] = 1 if props["trust"] else 0
    if "link_state" in props:
        spec["link_state"] = VF_LINK_STATES[props["link_state"]]
    return spec


class Links:
    """rtnetlink operations in one network namespace (``netns`` name or None)."""

    def __init__(self, netns: str | None = None) -> None:
        self.netns = netns
        self._ipr: Any = None

    def _ip(self) -> Any:
        if self._ipr is None:
            if self.netns is None:
                from pyroute2 import IPRoute

                self._ipr = IPRoute()
            else:
                from pyroute2 import NetNS

                self._ipr = NetNS(self.netns)
        return self._ipr

    def close(self) -> None:
        if self._ipr is not None:
            self._ipr.close()
            self._ipr = None

    def __enter__(self) -> Links:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _index(self, ifname: str) -> int:
        found = self._ip().link_lookup(ifname=ifname)
        if not found:
            raise LinkError(f"no network interface named {ifname!r}", errno.ENODEV)
        return found[0]

    def _call(self, what: str, *argv: Any, **kwarg: Any) -> Any:
        try:
            return self._ip().link(*argv, **kwarg)
        except LinkError:
            raise
        except Exception as exc:  # pyroute2 raises NetlinkError (an OSError) or its own errors
            message, code = _strerror(exc)
            raise LinkError(f"{what}: {message}", code) from exc

    def get(self, ifname: str, vfs: bool = False) -> dict[str, Any]:
        """``{"index", "ifname", "mtu", "state", "address", "vfs": [...]}``."""
        index = self._index(ifname)
        kwarg: dict[str, Any] = {"index": index}
        if vfs:
            kwarg["ext_mask"] = RTEXT_FILTER_VF
        msgs = self._call(f"read {ifname}", "get", **kwarg)
        msg = msgs[0]
        result: dict[str, Any] = {
            "index": msg["index"],
            "ifname": msg.get_attr("IFLA_IFNAME"),
            "mtu": msg.get_attr("IFLA_MTU"),
            "state": "up" if msg["flags"] & 1 else "down",
            "address": msg.get_attr("IFLA_ADDRESS"),
            "num_vf": msg.get_attr("IFLA_NUM_VF"),
        }
        if vfs:
            entries = []
            vflist = msg.get_attr("IFLA_VFINFO_LIST")
            if vflist is not None:
                for info in vflist.get_attrs("IFLA_VF_INFO"):
                    entries.append(vf_entry(info))
            result["vfs"] = sorted(entries, key=lambda e: e.get("vf", 0))
        return result

    def set_mtu(self, ifname: str, mtu: int) -> None:
        self._call(f"set MTU {mtu} on {ifname}", "set", index=self._index(ifname), mtu=mtu)

    def set_state(self, ifname: str, state: str) -> None:
        if state not in ("up", "down"):
            raise ValueError(f"state must be up or down, got {state!r}")
        self._call(f"set {ifname} {state}", "set", index=self._index(ifname), state=state)

    def rename(self, ifname: str, new_name: str) -> None:
        """Rename a link (the kernel wants it down)."""
        self._call(f"rename {ifname} to {new_name}", "set", index=self._index(ifname), ifname=new_name)

    def move_to_netns(self, ifname: str, netns: str | int) -> None:
        """Move a link into a named namespace (``/var/run/netns/NAME``), a path, or a pid's."""
        index = self._index(ifname)
        if isinstance(netns, int):
            self._call(f"move {ifname} to pid {netns}", "set", index=index, net_ns_pid=netns)
            return
        path = netns if "/" in netns else f"/var/run/netns/{netns}"
        fd = os.open(path, os.O_RDONLY)
        try:
            self._call(f"move {ifname} to {path}", "set", index=index, net_ns_fd=fd)
        finally:
            os.close(fd)

    def set_vf(self, ifname: str, vf: int, props: dict[str, Any], current: dict[str, Any] | None = None) -> None:
        """Set properties of VF ``vf`` of the PF ``ifname``."""
        unknown = sorted(set(props) - set(VF_PROPERTIES))
        if unknown:
            raise ValueError(f"unknown VF properties {unknown}")
        self._call(f"set VF {vf} of {ifname}", "set", index=self._index(ifname), vf=vf_request(vf, props, current))


class Devlink:
    """Eswitch mode of a PCI device through the devlink generic netlink family."""

    def __init__(self) -> None:
        self._dl: Any = None

    def _socket(self) -> Any:
        if self._dl is None:
            try:
                from pyroute2 import DL

                self._dl = DL()
            except Exception as exc:
                message, code = _strerror(exc)
                raise LinkError(f"devlink is not available: {message}", code) from exc
        return self._dl

    def close(self) -> None:
        if self._dl is not None:
            self._dl.close()
            self._dl = None

    @staticmethod
    def message(pci_address: str, cmd: str, attrs: list[tuple[str, Any]]) -> Any:
        """A devlink request for ``pci/<pci_address>`` (generic netlink header + attributes)."""
        from pyroute2.netlink.devlink import DEVLINK_NAMES, devlinkcmd

        msg = devlinkcmd()
        msg["cmd"] = DEVLINK_NAMES[cmd]
        msg["version"] = 1
        msg["attrs"] = [("DEVLINK_ATTR_BUS_NAME", "pci"), ("DEVLINK_ATTR_DEV_NAME", pci_address)] + attrs
        return msg

    def _request(self, pci_address: str, cmd: str, attrs: list[tuple[str, Any]], flags: int) -> list[Any]:
        dl = self._socket()
        msg = self.message(pci_address, cmd, attrs)
        try:
            return list(dl.nlm_request(msg, msg_type=dl.prid, msg_flags=flags))
        except Exception as exc:
            message, code = _strerror(exc)
            raise LinkError(f"devlink {cmd} for pci/{pci_address}: {message}", code) from exc

    def eswitch_mode(self, pci_address: str) -> str | None:
        """``legacy``, ``switchdev``, or None when the device reports no eswitch."""
        for msg in self._request(pci_address, "DEVLINK_CMD_ESWITCH_GET", [], 0x01):
            mode = msg.get_attr("DEVLINK_ATTR_ESWITCH_MODE")
            if mode is not None:
                return ESWITCH_MODE_NAMES.get(mode, str(mode))
        return None

    def set_eswitch_mode(self, pci_address: str, mode: str) -> None:
        if mode not in ESWITCH_MODES:
            raise ValueError(f"eswitch_mode must be one of {sorted(ESWITCH_MODES)}, got {mode!r}")
        self._request(
            pci_address,
            "DEVLINK_CMD_ESWITCH_SET",
            [("DEVLINK_ATTR_ESWITCH_MODE", ESWITCH_MODES[mode])],
            0x01 | 0x04,
        )
