# SPDX-License-Identifier: Apache-2.0
"""tests/support/fakes/netlink.py answers as the kernel does: the same steps on a real veth in two namespaces and on the fake.

Each step's outcome (the link's addresses and routes as
:func:`aligned_dra_driver.network.addresses.read` sees them, or the errno of a
refusal) must be the same on both.
"""

from __future__ import annotations

import os
import subprocess

import pytest
from aligned_dra_driver.network import addresses as layer3

from ansible_collections.aligned.dra.tests.support.fakes.netlink import FakeIPRoute, FakeKernel

pytestmark = pytest.mark.netns


def attempt(call, *args, **kwargs):
    try:
        call(*args, **kwargs)
    except Exception as exc:  # pyroute2's NetlinkError or the fake's: both carry the errno as .code
        return exc.code
    return 0


def scenario(ipr, other_file, open_other):
    """The steps; ``ipr`` is netlink in the first namespace, ``open_other()`` in the second."""
    seen = []
    index = ipr.link_lookup(ifname="nic0")[0]

    def look(where=ipr, name="nic0"):
        found = where.link_lookup(ifname=name)
        (link,) = where.get_links(found[0])
        made = [m for m in where.get_routes(family=2, oif=found[0]) if m.get_attr("RTA_TABLE") == 254]
        made = [layer3.route_record(m, found[0]) for m in made if m["proto"] == 2]  # the kernel's prefix routes
        seen.append({"up": bool(link["flags"] & 1), **layer3.read(where, found[0]), "kernel": made})

    ipr.link("set", index=index, state="up")
    seen.append(
        attempt(ipr.addr, "add", index=index, address="192.168.128.5", prefixlen=21, broadcast="192.168.135.255")
    )
    seen.append(attempt(ipr.addr, "add", index=index, address="192.168.128.6", prefixlen=21))
    seen.append(attempt(ipr.addr, "add", index=index, address="192.168.128.6", prefixlen=21))  # twice: EEXIST
    seen.append(attempt(ipr.addr, "add", index=index, address="10.9.0.5", prefixlen=24, IFA_RT_PRIORITY=100))
    seen.append(attempt(ipr.addr, "add", index=index, address="10.10.0.5", prefixlen=24, IFA_FLAGS=0x200))
    look()
    for spec in (
        {"dst": "192.168.184.0/21", "gateway": "192.168.128.1"},
        {"dst": "192.168.184.0/21", "gateway": "192.168.128.2"},  # the same table, destination and metric
        {"dst": "192.168.184.0/21", "gateway": "192.168.128.2", "priority": 5},
        {"dst": "10.10.0.0/24", "priority": 100, "scope": 253, "proto": 2, "prefsrc": "10.10.0.5"},  # NM's route
        {"dst": "172.30.0.0/16", "gateway": "172.31.0.1"},  # a gateway on no network of the link
        {"dst": "172.30.0.0/16", "gateway": "172.31.0.1", "flags": 4},  # onlink
        {"dst": "192.168.1.1/32", "scope": 253, "proto": 3},
        {"dst": "172.29.0.0/16", "gateway": "192.168.1.1"},  # reachable through the link route above
        {"dst": "172.28.0.0/16", "gateway": "192.168.128.1", "prefsrc": "10.99.0.1"},  # not an address here
        {"dst": "0.0.0.0/0", "gateway": "192.168.128.1", "table": 100},
    ):
        seen.append(attempt(ipr.route, "add", oif=index, **spec))
    seen.append(attempt(ipr.route, "replace", dst="192.168.184.0/21", oif=index, gateway="192.168.128.3"))
    look()
    ipr.link("set", index=index, state="down")  # flushes the routes, keeps the addresses
    look()
    seen.append(attempt(ipr.route, "add", dst="172.27.0.0/16", oif=index, gateway="192.168.128.1"))
    seen.append(attempt(ipr.route, "add", dst="172.26.0.0/16", oif=index, scope=253))
    seen.append(attempt(ipr.route, "add", dst="172.25.0.0/16", oif=index, gateway="172.31.0.1", flags=4))
    ipr.link("set", index=index, state="up")  # the prefix routes come back, nothing else
    look()
    fd = os.open(other_file, os.O_RDONLY)
    try:
        ipr.link("set", index=index, net_ns_fd=fd)
    finally:
        os.close(fd)
    with open_other() as other:
        look(other)  # down, no address, no route
    return seen


def test_the_fake_answers_as_the_kernel(tmp_path):
    from pyroute2 import IPRoute

    names = [f"aldfake{os.getpid()}a", f"aldfake{os.getpid()}b"]
    for name in names:
        subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        with IPRoute(netns=f"/run/netns/{names[0]}") as ipr:
            ipr.link("add", ifname="nic0", kind="veth", peer="peer0")
            ipr.link("set", index=ipr.link_lookup(ifname="peer0")[0], state="up")
            real = scenario(ipr, f"/run/netns/{names[1]}", lambda: IPRoute(netns=f"/run/netns/{names[1]}"))
    finally:
        for name in names:
            subprocess.run(["ip", "netns", "delete", name], check=False)
    files = {}
    for key in ("first", "second"):
        files[key] = str(tmp_path / key)
        (tmp_path / key).write_text("")
    kernel = FakeKernel({"host": files["first"], "second": files["second"]})
    kernel.add_link("host", 3, "nic0", up=False)
    fake = scenario(FakeIPRoute(kernel), files["second"], lambda: FakeIPRoute(kernel, files["second"]))
    assert fake == real
    assert real[2] == 17 and real[-1] == {"up": False, "addresses": [], "routes": [], "kernel": []}  # it ran
    assert len(real[-2]["kernel"]) == 2 and len(real[-2]["addresses"]) == 4  # up again: 2 prefix routes back
