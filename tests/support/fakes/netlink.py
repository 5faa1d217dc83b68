# SPDX-License-Identifier: Apache-2.0
"""TEST FAKE: network namespaces with links, addresses and routes, answering pyroute2's ``IPRoute`` calls.

Lives in ``tests/`` only, never shipped. It plays the kernel only where the netdev
hook and :mod:`aligned_dra_driver.network.addresses` depend on it, as strictly as
the kernel (``tests/unit/support/fakes/test_netlink.py`` runs the same steps on real veths):

- a namespace is named by a file (``<procfs>/<pid>/ns/net``); an fd or path is
  mapped to it by inode, as ``net_ns_fd`` works;
- names: invalid (EINVAL) or taken (EEXIST), a running link cannot be renamed
  (EBUSY); an MTU outside the link's min/max (EINVAL);
- addresses: a duplicate (address and prefix length) is EEXIST; an IPv4 address
  in the network of a primary one is secondary; a primary IPv4 address without
  ``noprefixroute`` on an up link gets the kernel's prefix route (protocol
  kernel, link scope, the address as source, the address's metric);
- routes: a gateway of the other family is EINVAL, one no route without a
  gateway through the link covers (its prefix routes among them) ENETUNREACH
  unless ``onlink``; then a link that is down is ENETDOWN; a preferred source that is no address of the
  namespace EINVAL; ``add`` of a table, destination and metric that exist is
  EEXIST, ``replace`` replaces it;
- down flushes the link's IPv4 routes, up brings back its prefix routes; a move
  to another namespace flushes addresses and routes and leaves the link down;
- routes are listed by table and destination (the order they came in is lost),
  addresses in the order they came.

``fail_at`` makes the n-th changing call fail with EBUSY, standing in for the
refusals a real NIC driver may add.
"""

from __future__ import annotations

import ipaddress
import os
from typing import Any

IFA_F_SECONDARY = 0x01
IFA_F_PERMANENT = 0x80
IFA_F_NOPREFIXROUTE = 0x200


class FakeNetlinkError(Exception):
    """Raised like pyroute2's NetlinkError: (errno, message)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(code, message)
        self.code = code


class Msg(dict):
    """A netlink message: header fields as the dict, attributes by ``get_attr``."""

    def __init__(self, attrs: dict, **fields: Any) -> None:
        super().__init__(**fields)
        self.attrs = attrs

    def get_attr(self, name: str) -> Any:
        return self.attrs.get(name)


def _kernel_name_ok(name: Any) -> bool:
    """The kernel's dev_valid_name: 1..15 bytes, not . or .., no / : or white space."""
    if not isinstance(name, str) or name in (".", ".."):
        return False
    raw = name.encode("utf-8", "surrogatepass")
    return 0 < len(raw) < 16 and not any(c in name for c in "/:") and not any(c.isspace() for c in name)


