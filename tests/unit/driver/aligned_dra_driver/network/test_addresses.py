# SPDX-License-Identifier: Apache-2.0
"""What a NIC's addresses and routes become: read, filtered, carried into the pod, written as hook arguments.

The netlink side runs on tests/support/fakes/netlink.py here (held to the kernel in
tests/unit/support/fakes/test_netlink.py) and on real veths in
tests/integration/driver/aligned_dra_driver/network/test_pod_nic_rail.py.
"""

from __future__ import annotations

import ipaddress

import pytest
from aligned_dra_driver.claims.container_edits import PrepareError, hook_args
from aligned_dra_driver.network import addresses as layer3
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.aligned.dra.tests.support.fakes.netlink import FakeIPRoute, FakeKernel, Msg
from ansible_collections.aligned.dra.tests.support.fuzzing import profiles as fuzz_profiles

NIC = 7


def address(text, broadcast=None, metric=0, noprefixroute=False):
    return {"address": text, "broadcast": broadcast, "metric": metric, "noprefixroute": noprefixroute}


def route(destination, gateway=None, metric=0, source=None, scope=0, protocol=4, table=254, onlink=False):
    return {
        "destination": destination,
        "gateway": gateway,
        "metric": metric,
        "source": source,
        "scope": scope,
        "protocol": protocol,
        "table": table,
        "onlink": onlink,
    }


def addr_msg(ip, prefixlen, flags=0x80, family=2, **attrs):
    return Msg({"IFA_ADDRESS": ip, "IFA_LOCAL": ip, "IFA_FLAGS": flags, **attrs}, family=family, prefixlen=prefixlen)


def route_msg(dst, dst_len, oif=NIC, table=254, proto=4, scope=0, type=1, tos=0, flags=0, family=2, **attrs):
    fields = {"family": family, "dst_len": dst_len, "table": table, "proto": proto, "scope": scope}
    fields.update(type=type, tos=tos, flags=flags)
    return Msg({"RTA_DST": dst, "RTA_OIF": oif, "RTA_TABLE": table, **attrs}, **fields)


# -- reading ------------------------------------------------------------------------------------


def test_what_is_read_and_what_the_kernel_makes_itself():
    addresses = [
        addr_msg("192.168.128.6", 21, flags=0x81),  # secondary, listed first: it goes after the primaries
        addr_msg("192.168.128.5", 21, IFA_BROADCAST="192.168.135.255"),
        addr_msg("10.9.0.5", 24, flags=0x280, IFA_RT_PRIORITY=100),  # noprefixroute (NetworkManager)
        addr_msg("fd00::5", 64, family=10),
    ]
    routes = [
        route_msg("192.168.184.0", 21, RTA_GATEWAY="192.168.128.1"),
        route_msg("192.168.128.0", 21, proto=2, scope=253, RTA_PREFSRC="192.168.128.5"),  # the kernel's
        route_msg("10.9.0.0", 24, proto=2, scope=253, RTA_PREFSRC="10.9.0.5", RTA_PRIORITY=100),  # NM's: kept
        route_msg("192.168.128.5", 32, table=255, proto=2, scope=254, type=2),  # local table
        route_msg("192.168.1.1", 32, scope=253, proto=3),
        route_msg("10.1.0.0", 16, RTA_MULTIPATH=[{"oif": NIC}], oif=None),  # several interfaces share it
        route_msg("10.2.0.0", 16, RTA_NH_ID=5),
        route_msg("10.3.0.0", 16, tos=8),
        route_msg("10.4.0.0", 16, oif=2),  # another interface's
        route_msg("10.5.0.0", 16, type=6),  # prohibit
        route_msg(None, 0, table=1234, RTA_GATEWAY="192.168.128.1"),  # a policy table's default route
    ]
    read = layer3.layer3(addresses, routes, NIC)
    assert read["addresses"] == [
        address("192.168.128.5/21", "192.168.135.255"),
        address("10.9.0.5/24", metric=100, noprefixroute=True),
        address("192.168.128.6/21"),
    ]
    assert read["routes"] == [  # routes without a gateway first
        route("10.9.0.0/24", metric=100, source="10.9.0.5", scope=253, protocol=2),
        route("192.168.1.1/32", scope=253, protocol=3),
        route("192.168.184.0/21", "192.168.128.1"),
        route("0.0.0.0/0", "192.168.128.1", table=1234),
    ]
    assert all(layer3.address_problem(a) is None for a in read["addresses"])
    assert all(layer3.route_problem(r) is None for r in read["routes"])


