# SPDX-License-Identifier: Apache-2.0
"""``aligned-dra-netdev-hook``: the CDI ``createRuntime`` hook that hands a NIC to a pod.

The container runtime runs it with the OCI state (JSON with the container's
``pid``) on standard input, after the container's namespaces exist. It finds
the NIC's interface by PCI address (``<sysfs-root>/bus/pci/devices/<bdf>/net/``,
never by a name that may have changed), moves it into ``/proc/<pid>/ns/net``,
renames it, sets the MTU, adds addresses and routes, brings it up and, in RDMA
exclusive mode, moves the RDMA device into the same namespace.

It is idempotent: every container of a pod shares the sandbox's network
namespace, so the second container's run finds the interface already there
under its pod name and only makes sure MTU, addresses, routes and state are
right. Every argument is validated before anything changes; failures exit
non-zero with a message on standard error (the runtime then fails the
container's creation).
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import re
import subprocess
import sys
from typing import Any

from .netdev import IFNAME_RE, netdevs_of, valid_bdf

_RDMA_NAME_RE = re.compile(r"^[A-Za-z0-9_]{1,64}$")
MAX_ADDRESSES = 16
MAX_STATE_BYTES = 1 << 20


class HookError(RuntimeError):
    pass


def _bdf(text: str) -> str:
    if not valid_bdf(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a PCI address like 0000:3b:00.0 (lowercase)")
    return text


def _ifname(text: str) -> str:
    if not IFNAME_RE.match(text) or text in (".", ".."):
        raise argparse.ArgumentTypeError(f"{text!r} is not a Linux interface name (1-15 characters)")
    return text


def _mtu(text: str) -> int:
    if not text.isdigit() or not 68 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not an MTU in 68..65535")
    return int(text)


def _address(text: str) -> ipaddress.IPv4Interface | ipaddress.IPv6Interface:
    try:
        if "/" not in text:
            raise ValueError(text)
        return ipaddress.ip_interface(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not an address in CIDR form") from exc


def _route(text: str) -> tuple[Any, Any]:
    destination, _sep, gateway = text.partition(",")
    try:
        return ipaddress.ip_network(destination, strict=False), (ipaddress.ip_address(gateway) if gateway else None)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not DESTINATION[,GATEWAY]") from exc


def _rdma(text: str) -> str:
    if not _RDMA_NAME_RE.match(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not an RDMA device name")
    return text


def _directory(text: str) -> str:
    if not os.path.isabs(text) or not os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not an absolute path of a directory")
    return text


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="aligned-dra-netdev-hook", description=__doc__.splitlines()[0])
    p.add_argument("--pci-address", required=True, type=_bdf)
    p.add_argument("--name", required=True, type=_ifname, help="interface name inside the pod")
    p.add_argument("--sysfs-root", default="/sys", type=_directory)
    p.add_argument("--procfs-root", default="/proc", type=_directory)
    p.add_argument("--mtu", type=_mtu)
    p.add_argument("--address", action="append", default=[], type=_address)
    p.add_argument("--route", action="append", default=[], type=_route)
    p.add_argument("--rdma-device", type=_rdma, help="move this RDMA device too (RDMA exclusive mode)")
    p.add_argument("--state-file", help="read the OCI state from this file instead of standard input")
    return p


def read_state(stream: Any) -> dict[str, Any]:
    raw = stream.read(MAX_STATE_BYTES + 1)
    if len(raw) > MAX_STATE_BYTES:
        raise HookError("the OCI state on standard input is larger than 1 MiB")
    try:
        state = json.loads(raw)
    except ValueError as exc:
        raise HookError(f"the OCI state is not JSON: {exc}") from exc
    if not isinstance(state, dict):
        raise HookError("the OCI state must be a JSON object")
    pid = state.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        raise HookError(f"the OCI state has no valid pid ({pid!r})")
    return state


def _configure(ipr: Any, index: int, args: argparse.Namespace, current_name: str) -> None:
    if current_name != args.name:
        ipr.link("set", index=index, state="down")
        ipr.link("set", index=index, ifname=args.name)
    if args.mtu:
        ipr.link("set", index=index, mtu=args.mtu)
    present = {(a.get_attr("IFA_ADDRESS"), a["prefixlen"]) for a in ipr.get_addr(index=index)}
    for address in args.address:
        key = (str(address.ip), address.network.prefixlen)
        if key not in present:
            ipr.addr("add", index=index, address=str(address.ip), prefixlen=address.network.prefixlen)
    ipr.link("set", index=index, state="up")
    for destination, gateway in args.route:
        spec: dict[str, Any] = {"dst": str(destination), "oif": index}
        if gateway is not None:
            spec["gateway"] = str(gateway)
        ipr.route("replace", **spec)


def move_rdma(device: str, pid: int) -> str:
    """Move an RDMA device into the pid's network namespace with iproute2's ``rdma`` tool."""
    shown = subprocess.run(["rdma", "dev", "show", device], capture_output=True, text=True, check=False)
    if shown.returncode != 0:
        return "absent"  # already moved (by an earlier container of the pod) or gone
    name = f"aligned-dra-{pid}"
    attach = subprocess.run(["ip", "netns", "attach", name, str(pid)], capture_output=True, text=True, check=False)
    if attach.returncode != 0:
        raise HookError(f"ip netns attach {name} {pid}: {attach.stderr.strip()}")
    try:
        moved = subprocess.run(
            ["rdma", "dev", "set", device, "netns", name], capture_output=True, text=True, check=False
        )
        if moved.returncode != 0:
            raise HookError(f"rdma dev set {device} netns: {moved.stderr.strip()}")
    finally:
        subprocess.run(["ip", "netns", "delete", name], capture_output=True, text=True, check=False)
    return "moved"


def run(args: argparse.Namespace, state: dict[str, Any]) -> str:
    from pyroute2 import IPRoute

    pid = state["pid"]
    netns = os.path.join(args.procfs_root, str(pid), "ns", "net")
    if not os.path.exists(netns):
        raise HookError(f"{netns} does not exist: the container's process is gone")
    outcome = "in-place"
    host_names = netdevs_of(args.sysfs_root, args.pci_address)
    with IPRoute() as host:
        found = [(name, host.link_lookup(ifname=name)) for name in host_names]
        found = [(name, indexes[0]) for name, indexes in found if indexes]
        if found:
            name, index = found[0]
            fd = os.open(netns, os.O_RDONLY | os.O_CLOEXEC)
            try:
                host.link("set", index=index, state="down")
                host.link("set", index=index, net_ns_fd=fd)
            finally:
                os.close(fd)
            outcome = "moved"
        else:
            name = args.name
    with IPRoute(netns=netns) as inside:
        indexes = inside.link_lookup(ifname=name)
        if not indexes and name != args.name:
            indexes = inside.link_lookup(ifname=args.name)
            name = args.name
        if not indexes:
            raise HookError(
                f"no interface of {args.pci_address} in the host namespace, and no {args.name!r} in the pod's"
            )
        _configure(inside, indexes[0], args, name)
    if args.rdma_device:
        move_rdma(args.rdma_device, pid)
    return outcome


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.state_file:
            with open(args.state_file) as handle:
                state = read_state(handle)
        else:
            state = read_state(sys.stdin)
        outcome = run(args, state)
    except (HookError, OSError) as exc:
        print(f"aligned-dra-netdev-hook: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # netlink errors carry their own type
        print(f"aligned-dra-netdev-hook: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(f"aligned-dra-netdev-hook: {args.pci_address} -> {args.name}: {outcome}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
