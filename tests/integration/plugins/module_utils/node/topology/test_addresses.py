# SPDX-License-Identifier: Apache-2.0
"""IPv4 addresses read with the kernel's ioctls, on real interfaces (the ``subnet`` rail rule reads them)."""

from __future__ import annotations

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.node.topology.addresses import ipv4_addresses
from ansible_collections.aligned.dra.tests.support.harnesses import driver as h

pytestmark = [pytest.mark.netns]

NIC = h.ifname("rail")
PEER = h.ifname("railp")


@pytest.fixture
def veth():
    from pyroute2 import IPRoute

    h.delete_links(NIC, PEER)
    with IPRoute() as ipr:
        ipr.link("add", ifname=NIC, kind="veth", peer=PEER)
        index = ipr.link_lookup(ifname=NIC)[0]
        yield ipr, index
    h.delete_links(NIC, PEER)


def test_an_interface_gives_its_address_with_the_prefix_of_its_subnet(veth):
    ipr, index = veth
    ipr.addr("add", index=index, address="192.168.137.9", prefixlen=21)
    assert ipv4_addresses([NIC]) == {NIC: ["192.168.137.9/21"]}


def test_an_interface_without_ipv4_and_one_that_is_gone_give_nothing(veth):
    assert ipv4_addresses([NIC, "nosuch0"]) == {NIC: [], "nosuch0": []}


def test_loopback():
    assert ipv4_addresses(["lo"]) == {"lo": ["127.0.0.1/8"]}