@pytest.mark.parametrize(
    ("prefix_route", "made"),
    [
        (route("192.168.128.0/21", source="192.168.128.5", scope=253, protocol=2), True),
        (route("192.168.128.0/21", source="192.168.128.5", scope=253, protocol=2, metric=5), False),
        (route("192.168.128.0/21", source="192.168.128.6", scope=253, protocol=2), False),
        (route("192.168.128.0/21", source="192.168.128.5", scope=253, protocol=4), False),
        (route("192.168.128.0/21", source="192.168.128.5", scope=253, protocol=2, table=100), False),
        (route("192.168.0.0/16", source="192.168.128.5", scope=253, protocol=2), False),
        (route("10.0.0.7/32", protocol=2, table=255, scope=254), True),
    ],
)
def test_kernel_made(prefix_route, made):
    assert layer3.kernel_made(prefix_route, [address("192.168.128.5/21")]) is made


def test_an_address_with_noprefixroute_has_no_route_of_the_kernels():
    prefix = route("192.168.128.0/21", source="192.168.128.5", scope=253, protocol=2)
    assert not layer3.kernel_made(prefix, [address("192.168.128.5/21", noprefixroute=True)])


# -- what the pod gets ------------------------------------------------------------------------------

HOST = {
    "up": True,
    "addresses": [address("192.168.128.5/21", "192.168.135.255"), address("192.168.128.6/21")],
    "routes": [
        route("192.168.1.1/32", scope=253),
        route("192.168.184.0/21", "192.168.128.1"),
        route("10.8.0.0/16", "192.168.128.1", source="192.168.128.6"),
        route("10.9.0.0/16", "192.168.128.1", source="172.16.0.1"),  # another interface's address
        route("0.0.0.0/0", "192.168.128.1", metric=900),  # the pod's own network has the default
        route("0.0.0.0/0", "192.168.128.1", table=1234),
        route("10.7.0.0/16", "192.168.128.1", table=1234),
    ],
}


@pytest.mark.parametrize(
    ("cfg", "addresses", "routes"),
    [
        ({}, HOST["addresses"], [HOST["routes"][0], HOST["routes"][1], HOST["routes"][2]]),
        ({"mtu": 9000, "interfaceName": "net1"}, HOST["addresses"], HOST["routes"][:3]),
        ({"addresses": ["10.66.0.2/24"]}, [], []),  # the config's addresses: the host's routes go with the host's
        ({"addresses": []}, [], []),  # none at all
        ({"routes": [{"destination": "10.67.0.0/16"}]}, HOST["addresses"], []),
        ({"routes": []}, HOST["addresses"], []),
    ],
)
def test_the_claims_config_wins(cfg, addresses, routes):
    assert layer3.carried(HOST, cfg) == {"addresses": addresses, "routes": routes}


def test_nothing_is_carried_from_a_link_netlink_does_not_know():
    assert layer3.carried(None, {}) == {"addresses": [], "routes": []}


def test_the_hooks_arguments_and_the_pods_addresses_for_the_status():
    args, ips = hook_args("nic0", {}, HOST)
    assert args == [
        "--host-address",
        "192.168.128.5/21,brd=192.168.135.255",
        "--host-address",
        "192.168.128.6/21",
        "--host-route",
        "192.168.1.1/32,scope=253,proto=4",
        "--host-route",
        "192.168.184.0/21,192.168.128.1,scope=0,proto=4",
        "--host-route",
        "10.8.0.0/16,192.168.128.1,src=192.168.128.6,scope=0,proto=4",
    ]
    assert ips == ["192.168.128.5/21", "192.168.128.6/21"]
    cfg = {"addresses": ["10.66.0.2/24"], "routes": [{"destination": "10.67.0.0/16", "gateway": "10.66.0.1"}]}
    args, ips = hook_args("nic0", cfg, HOST)
    assert args == ["--address", "10.66.0.2/24", "--route", "10.67.0.0/16,10.66.0.1"] and ips == ["10.66.0.2/24"]


