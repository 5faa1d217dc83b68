# SPDX-License-Identifier: Apache-2.0
"""The IPv4 addresses and routes of a NIC: read on the host, given to the pod, put back on the host.

The kernel flushes a link's addresses and routes when the link leaves a network
namespace, and its IPv4 routes when it goes down; nothing brings them back. A NIC
on a rail is reachable only with them, so the driver reads them at Prepare (the
NIC is still on the host), records them in the checkpoint and hands the pod's
share to the netdev hook; the hook reads them again right before the move (what
its own rollback puts back) and adds them in the pod; Unprepare puts the
recorded ones back on the host.

What is read (``read``): every IPv4 address of the link (primary and secondary,
with prefix length, broadcast, ``metric`` and ``noprefixroute``), and every IPv4
unicast route whose output interface is the link, in every table, except the ones
the kernel makes itself when the address is added again (``kernel_made``: the
local table's, and the prefix route of an address). Not read: IPv6, multipath
routes and routes through nexthop objects (several interfaces share them), routes
with a TOS, route metrics (``RTA_METRICS``: ``mtu lock``, ``initcwnd``…) and
address lifetimes (addresses come back permanent).

What the pod gets (``carried``): all the addresses, and the routes of the main
table, except a default route (the pod's own network has it) and a route whose
preferred source is not one of those addresses. A claim's ``NicConfig`` wins:
with ``addresses`` it gets those and neither the host's addresses nor its routes
(they go with the host's addresses); with ``routes`` it gets those instead of the
host's routes.

Records are JSON objects (the checkpoint keeps them); the hook gets them as
``--host-address CIDR[,brd=A][,metric=N][,noprefixroute]`` and
``--host-route DEST[,GATEWAY][,metric=N][,src=A][,scope=N][,proto=N][,onlink]``.
"""

from __future__ import annotations

import errno
import ipaddress
import os
from typing import Any

from ..validation import show

AF_INET = 2
IFA_F_SECONDARY = 0x01
IFA_F_NOPREFIXROUTE = 0x200
RTPROT_KERNEL = 2
RTPROT_BOOT = 3  # what iproute2 gives a route added without a protocol
RT_SCOPE_LINK = 253
RT_TABLE_MAIN = 254
RT_TABLE_LOCAL = 255
RTN_UNICAST = 1
RTNH_F_ONLINK = 0x4
# what the pod gets: the NicConfig limits (a CDI spec stays small); what the checkpoint keeps for the host
MAX_POD_ADDRESSES = 16
MAX_POD_ROUTES = 32
MAX_HOST_ADDRESSES = 64
MAX_HOST_ROUTES = 256
ADDRESS_KEYS = ("address", "broadcast", "metric", "noprefixroute")
ROUTE_KEYS = ("destination", "gateway", "metric", "source", "scope", "protocol", "table", "onlink")
U32 = 2**32 - 1


class Layer3Error(RuntimeError):
    """An address or route that could not be added; the message names the interface and the item."""


# -- records ------------------------------------------------------------------------------------


