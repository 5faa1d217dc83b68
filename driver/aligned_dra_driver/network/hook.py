# SPDX-License-Identifier: Apache-2.0
"""``aligned-dra-netdev-hook``: the CDI ``createRuntime`` hook that hands a NIC to a pod.

The container runtime runs it with the OCI state (JSON with the container's
``pid``) on standard input, after the container's namespaces exist. It finds
the NIC's interface by PCI address (``<sysfs-root>/bus/pci/devices/<bdf>/net/``,
never by a name that may have changed), moves it into ``/proc/<pid>/ns/net``,
renames it, sets the MTU, adds addresses and routes, brings it up and, in RDMA
exclusive mode, moves the RDMA device into the same namespace.

Addresses and routes come from the claim's ``NicConfig`` (``--address``,
``--route``: a route replaces the pod's route of the same destination and metric)
and from the host (``--host-address``, ``--host-route``: what the NIC had there
when the claim was prepared, see :mod:`aligned_dra_driver.network.addresses`; a
route another interface of the pod holds is refused, never replaced). The kernel
flushes a link's addresses and routes when it changes namespace, so the hook
reads the host's right before the move, and every way back to the host (a step
after the move failed) puts them back.

It is idempotent: every container of a pod shares the sandbox's network
namespace, so the second container's run finds the interface already there
under its pod name and only makes sure MTU, addresses, routes and state are
right. Every argument is validated before anything changes; failures exit
non-zero with a message on standard error (the runtime then fails the
container's creation).
"""

from __future__ import annotations

import argparse
import errno
import functools
import ipaddress
import json
import os
import re
import subprocess
import sys
from typing import Any

from ..config import MAX_ADDRESSES, MAX_ROUTES, interface_address, route_spec
from ..validation import is_bdf, is_ifname, is_rdma_name, show
from . import addresses as layer3
from .interfaces import netdevs_of

MAX_STATE_BYTES = 1 << 20
PID_MAX = 1 << 22  # the kernel's PID_MAX_LIMIT
_MTU_RE = re.compile(r"[0-9]{1,5}")
IFF_UP = 0x1


class HookError(RuntimeError):
    pass


def _bdf(text: str) -> str:
    if not is_bdf(text):
        raise argparse.ArgumentTypeError(f"{show(text)} is not a PCI address like 0000:3b:00.0 (lowercase)")
    return text


def _ifname(text: str) -> str:
    if not is_ifname(text):
        raise argparse.ArgumentTypeError(
            f"{show(text)} is not a Linux interface name (1-15 characters: letters, digits, _ . -)"
        )
    if text == "lo":
        raise argparse.ArgumentTypeError("'lo' is the pod's loopback interface")
    return text


def _mtu(text: str) -> int:
    if not _MTU_RE.fullmatch(text) or not 68 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{show(text)} is not an MTU in 68..65535")
    return int(text)