class FakeKernel:
    """The namespaces' state: ``state[key] = {"links": {index: link}, "routes": [route]}``."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files = files  # namespace key -> file
        self.state: dict[str, dict] = {key: {"links": {}, "routes": []} for key in files}
        self.fail_at: int | None = None
        self.changes = 0

    def add_link(self, ns: str, index: int, name: str, mtu: int = 1500, max_mtu: int = 9000, up: bool = True):
        self.state[ns]["links"][index] = {"name": name, "mtu": mtu, "min": 68, "max": max_mtu, "up": up, "addrs": []}

    def key_of_inode(self, inode: int) -> str:
        for key, path in self.files.items():
            if os.stat(path).st_ino == inode:
                return key
        raise FakeNetlinkError(22, "not a network namespace")

    def change(self) -> None:
        self.changes += 1
        if self.fail_at is not None and self.changes == self.fail_at:
            raise FakeNetlinkError(16, "Device or resource busy")


def prefix_route(index: int, address: dict) -> dict | None:
    """The route the kernel adds for a primary IPv4 address, or None."""
    interface = ipaddress.ip_interface(f"{address['address']}/{address['prefixlen']}")
    if interface.version != 4 or address["flags"] & (IFA_F_SECONDARY | IFA_F_NOPREFIXROUTE):
        return None
    if interface.network.prefixlen == 32:
        return None
    return route_entry(index, str(interface.network), None, address["metric"], address["address"], 253, 2, 254, 0)


def route_entry(index, dst, gateway, metric, prefsrc, scope, proto, table, flags) -> dict:
    return {
        "oif": index,
        "dst": dst,
        "gateway": gateway,
        "metric": metric,
        "prefsrc": prefsrc,
        "scope": scope,
        "proto": proto,
        "table": table,
        "flags": flags,
    }


class FakeIPRoute:
    """pyroute2.IPRoute's calls the hook and the driver make, on a FakeKernel."""

    def __init__(self, kernel: FakeKernel, netns: str | None = None) -> None:
        self.kernel = kernel
        self.ns = "host" if netns is None else kernel.key_of_inode(os.stat(netns).st_ino)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    @property
    def links(self) -> dict:
        return self.kernel.state[self.ns]["links"]

    @property
    def routes(self) -> list:
        return self.kernel.state[self.ns]["routes"]

    def _set_routes(self, routes: list) -> None:
        """The kernel lists routes by table and destination, whatever order they came in."""

        def key(route: dict) -> tuple:
            network = ipaddress.ip_network(route["dst"])
            return route["table"], network.version, int(network.network_address), network.prefixlen, route["metric"]

        routes.sort(key=key)
        self.kernel.state[self.ns]["routes"] = routes

    def _link(self, index: int) -> dict:
        if index not in self.links:
            raise FakeNetlinkError(19, "No such device")
        return self.links[index]

    def link_lookup(self, ifname):
        return [i for i, link in self.links.items() if link["name"] == ifname]

    def get_links(self, index):
        link = self._link(index)
        attrs = {"IFLA_IFNAME": link["name"], "IFLA_MTU": link["mtu"], "IFLA_MIN_MTU": link["min"]}
        attrs["IFLA_MAX_MTU"] = link["max"]
        if link.get("parent"):
            attrs["IFLA_PARENT_DEV_BUS_NAME"], attrs["IFLA_PARENT_DEV_NAME"] = link["parent"]
        return [Msg(attrs, index=index, flags=1 if link["up"] else 0)]

    def get_addr(self, index, family=None):
        found = []
        for a in self._link(index)["addrs"]:
            version = ipaddress.ip_address(a["address"]).version
            if family is not None and family != {4: 2, 6: 10}[version]:
                continue
            attrs = {"IFA_ADDRESS": a["address"], "IFA_LOCAL": a["address"], "IFA_FLAGS": a["flags"]}
            if a["broadcast"]:
                attrs["IFA_BROADCAST"] = a["broadcast"]
            if a["metric"]:
                attrs["IFA_RT_PRIORITY"] = a["metric"]
            found.append(Msg(attrs, family={4: 2, 6: 10}[version], prefixlen=a["prefixlen"], flags=a["flags"] & 0xFF))
        return found

    def get_routes(self, family=None, oif=None):
        found = []
        for r in self.routes:
            version = ipaddress.ip_network(r["dst"]).version
            if (family is not None and family != {4: 2, 6: 10}[version]) or (oif is not None and r["oif"] != oif):
                continue
            network = ipaddress.ip_network(r["dst"])
            attrs = {"RTA_OIF": r["oif"], "RTA_TABLE": r["table"]}
            if network.prefixlen:
                attrs["RTA_DST"] = str(network.network_address)
            for key, attr in (("gateway", "RTA_GATEWAY"), ("metric", "RTA_PRIORITY"), ("prefsrc", "RTA_PREFSRC")):
                if r[key]:
                    attrs[attr] = r[key]
            fields = {"family": {4: 2, 6: 10}[version], "dst_len": network.prefixlen, "tos": 0, "type": 1}
            table = r["table"] if r["table"] < 256 else 252  # RT_TABLE_COMPAT: the attribute has the real one
            fields.update(scope=r["scope"], proto=r["proto"], table=table, flags=r["flags"])
            found.append(Msg(attrs, **fields))
        return found

    def _flush_routes(self, index: int) -> None:
        self._set_routes([r for r in self.routes if r["oif"] != index])

    def link(self, command, index, **kw):
        assert command == "set"
        link = self._link(index)
        self.kernel.change()
        if "ifname" in kw:
            name = kw["ifname"]
            if not _kernel_name_ok(name):
                raise FakeNetlinkError(22, "Invalid argument")
            if self.link_lookup(name) not in ([], [index]):
                raise FakeNetlinkError(17, "File exists")
            if link["up"]:
                raise FakeNetlinkError(16, "Device or resource busy")  # a running device cannot be renamed
            link["name"] = name
        if "mtu" in kw:
            if not isinstance(kw["mtu"], int) or not link["min"] <= kw["mtu"] <= link["max"]:
                raise FakeNetlinkError(22, "Invalid argument")
            link["mtu"] = kw["mtu"]
        if "state" in kw:
            up = kw["state"] == "up"
            if link["up"] and not up:
                self._flush_routes(index)
            if up and not link["up"]:
                made = [prefix_route(index, address) for address in link["addrs"]]
                self._set_routes(self.routes + [route for route in made if route])
            link["up"] = up
        if "net_ns_fd" in kw:
            target = self.kernel.key_of_inode(os.fstat(kw["net_ns_fd"]).st_ino)
            other = self.kernel.state[target]["links"]
            if any(item["name"] == link["name"] for item in other.values()):
                raise FakeNetlinkError(17, "File exists")
            del self.links[index]
            self._flush_routes(index)
            new_index = index if index not in other else max(other) + 1
            other[new_index] = {**link, "up": False, "addrs": []}

    def addr(self, command, index, address, prefixlen, broadcast=None, IFA_RT_PRIORITY=0, IFA_FLAGS=0):
        assert command == "add"
        link = self._link(index)
        self.kernel.change()
        if any((a["address"], a["prefixlen"]) == (address, prefixlen) for a in link["addrs"]):
            raise FakeNetlinkError(17, "File exists")
        interface = ipaddress.ip_interface(f"{address}/{prefixlen}")
        flags = IFA_F_PERMANENT | (IFA_FLAGS & IFA_F_NOPREFIXROUTE)
        for other in link["addrs"]:
            mine = ipaddress.ip_interface(f"{other['address']}/{other['prefixlen']}")
            if interface.version == 4 and mine.network == interface.network and not other["flags"] & IFA_F_SECONDARY:
                flags |= IFA_F_SECONDARY
        entry = {"address": address, "prefixlen": prefixlen, "broadcast": broadcast, "metric": IFA_RT_PRIORITY}
        entry["flags"] = flags
        link["addrs"].append(entry)
        route = prefix_route(index, entry) if link["up"] else None
        if route:
            self._set_routes([*self.routes, route])

    def _reachable(self, link_index: int, gateway: Any) -> bool:
        """A route without a gateway through the link covers it (the prefix routes of its addresses among them)."""
        connected = [
            ipaddress.ip_network(r["dst"]) for r in self.routes if r["oif"] == link_index and r["gateway"] is None
        ]
        if gateway.version == 6:  # IPv6 prefix routes are not kept here: an address's network reaches
            link = self.links[link_index]
            connected += [ipaddress.ip_interface(f"{a['address']}/{a['prefixlen']}").network for a in link["addrs"]]
        return any(gateway in net for net in connected if net.version == gateway.version)

    def route(self, command, dst, oif, gateway=None, priority=0, prefsrc=None, scope=None, proto=4, table=254, flags=0):
        assert command in ("add", "replace")
        link = self._link(oif)
        self.kernel.change()
        network = ipaddress.ip_network(dst)
        if gateway is not None:
            gw = ipaddress.ip_address(gateway)
            if gw.version != network.version:
                raise FakeNetlinkError(22, "Invalid argument")
            if not flags & 4 and not self._reachable(oif, gw):  # a down link has no route: unreachable
                raise FakeNetlinkError(101, "Network is unreachable")
        if not link["up"]:
            raise FakeNetlinkError(100, "Network is down")
        if prefsrc is not None:
            ours = {a["address"] for item in self.links.values() for a in item["addrs"]}
            if prefsrc not in ours:
                raise FakeNetlinkError(22, "Invalid argument")
        if scope is None:
            scope = 0
        key = (table, str(network), priority)
        same = [r for r in self.routes if (r["table"], r["dst"], r["metric"]) == key]
        if same and command == "add":
            raise FakeNetlinkError(17, "File exists")
        entry = route_entry(oif, str(network), gateway, priority, prefsrc, scope, proto, table, flags)
        self._set_routes([r for r in self.routes if r not in same] + [entry])