def _int(value: Any, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def _ipv4(value: Any) -> ipaddress.IPv4Address:
    """An IPv4 address from text; ValueError naming it otherwise."""
    if not isinstance(value, str) or not value.isascii():
        raise ValueError(f"{show(value)} is not an IPv4 address")
    try:
        return ipaddress.IPv4Address(value)
    except ValueError as exc:
        raise ValueError(f"{show(value)} is not an IPv4 address") from exc


def address_problem(record: Any) -> str | None:
    """Why ``record`` is not an address record (``{address, broadcast, metric, noprefixroute}``), or None."""
    if not isinstance(record, dict) or set(record) != set(ADDRESS_KEYS):
        return f"must be an object with exactly {', '.join(ADDRESS_KEYS)}"
    text = record["address"]
    try:
        if not isinstance(text, str) or "/" not in text or not text.isascii():
            raise ValueError
        ipaddress.IPv4Interface(text)
    except ValueError:
        return f"address {show(text)} is not an IPv4 address with a prefix length (192.168.128.5/21)"
    if record["broadcast"] is not None:
        try:
            _ipv4(record["broadcast"])
        except ValueError as exc:
            return f"broadcast {exc}"
    if not _int(record["metric"], 0, U32):
        return f"metric {show(record['metric'])} is not an integer 0..{U32}"
    if not isinstance(record["noprefixroute"], bool):
        return "noprefixroute must be true or false"
    return None


def route_problem(record: Any) -> str | None:
    """Why ``record`` is not a route record (``ROUTE_KEYS``), or None."""
    if not isinstance(record, dict) or set(record) != set(ROUTE_KEYS):
        return f"must be an object with exactly {', '.join(ROUTE_KEYS)}"
    text = record["destination"]
    try:
        if not isinstance(text, str) or "/" not in text or not text.isascii():
            raise ValueError
        ipaddress.IPv4Network(text)
    except ValueError:
        return f"destination {show(text)} is not an IPv4 network (10.200.0.0/16)"
    for key in ("gateway", "source"):
        if record[key] is not None:
            try:
                _ipv4(record[key])
            except ValueError as exc:
                return f"{key} {exc}"
    for key, high in (("metric", U32), ("scope", 255), ("protocol", 255), ("table", U32)):
        if not _int(record[key], 0, high):
            return f"{key} {show(record[key])} is not an integer 0..{high}"
    if record["table"] == 0:
        return "table 0 is not a routing table"
    if not isinstance(record["onlink"], bool):
        return "onlink must be true or false"
    return None


def address_record(msg: Any) -> dict[str, Any] | None:
    """The record of an ``RTM_NEWADDR`` message; None for another family."""
    if msg.get("family") != AF_INET:
        return None
    ip = msg.get_attr("IFA_LOCAL") or msg.get_attr("IFA_ADDRESS")
    flags = msg.get_attr("IFA_FLAGS")
    flags = msg.get("flags", 0) if flags is None else flags
    return {
        "address": f"{ip}/{msg['prefixlen']}",
        "broadcast": msg.get_attr("IFA_BROADCAST"),
        "metric": msg.get_attr("IFA_RT_PRIORITY") or 0,
        "noprefixroute": bool(flags & IFA_F_NOPREFIXROUTE),
        "_secondary": bool(flags & IFA_F_SECONDARY),
    }


def route_record(msg: Any, index: int) -> dict[str, Any] | None:
    """The record of an ``RTM_NEWROUTE`` message through link ``index``; None for one that is not read."""
    if msg.get("family") != AF_INET or msg.get("type") != RTN_UNICAST or msg.get("tos"):
        return None
    if msg.get_attr("RTA_OIF") != index or msg.get_attr("RTA_MULTIPATH") or msg.get_attr("RTA_NH_ID"):
        return None
    return {
        "destination": f"{msg.get_attr('RTA_DST') or '0.0.0.0'}/{msg.get('dst_len', 0)}",
        "gateway": msg.get_attr("RTA_GATEWAY"),
        "metric": msg.get_attr("RTA_PRIORITY") or 0,
        "source": msg.get_attr("RTA_PREFSRC"),
        "scope": msg.get("scope", 0),
        "protocol": msg.get("proto", 0),
        "table": msg.get_attr("RTA_TABLE") or msg.get("table") or RT_TABLE_MAIN,
        "onlink": bool(msg.get("flags", 0) & RTNH_F_ONLINK),
    }


def kernel_made(route: dict[str, Any], addresses: list[dict[str, Any]]) -> bool:
    """Whether the kernel adds ``route`` itself when ``addresses`` are added again.

    The local table's routes (local and broadcast), and an address's prefix route:
    protocol kernel, link scope, no gateway, the address as source, its network as
    destination and its metric, in the main table, unless the address has
    ``noprefixroute`` (NetworkManager then adds a route of its own, which is kept).
    """
    if route["protocol"] != RTPROT_KERNEL:
        return False
    if route["table"] == RT_TABLE_LOCAL:
        return True
    if route["table"] != RT_TABLE_MAIN or route["gateway"] is not None or route["scope"] != RT_SCOPE_LINK:
        return False
    for address in addresses:
        interface = ipaddress.IPv4Interface(address["address"])
        if (
            not address["noprefixroute"]
            and interface.network.prefixlen < 32
            and route["destination"] == str(interface.network)
            and route["source"] == str(interface.ip)
            and route["metric"] == address["metric"]
        ):
            return True
    return False


def layer3(addr_msgs: list[Any], route_msgs: list[Any], index: int) -> dict[str, list[dict[str, Any]]]:
    """The records of link ``index`` from its address and route messages.

    Addresses: primaries before secondaries (the kernel makes an address secondary when a
    primary of its network is already there, so this order gives each its role back).
    Routes: the kernel's own left out; routes without a gateway first (a gateway must be
    reachable when its route is added).
    """
    found = [a for a in (address_record(m) for m in addr_msgs) if a is not None]
    found.sort(key=lambda a: a["_secondary"])
    addresses = [{k: a[k] for k in ADDRESS_KEYS} for a in found]
    routes = [r for r in (route_record(m, index) for m in route_msgs) if r is not None]
    routes = [r for r in routes if not kernel_made(r, addresses)]
    routes.sort(key=lambda r: r["gateway"] is not None)
    return {"addresses": addresses, "routes": routes}


def carried(host: dict[str, Any] | None, cfg: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The host's addresses and routes the pod gets, given the claim's NicConfig ``cfg`` (see the module)."""
    if not host:
        return {"addresses": [], "routes": []}
    addresses = [] if "addresses" in cfg else list(host["addresses"])
    if "addresses" in cfg or "routes" in cfg:
        return {"addresses": addresses, "routes": []}
    own = {str(ipaddress.IPv4Interface(a["address"]).ip) for a in addresses}
    routes = [
        r
        for r in host["routes"]
        if r["table"] == RT_TABLE_MAIN
        and not r["destination"].endswith("/0")
        and (r["source"] is None or r["source"] in own)
    ]
    return {"addresses": addresses, "routes": routes}


# -- the hook's arguments ------------------------------------------------------------------------


def address_arg(record: dict[str, Any]) -> str:
    """``CIDR[,brd=A][,metric=N][,noprefixroute]``."""
    parts = [record["address"]]
    if record["broadcast"]:
        parts.append(f"brd={record['broadcast']}")
    if record["metric"]:
        parts.append(f"metric={record['metric']}")
    if record["noprefixroute"]:
        parts.append("noprefixroute")
    return ",".join(parts)


def route_arg(record: dict[str, Any]) -> str:
    """``DEST[,GATEWAY][,metric=N][,src=A][,scope=N][,proto=N][,onlink]`` (main table: the pod's routes)."""
    parts = [record["destination"]]
    if record["gateway"]:
        parts.append(record["gateway"])
    if record["metric"]:
        parts.append(f"metric={record['metric']}")
    if record["source"]:
        parts.append(f"src={record['source']}")
    parts.append(f"scope={record['scope']}")
    parts.append(f"proto={record['protocol']}")
    if record["onlink"]:
        parts.append("onlink")
    return ",".join(parts)


def _options(parts: list[str], allowed: dict[str, str], flags: tuple[str, ...]) -> dict[str, Any]:
    """``key=value`` and flag parts, each at most once; ValueError naming a bad one."""
    seen: dict[str, Any] = {}
    for part in parts:
        key, sep, value = part.partition("=")
        if (key in flags and not sep) or (key in allowed and sep):
            if key in seen:
                raise ValueError(f"{key} is given twice")
            seen[key] = True if key in flags else value
            continue
        known = [f"{k}=" for k in allowed] + list(flags)
        raise ValueError(f"{show(part)} is not one of {', '.join(known)}")
    return seen


def _number(value: str, key: str, high: int) -> int:
    if not (value.isascii() and value.isdigit()) or len(value) > 10 or int(value) > high:
        raise ValueError(f"{key}={show(value)} is not an integer 0..{high}")
    return int(value)


def parse_address_arg(text: str) -> dict[str, Any]:
    """The record of a ``--host-address`` argument; ValueError naming what is wrong."""
    head, *rest = text.split(",")
    options = _options(rest, {"brd": "", "metric": ""}, ("noprefixroute",))
    record = {
        "address": head,
        "broadcast": str(_ipv4(options["brd"])) if "brd" in options else None,
        "metric": _number(options["metric"], "metric", U32) if "metric" in options else 0,
        "noprefixroute": "noprefixroute" in options,
    }
    problem = address_problem(record)
    if problem:
        raise ValueError(problem)
    record["address"] = str(ipaddress.IPv4Interface(head))
    return record


def parse_route_arg(text: str) -> dict[str, Any]:
    """The record of a ``--host-route`` argument (main table); ValueError naming what is wrong."""
    head, *rest = text.split(",")
    gateway = None
    if rest and "=" not in rest[0] and rest[0] != "onlink":
        gateway = str(_ipv4(rest.pop(0)))
    options = _options(rest, {"metric": "", "src": "", "scope": "", "proto": ""}, ("onlink",))
    record = {
        "destination": head,
        "gateway": gateway,
        "metric": _number(options["metric"], "metric", U32) if "metric" in options else 0,
        "source": str(_ipv4(options["src"])) if "src" in options else None,
        "scope": _number(options["scope"], "scope", 255) if "scope" in options else 0,
        "protocol": _number(options["proto"], "proto", 255) if "proto" in options else RTPROT_BOOT,
        "table": RT_TABLE_MAIN,
        "onlink": "onlink" in options,
    }
    problem = route_problem(record)
    if problem:
        raise ValueError(problem)
    record["destination"] = str(ipaddress.IPv4Network(head))
    return record


# -- netlink ------------------------------------------------------------------------------------


def why(exc: BaseException) -> str:
    """A netlink error as ``Network is unreachable (errno 101)``; another error with its type."""
    code = getattr(exc, "code", None)
    if isinstance(code, int) and code > 0:
        text = exc.args[1] if len(exc.args) > 1 and isinstance(exc.args[1], str) else os.strerror(code)
        return f"{text} (errno {code})"
    return f"{type(exc).__name__}: {exc}"


def read(ipr: Any, index: int) -> dict[str, list[dict[str, Any]]]:
    """The records of link ``index`` in ``ipr``'s namespace (an ``IPRoute``)."""
    return layer3(
        list(ipr.get_addr(family=AF_INET, index=index)), list(ipr.get_routes(family=AF_INET, oif=index)), index
    )


def _failed(failed: list[str] | None, message: str, exc: BaseException) -> None:
    """Raise Layer3Error with ``message``, or, when the caller collects failures, note it and go on."""
    if failed is None:
        raise Layer3Error(message) from exc
    failed.append(message)


def add_addresses(
    ipr: Any, index: int, ifname: str, records: list[dict[str, Any]], failed: list[str] | None = None
) -> None:
    """Add the addresses the link lacks (by address and prefix length), in order.

    One the kernel refuses raises Layer3Error naming the interface and the address, or,
    with ``failed``, is noted there and the others are still added.
    """
    present = {(a.get_attr("IFA_ADDRESS"), a["prefixlen"]) for a in ipr.get_addr(index=index)}
    for record in records:
        interface = ipaddress.IPv4Interface(record["address"])
        if (str(interface.ip), interface.network.prefixlen) in present:
            continue
        extra: dict[str, Any] = {}
        if record["broadcast"]:
            extra["broadcast"] = record["broadcast"]
        if record["metric"]:
            extra["IFA_RT_PRIORITY"] = record["metric"]
        if record["noprefixroute"]:
            extra["IFA_FLAGS"] = IFA_F_NOPREFIXROUTE
        try:
            ipr.addr("add", index=index, address=str(interface.ip), prefixlen=interface.network.prefixlen, **extra)
        except Exception as exc:  # netlink errors carry their own type
            _failed(failed, f"{ifname}: adding address {address_arg(record)} failed: {why(exc)}", exc)


def _key(table: Any, destination: str, metric: Any) -> tuple[int, str, int]:
    return int(table or RT_TABLE_MAIN), destination, int(metric or 0)


def add_routes(
    ipr: Any, index: int, ifname: str, records: list[dict[str, Any]], in_pod: bool, failed: list[str] | None = None
) -> list[str]:
    """Add the routes through the link that are not there yet; returns the ones left out, said in words.

    One the kernel refuses raises Layer3Error naming the interface and the route, or, with
    ``failed``, is noted there and the others are still added.

    A route of the same table, destination and metric through this link is there already
    (a second container of the pod, a repeated Unprepare). One through another interface is
    never replaced: in the pod that is an error (the pod's own network has that route), on
    the host it is left as it is and reported (someone set it since the NIC left).
    """
    existing: dict[tuple[int, str, int], Any] = {}
    for msg in ipr.get_routes(family=AF_INET):
        destination = f"{msg.get_attr('RTA_DST') or '0.0.0.0'}/{msg.get('dst_len', 0)}"
        key = _key(msg.get_attr("RTA_TABLE") or msg.get("table"), destination, msg.get_attr("RTA_PRIORITY"))
        existing.setdefault(key, msg.get_attr("RTA_OIF"))
    left_out = []
    for record in records:
        key = _key(record["table"], record["destination"], record["metric"])
        if key in existing:
            if existing[key] == index:
                continue
            said = f"{ifname}: route {route_arg(record)} (table {record['table']}) is held by another interface"
            if in_pod:
                raise Layer3Error(f"{said} in the pod; give the pod's routes in the claim's NicConfig")
            left_out.append(said)
            continue
        spec: dict[str, Any] = {
            "dst": record["destination"],
            "oif": index,
            "table": record["table"],
            "scope": record["scope"],
            "proto": record["protocol"],
        }
        if record["gateway"]:
            spec["gateway"] = record["gateway"]
        if record["metric"]:
            spec["priority"] = record["metric"]
        if record["source"]:
            spec["prefsrc"] = record["source"]
        if record["onlink"]:
            spec["flags"] = RTNH_F_ONLINK
        try:
            ipr.route("add", **spec)
        except Exception as exc:  # netlink errors carry their own type
            if getattr(exc, "code", None) == errno.EEXIST:
                continue  # added since the dump (by the kernel or a network manager): there
            _failed(failed, f"{ifname}: adding route {route_arg(record)} failed: {why(exc)}", exc)
            continue
        existing[key] = index
    return left_out


def put_back(ipr: Any, index: int, ifname: str, records: dict[str, Any]) -> tuple[list[str], list[str]]:
    """Add a link's recorded addresses, then its routes (the link must be up), every one that can be.

    Returns (what the kernel refused, the routes left out because another interface holds
    them), each in words naming the interface and the item.
    """
    failed: list[str] = []
    add_addresses(ipr, index, ifname, records.get("addresses") or [], failed)
    left_out = add_routes(ipr, index, ifname, records.get("routes") or [], in_pod=False, failed=failed)
    return failed, left_out