def _address(text: str) -> ipaddress.IPv4Interface | ipaddress.IPv6Interface:
    try:
        return interface_address(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{show(text)} is not an address in CIDR form") from exc


def _route(text: str) -> tuple[Any, Any]:
    destination, sep, gateway = text.partition(",")
    try:
        return route_spec(destination, gateway if sep else None)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{show(text)} is not DESTINATION[,GATEWAY]: {exc}") from exc


def _host_address(text: str) -> dict[str, Any]:
    try:
        return layer3.parse_address_arg(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{show(text)} is not CIDR[,brd=A][,metric=N][,noprefixroute]: {exc}") from exc


def _host_route(text: str) -> dict[str, Any]:
    try:
        return layer3.parse_route_arg(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"{show(text)} is not DEST[,GATEWAY][,metric=N][,src=A][,scope=N][,proto=N][,onlink]: {exc}"
        ) from exc


def _rdma(text: str) -> str:
    if not is_rdma_name(text):
        raise argparse.ArgumentTypeError(f"{show(text)} is not an RDMA device name")
    return text


def _directory(text: str) -> str:
    if "\0" in text or not os.path.isabs(text) or not os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{show(text)} is not an absolute path of a directory")
    return text


def _file(text: str) -> str:
    if "\0" in text or not os.path.isfile(text):
        raise argparse.ArgumentTypeError(f"{show(text)} is not a file")
    return text


@functools.lru_cache(maxsize=1)
def parser() -> argparse.ArgumentParser:
    """The command line (built once: parsing does not change it)."""
    p = argparse.ArgumentParser(prog="aligned-dra-netdev-hook", description=__doc__.splitlines()[0], allow_abbrev=False)
    p.add_argument("--pci-address", required=True, type=_bdf)
    p.add_argument("--name", required=True, type=_ifname, help="interface name inside the pod")
    p.add_argument("--sysfs-root", default="/sys", type=_directory)
    p.add_argument("--procfs-root", default="/proc", type=_directory)
    p.add_argument("--mtu", type=_mtu)
    p.add_argument("--address", action="append", default=[], type=_address)
    p.add_argument("--route", action="append", default=[], type=_route)
    p.add_argument("--host-address", action="append", default=[], type=_host_address, help="IPv4, from the host")
    p.add_argument("--host-route", action="append", default=[], type=_host_route, help="IPv4, from the host")
    p.add_argument("--rdma-device", type=_rdma, help="move this RDMA device too (RDMA exclusive mode)")
    p.add_argument("--state-file", type=_file, help="read the OCI state from this file instead of standard input")
    return p


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line, every value checked; a bad one exits with status 2 and names it (argparse)."""
    p = parser()
    args = p.parse_args(argv)
    if len(args.address) > MAX_ADDRESSES:
        p.error(f"at most {MAX_ADDRESSES} --address options")
    if len(args.route) > MAX_ROUTES:
        p.error(f"at most {MAX_ROUTES} --route options")
    if len(args.host_address) > layer3.MAX_POD_ADDRESSES:
        p.error(f"at most {layer3.MAX_POD_ADDRESSES} --host-address options")
    if len(args.host_route) > layer3.MAX_POD_ROUTES:
        p.error(f"at most {layer3.MAX_POD_ROUTES} --host-route options")
    return args


def read_state(stream: Any) -> dict[str, Any]:
    """The OCI state (JSON object with the container's ``pid``) from a binary or text stream."""
    raw = stream.read(MAX_STATE_BYTES + 1)
    if len(raw) > MAX_STATE_BYTES:
        raise HookError("the OCI state on standard input is larger than 1 MiB")
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise HookError(f"the OCI state is not UTF-8 text: {exc}") from exc
    try:
        state = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise HookError(f"the OCI state is not JSON: {show(str(exc), 200)}") from exc
    if not isinstance(state, dict):
        raise HookError("the OCI state must be a JSON object")
    pid = state.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or not 0 < pid <= PID_MAX:
        raise HookError(f"the OCI state has no valid pid ({show(pid)})")
    return state


def _netlink(netns: str | None = None) -> Any:
    """A pyroute2 ``IPRoute`` in the hook's own network namespace, or in the one at ``netns``."""
    from pyroute2 import IPRoute

    return IPRoute(netns=netns) if netns else IPRoute()


# the errors of reading /proc/<pid>/ns/net that mean the process has exited; EACCES and EPERM mean the hook
# may not look (ptrace access is refused), which is a different problem with a different fix
_GONE = (errno.ENOENT, errno.ESRCH)
_DENIED = (errno.EACCES, errno.EPERM)


def _why(exc: OSError) -> str:
    return exc.strerror or (os.strerror(exc.errno) if exc.errno else str(exc))


def _pod_namespace(path: str) -> tuple[int, int]:
    """(st_dev, st_ino) of the container's namespace file; a process gone and a read refused are told apart."""
    try:
        st = os.stat(path)
    except OSError as exc:
        if exc.errno in _GONE:
            raise HookError(f"{path}: {_why(exc)}: the container's process is gone") from exc
        if exc.errno in _DENIED:
            raise HookError(
                f"permission denied on {path} ({_why(exc)}): the hook may not read the container's network "
                "namespace (it needs ptrace access to the process: root with CAP_SYS_PTRACE)"
            ) from exc
        raise HookError(f"cannot read {path}: {_why(exc)}") from exc
    return st.st_dev, st.st_ino


def _host_namespace(path: str) -> tuple[int, int]:
    """(st_dev, st_ino) of PID 1's namespace file; unreadable, host networking cannot be ruled out: refused."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise HookError(
            f"cannot read the host's network namespace {path} ({_why(exc)}): without it a pod with host "
            "networking cannot be told apart, so nothing is changed"
        ) from exc
    return st.st_dev, st.st_ino


def _same_namespace(first: str, second: str) -> bool:
    try:
        a, b = os.stat(first), os.stat(second)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _configure(ipr: Any, index: int, args: argparse.Namespace, current_name: str) -> None:
    """Name, MTU, addresses, state and routes in the pod; each present one is left (a second container).

    The host's addresses and routes first (a NicConfig route may go through their network),
    the claim's after; a failure names the interface and what the kernel refused.
    """
    if current_name != args.name:
        ipr.link("set", index=index, state="down")
        ipr.link("set", index=index, ifname=args.name)
    if args.mtu:
        ipr.link("set", index=index, mtu=args.mtu)
    layer3.add_addresses(ipr, index, args.name, args.host_address)
    present = {(a.get_attr("IFA_ADDRESS"), a["prefixlen"]) for a in ipr.get_addr(index=index)}
    for address in args.address:
        key = (str(address.ip), address.network.prefixlen)
        if key not in present:
            try:
                ipr.addr("add", index=index, address=str(address.ip), prefixlen=address.network.prefixlen)
            except Exception as exc:  # netlink errors carry their own type
                raise HookError(f"{args.name}: adding address {address} failed: {layer3.why(exc)}") from exc
    ipr.link("set", index=index, state="up")
    layer3.add_routes(ipr, index, args.name, args.host_route, in_pod=True)
    for destination, gateway in args.route:
        spec: dict[str, Any] = {"dst": str(destination), "oif": index}
        if gateway is not None:
            spec["gateway"] = str(gateway)
        try:
            ipr.route("replace", **spec)
        except Exception as exc:  # netlink errors carry their own type
            shown = f"{destination} via {gateway}" if gateway is not None else str(destination)
            raise HookError(f"{args.name}: adding route {shown} failed: {layer3.why(exc)}") from exc


# The hook runs as root with the environment the runtime gives it: the tools it runs come from these
# directories only (root's own), never from PATH, and run with a fixed environment.
TOOL_DIRS = ("/usr/sbin", "/sbin", "/usr/bin", "/bin")
TOOL_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"}
TOOL_TIMEOUT = 10.0
# where iproute2 keeps named network namespaces (fixed when it is built)
NETNS_RUN_DIR = "/run/netns"


def tool(name: str) -> str:
    """The absolute path of an iproute2 tool, from :data:`TOOL_DIRS` only."""
    for directory in TOOL_DIRS:
        path = os.path.join(directory, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise HookError(f"{name} is not installed in {', '.join(TOOL_DIRS)} (the hook does not search PATH)")


def _run(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [tool(name), *args],
        capture_output=True,
        text=True,
        check=False,
        env=dict(TOOL_ENV),
        timeout=TOOL_TIMEOUT,
        stdin=subprocess.DEVNULL,
    )


def _attach_netns(name: str, pid: int) -> None:
    """``ip netns attach name pid``; an entry of that name left by an earlier run is replaced or reused.

    A run that died between attach and delete leaves ``/run/netns/<name>``; the pid may
    since belong to another container. An entry that is the pid's namespace is used as
    it is; any other is deleted first (it would make the attach fail, and must never
    be the namespace the RDMA device moves into).
    """
    entry = os.path.join(NETNS_RUN_DIR, name)
    target = os.path.join("/proc", str(pid), "ns", "net")
    if os.path.lexists(entry):
        if _same_namespace(entry, target):
            return
        _run("ip", "netns", "delete", name)
        if os.path.lexists(entry):
            raise HookError(f"{entry} is left from an earlier run and could not be removed")
    attach = _run("ip", "netns", "attach", name, str(pid))
    if attach.returncode != 0:
        raise HookError(f"ip netns attach {name} {pid}: {attach.stderr.strip()}")
    if not _same_namespace(entry, target):
        raise HookError(f"{entry} is not the network namespace of process {pid} after ip netns attach")


def move_rdma(device: str, pid: int) -> str:
    """Move an RDMA device into the pid's network namespace with iproute2's ``rdma`` tool."""
    shown = _run("rdma", "dev", "show", device)
    if shown.returncode != 0:
        return "absent"  # already moved (by an earlier container of the pod) or gone
    name = f"aligned-dra-{pid}"
    try:
        _attach_netns(name, pid)
        moved = _run("rdma", "dev", "set", device, "netns", name)
        if moved.returncode != 0:
            raise HookError(f"rdma dev set {device} netns: {moved.stderr.strip()}")
    finally:
        if os.path.lexists(os.path.join(NETNS_RUN_DIR, name)):
            _run("ip", "netns", "delete", name)
    return "moved"


def _link_facts(ipr: Any, index: int, records: bool = False) -> dict[str, Any]:
    """The link's MTU limits, state and parent device; with ``records`` its IPv4 addresses and routes too."""
    (link,) = ipr.get_links(index)
    facts = {
        "mtu": link.get_attr("IFLA_MTU"),
        "min_mtu": link.get_attr("IFLA_MIN_MTU"),
        "max_mtu": link.get_attr("IFLA_MAX_MTU"),
        "up": bool(link["flags"] & IFF_UP),
        "parent_bus": link.get_attr("IFLA_PARENT_DEV_BUS_NAME"),
        "parent_dev": link.get_attr("IFLA_PARENT_DEV_NAME"),
    }
    if records:
        facts["records"] = layer3.read(ipr, index)
    return facts


def _put_back(ipr: Any, index: int, name: str, facts: dict[str, Any]) -> str:
    """The host's addresses and routes back on the link (its routes need it up); what could not be, in words, or ''."""
    records = facts.get("records") or {}
    if not (records.get("addresses") or records.get("routes")):
        return ""
    try:
        failed, left_out = layer3.put_back(ipr, index, name, records)
    except Exception as exc:  # the dump itself failed: netlink errors carry their own type
        return f"; putting back the addresses and routes of {name}: {layer3.why(exc)}"
    return "".join(f"; {said}" for said in failed + left_out)


def _check_mtu(args: argparse.Namespace, facts: dict[str, Any], name: str) -> None:
    if not args.mtu:
        return
    low, high = facts.get("min_mtu"), facts.get("max_mtu")
    if (low and args.mtu < low) or (high and args.mtu > high):
        raise HookError(f"MTU {args.mtu} is outside what {name} supports ({low}..{high})")


def _move_back(netns: str, own_ns: str, name: str, original: str, facts: dict[str, Any]) -> str:
    """Undo a move: the interface back where it was found (the hook's namespace), with its name, MTU, state,
    addresses and routes."""
    with _netlink(netns) as inside:
        indexes = inside.link_lookup(ifname=name) or inside.link_lookup(ifname=original)
        if not indexes:
            return "the interface is not in the pod's namespace any more"
        index = indexes[0]
        inside.link("set", index=index, state="down")
        (link,) = inside.get_links(index)
        if link.get_attr("IFLA_IFNAME") != original:
            inside.link("set", index=index, ifname=original)
        if facts.get("mtu") and link.get_attr("IFLA_MTU") != facts["mtu"]:
            inside.link("set", index=index, mtu=facts["mtu"])
        fd = os.open(own_ns, os.O_RDONLY | os.O_CLOEXEC)
        try:
            inside.link("set", index=index, net_ns_fd=fd)
        finally:
            os.close(fd)
    left_out = ""
    with _netlink() as host:
        indexes = host.link_lookup(ifname=original)
        if indexes:
            if facts.get("up"):
                host.link("set", index=indexes[0], state="up")
            left_out = _put_back(host, indexes[0], original, facts)
    if not left_out:
        kept = facts.get("records") or {}
        if kept.get("addresses") or kept.get("routes"):
            return f"{original} is back in the host namespace with its addresses and routes"
        return f"{original} is back in the host namespace"
    return f"{original} is back in the host namespace{left_out}"


def run(args: argparse.Namespace, state: dict[str, Any]) -> str:
    """Move and configure the interface; refuses before any change what it can check first.

    Checked before the first change: the container's network namespace can be read
    and is not the host's (PID 1's under ``--procfs-root``), the interface exists,
    the MTU is within the device's limits, and no other interface in the pod has
    the name. A netlink call that fails after the move is undone: the interface
    goes back to the host with its original name, MTU, state, addresses and routes
    (read right before the move, which flushes them); so does a move that fails
    after the link was set down (which flushes its routes).
    """
    pid = state["pid"]
    netns = os.path.join(args.procfs_root, str(pid), "ns", "net")
    # host networking means PID 1's namespace: the hook's own may be another one (the hook in a container)
    host_ns = os.path.join(args.procfs_root, "1", "ns", "net")
    # where the NIC is found, and where it goes back to when a step after the move fails
    own_ns = os.path.join(args.procfs_root, "self", "ns", "net")
    if _pod_namespace(netns) == _host_namespace(host_ns):
        raise HookError(
            f"process {pid} shares the host's network namespace (host networking): the NIC stays where it is"
        )
    if not os.path.isdir(os.path.join(args.sysfs_root, "bus", "pci", "devices", args.pci_address)):
        # else a pod interface of that name (the CNI's eth0, say) would be configured as if it were the NIC
        raise HookError(f"no PCI device {args.pci_address} on this node")
    host_names = netdevs_of(args.sysfs_root, args.pci_address)
    moving: tuple[str, int, dict[str, Any]] | None = None
    with _netlink() as host:
        for candidate in host_names:
            indexes = host.link_lookup(ifname=candidate)
            if indexes:
                # its addresses and routes too: the move flushes them, a way back puts them back
                moving = (candidate, indexes[0], _link_facts(host, indexes[0], records=True))
                break
    with _netlink(netns) as inside:
        if moving is not None:
            name, _index, facts = moving
            _check_mtu(args, facts, name)
            if name != args.name and inside.link_lookup(ifname=args.name):
                raise HookError(f"the pod already has an interface named {args.name!r}")
            if inside.link_lookup(ifname=name):
                raise HookError(f"the pod already has an interface named {name!r} (the NIC's name in the host)")
        else:
            indexes = inside.link_lookup(ifname=args.name)
            if not indexes:
                raise HookError(
                    f"no interface of {args.pci_address} in the host namespace, and no {args.name!r} in the pod's"
                )
            facts = _link_facts(inside, indexes[0])
            # the kernel names a NIC's device (5.15 and later): an interface of another device is not ours to
            # configure (a virtual interface, as in tests, has none and is taken by its name)
            if facts["parent_bus"] and (facts["parent_bus"], facts["parent_dev"]) != ("pci", args.pci_address):
                raise HookError(
                    f"the pod's {args.name!r} belongs to {facts['parent_bus']} device {facts['parent_dev']}, "
                    f"not to {args.pci_address}"
                )
            _check_mtu(args, facts, args.name)
            _configure(inside, indexes[0], args, args.name)
    if moving is None:
        outcome = "in-place"
    else:
        name, index, facts = moving
        with _netlink() as host:
            fd = os.open(netns, os.O_RDONLY | os.O_CLOEXEC)
            try:
                host.link("set", index=index, state="down")
                try:
                    host.link("set", index=index, net_ns_fd=fd)
                except Exception as exc:
                    if facts["up"]:  # down flushed its routes: they come back with the state
                        host.link("set", index=index, state="up")
                        left_out = _put_back(host, index, name, facts)
                        if left_out:
                            raise HookError(f"moving {name} into the pod failed ({layer3.why(exc)}){left_out}") from exc
                    raise
            finally:
                os.close(fd)
        try:
            with _netlink(netns) as inside:
                indexes = inside.link_lookup(ifname=name)
                if not indexes:
                    raise HookError(f"{name} did not arrive in the pod's namespace")
                _configure(inside, indexes[0], args, name)
            if args.rdma_device:
                move_rdma(args.rdma_device, pid)
        except Exception as exc:
            try:
                undone = _move_back(netns, own_ns, args.name, name, facts)
            except Exception as again:  # netlink errors carry their own type
                undone = f"moving it back failed too: {type(again).__name__}: {again}"
            said = str(exc) if isinstance(exc, (HookError, layer3.Layer3Error)) else f"{type(exc).__name__}: {exc}"
            raise HookError(f"configuring {name} in the pod failed ({said}); {undone}") from exc
        return "moved"
    if args.rdma_device:
        move_rdma(args.rdma_device, pid)
    return outcome


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        if args.state_file:
            with open(args.state_file, "rb") as handle:
                state = read_state(handle)
        else:
            state = read_state(getattr(sys.stdin, "buffer", sys.stdin))
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