def test_more_than_a_pod_takes_is_refused_naming_the_interface():
    many = {"up": True, "addresses": [address(f"10.0.{i}.1/24") for i in range(17)], "routes": []}
    with pytest.raises(PrepareError, match="nic0 has 17 IPv4 addresses to take into the pod, at most 16 go with"):
        hook_args("nic0", {}, many)
    assert hook_args("nic0", {"addresses": ["10.66.0.2/24"]}, many)[1] == ["10.66.0.2/24"]  # the config's win


# -- the hook's arguments ----------------------------------------------------------------------------

ipv4 = st.integers(0, 2**32 - 1).map(lambda n: str(ipaddress.IPv4Address(n)))
addresses = st.builds(
    lambda ip, prefix, brd, metric, npr: address(str(ipaddress.IPv4Interface(f"{ip}/{prefix}")), brd, metric, npr),
    ipv4,
    st.integers(0, 32),
    st.none() | ipv4,
    st.integers(0, 2**32 - 1),
    st.booleans(),
)
routes = st.builds(
    lambda ip, prefix, gw, metric, src, scope, proto, onlink: route(
        str(ipaddress.IPv4Network(f"{ip}/{prefix}", strict=False)), gw, metric, src, scope, proto, 254, onlink
    ),
    ipv4,
    st.integers(0, 32),
    st.none() | ipv4,
    st.integers(0, 2**32 - 1),
    st.none() | ipv4,
    st.integers(0, 255),
    st.integers(0, 255),
    st.booleans(),
)


@settings(max_examples=fuzz_profiles.examples(500), deadline=None)
@given(record=addresses)
def test_an_address_comes_back_from_its_argument(record):
    assert layer3.parse_address_arg(layer3.address_arg(record)) == record


@settings(max_examples=fuzz_profiles.examples(500), deadline=None)
@given(record=routes)
def test_a_route_comes_back_from_its_argument(record):
    assert layer3.parse_route_arg(layer3.route_arg(record)) == record


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("10.0.0.1", "is not an IPv4 address with a prefix length"),
        ("fd00::1/64", "is not an IPv4 address with a prefix length"),
        ("10.0.0.1/24,brd=10.0.0.256", "'10.0.0.256' is not an IPv4 address"),
        ("10.0.0.1/24,metric=1,metric=2", "metric is given twice"),
        ("10.0.0.1/24,metric=0x10", "metric='0x10' is not an integer 0..4294967295"),
        ("10.0.0.1/24,metric=\u0661", "is not an integer"),
        ("10.0.0.1/24,noprefixroute=1", "is not one of brd=, metric=, noprefixroute"),
        ("10.0.0.1/24,", "'' is not one of"),
    ],
)
def test_a_bad_address_argument_says_what_is_wrong(text, needle):
    with pytest.raises(ValueError, match=needle):
        layer3.parse_address_arg(text)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("10.0.0.0/8,fd00::1", "'fd00::1' is not an IPv4 address"),
        ("10.0.0.0/33", "is not an IPv4 network"),
        ("nowhere", "is not an IPv4 network"),
        ("10.0.0.0/8,scope=256", "scope='256' is not an integer 0..255"),
        ("10.0.0.0/8,proto=1,proto=1", "proto is given twice"),
        ("10.0.0.0/8,table=100", "is not one of metric=, src=, scope=, proto=, onlink"),
        ("10.0.0.0/8,10.0.0.1,10.0.0.2", "'10.0.0.2' is not one of"),
        ("10.0.0.0/8,onlink=yes", "is not one of"),
    ],
)
def test_a_bad_route_argument_says_what_is_wrong(text, needle):
    with pytest.raises(ValueError, match=needle):
        layer3.parse_route_arg(text)


# -- adding them ----------------------------------------------------------------------------------


@pytest.fixture
def kernel(tmp_path):
    (tmp_path / "host").write_text("")
    kernel = FakeKernel({"host": str(tmp_path / "host")})
    kernel.add_link("host", 2, "eth0")
    kernel.add_link("host", NIC, "nic0")
    host = FakeIPRoute(kernel)
    host.addr("add", index=2, address="10.244.0.7", prefixlen=24)
    host.route("add", dst="10.8.0.0/16", oif=2, gateway="10.244.0.1")  # eth0 holds it
    return kernel


def test_a_route_another_interface_holds_is_left_on_the_host_and_refused_in_a_pod(kernel):
    ipr = FakeIPRoute(kernel)
    layer3.add_addresses(ipr, NIC, "nic0", HOST["addresses"])
    failed, left_out = layer3.put_back(ipr, NIC, "nic0", {"addresses": HOST["addresses"], "routes": HOST["routes"][:3]})
    assert failed == []
    assert left_out == [
        "nic0: route 10.8.0.0/16,192.168.128.1,src=192.168.128.6,scope=0,proto=4 (table 254) is held by another "
        "interface"
    ]
    nic_routes = [r["dst"] for r in kernel.state["host"]["routes"] if r["oif"] == NIC and r["proto"] != 2]
    assert sorted(nic_routes) == ["192.168.1.1/32", "192.168.184.0/21"]
    with pytest.raises(layer3.Layer3Error, match="held by another interface in the pod; give the pod's routes in"):
        layer3.add_routes(ipr, NIC, "nic0", HOST["routes"][:3], in_pod=True)


def test_every_item_that_can_be_put_back_is_and_each_refusal_is_named(kernel):
    ipr = FakeIPRoute(kernel)
    records = {
        "addresses": [address("192.168.128.5/21")],
        "routes": [route("10.50.0.0/16", "10.99.0.1"), route("192.168.184.0/21", "192.168.128.1")],
    }
    failed, left_out = layer3.put_back(ipr, NIC, "nic0", records)
    assert failed == [
        "nic0: adding route 10.50.0.0/16,10.99.0.1,scope=0,proto=4 failed: Network is unreachable (errno 101)"
    ]
    assert left_out == []
    assert "192.168.184.0/21" in [r["dst"] for r in kernel.state["host"]["routes"]]
    assert layer3.put_back(ipr, NIC, "nic0", {"addresses": records["addresses"], "routes": records["routes"][1:]}) == (
        [],
        [],
    )  # again: nothing added twice, nothing refused
    assert len(kernel.state["host"]["links"][NIC]["addrs"]) == 1
    with pytest.raises(layer3.Layer3Error, match="nic0: adding route 10.50.0.0/16,10.99.0.1"):
        layer3.add_routes(ipr, NIC, "nic0", records["routes"], in_pod=True)


def test_the_largest_nic_a_pod_takes_fits_a_cdi_spec():
    """16 addresses and 32 routes of the longest form stay within the CDI spec's bytes per device."""
    from aligned_dra_driver.claims import cdi

    widest = "255.255.255.255"
    host = {
        "up": True,
        "addresses": [address(f"{widest}/32", widest, 2**32 - 1, True) for _index in range(layer3.MAX_POD_ADDRESSES)],
        "routes": [
            route(f"{widest}/32", widest, 2**32 - 1, widest, 253, 255, 254, True)
            for _index in range(layer3.MAX_POD_ROUTES)
        ],
    }
    args, _ips = hook_args("nic0", {}, host)
    uid = "0b0e7d5c-1f2a-4c3d-9e8f-0123456789ab"
    hook = ["aligned-dra-netdev-hook", "--pci-address", "0000:19:00.0", "--sysfs-root", "/sys", "--name", "x" * 15]
    hook += ["--mtu", "65535", *args, "--rdma-device", "m" * 64]
    edits = {
        "env": ["ALIGNED_DRA_RDMA_0000_19_00_0=" + "m" * 64, "ALIGNED_DRA_NIC_0000_19_00_0=" + "x" * 15],
        "deviceNodes": [
            {"path": f"/dev/infiniband/{n}", "hostPath": f"/dev/infiniband/{n}"} for n in ("rdma_cm", "uverbs0")
        ],
        "hooks": [
            {"hookName": "createRuntime", "path": "/opt/aligned-dra/venv/bin/aligned-dra-netdev-hook", "args": hook}
        ],
    }
    spec = cdi.build_spec(
        [{"name": f"{uid}-nic-0000-19-00-0", "containerEdits": edits}], [f"ALIGNED_DRA_CLAIM_UID={uid}"]
    )
    assert cdi.spec_problem(spec) is None
