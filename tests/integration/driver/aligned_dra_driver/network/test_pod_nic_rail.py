# SPDX-License-Identifier: Apache-2.0
"""The pod's NIC on its rail, on real veths and network namespaces: what moves with it and what comes back.

A veth stands in for the rail NIC (the fixture node lists it under the NIC's PCI
address). On the host it has what a rail NIC has: an address of its rail's /21
and a secondary one, routes through the rail's gateway, a link route with a
metric, and a default route in a policy table. The real driver prepares the
claim, the hook runs from the CDI spec the driver wrote (as the container
runtime runs it), and what the kernel does when a pod's namespace goes (a
physical NIC goes back to the host, down, without addresses or routes) is done
by hand: a veth would be destroyed with the namespace.

Each test process takes its own networks in 100.64.0.0/10 and its own policy
table, by its pid: test processes share the machine's namespace.
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import subprocess

import pytest

from ansible_collections.aligned.dra.tests.support.fakes.apiserver import FakeApiServer
from ansible_collections.aligned.dra.tests.support.harnesses import driver as h
from ansible_collections.aligned.dra.tests.support.harnesses import netns

pytestmark = pytest.mark.netns

HOST = h.ifname("rl")
PEER = h.ifname("rlp")
POD_NAME = h.ifname("rlpod")  # the NIC's name in the pod when the claim names one (it comes back with it)
SLOT = os.getpid() % 1024
# the rail's /21 in 100.64.0.0/11, the next rail's in 100.96.0.0/11 (never another test process's rail)
RAIL = ipaddress.IPv4Network(f"{ipaddress.IPv4Address('100.64.0.0') + SLOT * 2048}/21")
NEXT_RAIL = ipaddress.IPv4Network(f"{ipaddress.IPv4Address('100.96.0.0') + SLOT * 2048}/21")
GATEWAY = str(RAIL.network_address + 1)
FIRST, SECOND = str(RAIL.network_address + 5), str(RAIL.network_address + 6)
INSIDE = ipaddress.IPv4Network(f"{RAIL.network_address + 1024}/22")  # a static route within the rail's subnet
HOST_ROUTE = f"{ipaddress.IPv4Address('100.127.0.0') + SLOT}/32"  # a link route with a metric, as some sites have
TABLE = 1000 + SLOT


def host_view(name):
    """``ip -4 addr`` and ``ip -4 route show table all`` of the link, as text: what "exactly" compares."""
    addresses = [line.split(":", 1)[1] for line in netns.ip("-4", "-o", "addr", "show", "dev", name).splitlines()]
    routes = netns.ip("-4", "route", "show", "table", "all", "dev", name).replace(" linkdown", "").splitlines()
    return {"addresses": addresses, "routes": sorted(routes)}


def records(name, pid=None):
    """The driver's records of the link's addresses and routes, on the host or in the pod (read by a process there)."""
    if pid:
        return netns.layer3_records(name, pid)
    from aligned_dra_driver.network import addresses as layer3
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        (index,) = ipr.link_lookup(ifname=name)
        return layer3.read(ipr, index)


def rail(ipr, index):
    """What a rail NIC has on the host."""
    ipr.link("set", index=index, state="up")
    ipr.addr("add", index=index, address=FIRST, prefixlen=21, broadcast=str(RAIL.broadcast_address))
    ipr.addr("add", index=index, address=SECOND, prefixlen=21)
    ipr.route("add", dst=str(NEXT_RAIL), gateway=GATEWAY, oif=index)
    ipr.route("add", dst=str(INSIDE), gateway=GATEWAY, oif=index, priority=50)
    ipr.route("add", dst=HOST_ROUTE, oif=index, scope=253, proto=3, priority=10)
    ipr.route("add", dst="0.0.0.0/0", gateway=GATEWAY, oif=index, table=TABLE)


@pytest.fixture
def rail_nic():
    from pyroute2 import IPRoute

    h.delete_links(HOST, PEER, POD_NAME)
    with IPRoute() as ipr:
        ipr.link("add", ifname=HOST, kind="veth", peer=PEER)
        ipr.link("set", index=ipr.link_lookup(ifname=PEER)[0], state="up")
        rail(ipr, ipr.link_lookup(ifname=HOST)[0])
    before = host_view(HOST)
    assert len(before["addresses"]) == 2 and len(before["routes"]) == 8, (
        before
    )  # 4 ours, 4 the kernel's (prefix, 2 local, broadcast)
    yield before
    h.delete_links(HOST, PEER, POD_NAME)


@pytest.fixture
def pod():
    """A process in its own network namespace, standing in for a pod sandbox, until teardown kills it."""
    proc = subprocess.Popen(["unshare", "--net", "sleep", "infinity"])
    own = os.readlink("/proc/self/ns/net")
    h.wait_until(lambda: os.readlink(f"/proc/{proc.pid}/ns/net") != own, timeout=5, what="the pod's namespace")
    yield proc.pid
    proc.kill()
    proc.wait()


@pytest.fixture
def cluster(rail_nic):
    root = h.short_tmp()
    node = h.NodeTree.build(root, nic_name=HOST)
    with FakeApiServer("1.35") as api:
        api.create(h.node_object())
        driver = h.DriverProcess(node, api).start()
        try:
            yield node, api, driver
        finally:
            driver.stop()
    shutil.rmtree(root, ignore_errors=True)


def prepare(api, driver, name, config=None):
    claim = api.create(h.claim_object(name, [{"request": "nic", "device": h.NIC}], config))
    ref = h.claim_ref(claim)
    answer = driver.prepare([ref]).claims[ref["uid"]]
    assert answer.error == ""
    return ref


def the_hook(node, uid):
    spec = json.loads((node.cdi / f"aligned.dev-claim_{uid}.json").read_text())
    (device,) = spec["devices"]
    (hook,) = device["containerEdits"]["hooks"]
    return hook


def run_hook(hook, pod):
    """The hook as the container runtime runs it: its path, its arguments after argv[0], the OCI state."""
    state = json.dumps({"ociVersion": "1.0.2", "id": "c", "pid": pod})
    done = subprocess.run([hook["path"], *hook["args"][1:]], input=state, capture_output=True, text=True, check=False)
    return done


def pod_ends(node, pid, name):
    """What the kernel does with a physical NIC when the pod's namespace goes: back to the host, down, flushed."""
    netns.ip("link", "set", "dev", name, "down", pid=pid)
    netns.ip("link", "set", "dev", name, "netns", str(os.getpid()), pid=pid)  # this process's namespace: the host's
    net = node.sys / "bus" / "pci" / "devices" / h.NIC_BDF / "net"
    for entry in list(net.iterdir()):  # the kernel lists it under the name it comes back with
        entry.rename(net / name)


def arguments(hook, option):
    args = hook["args"]
    return [args[i + 1] for i, arg in enumerate(args) if arg == option]


def test_the_nic_takes_its_addresses_and_routes_into_the_pod_and_gets_them_back_after_a_driver_restart(
    cluster, rail_nic, pod
):
    node, api, driver = cluster
    host_records = records(HOST)
    ref = prepare(api, driver, "rail")
    hook = the_hook(node, ref["uid"])
    assert arguments(hook, "--host-address") == [f"{FIRST}/21,brd={RAIL.broadcast_address}", f"{SECOND}/21"]
    assert sorted(arguments(hook, "--host-route")) == sorted(
        [
            f"{HOST_ROUTE},metric=10,scope=253,proto=3",
            f"{NEXT_RAIL},{GATEWAY},scope=0,proto=4",
            f"{INSIDE},{GATEWAY},metric=50,scope=0,proto=4",
        ]
    )  # the policy table's default route stays with the host
    assert arguments(hook, "--address") == [] and arguments(hook, "--route") == []
    netdev = json.loads((node.state / "checkpoint.json").read_text())["claims"][ref["uid"]]["devices"][0]["netdev"]
    assert netdev["original_up"] is True
    assert netdev["original_addresses"] == host_records["addresses"]
    assert netdev["original_routes"] == host_records["routes"] and len(host_records["routes"]) == 4
    status = h.wait_until(
        lambda: api.get("resourceclaims", "rail", "default")["status"].get("devices"), what="the claim's status"
    )
    assert status[0]["networkData"]["ips"] == [f"{FIRST}/21", f"{SECOND}/21"]

    done = run_hook(hook, pod)
    assert done.returncode == 0 and "moved" in done.stderr, done.stderr
    inside = records(HOST, pod)
    assert inside["addresses"] == host_records["addresses"]
    assert inside["routes"] == [r for r in host_records["routes"] if r["table"] == 254]
    assert f"{RAIL} proto kernel scope link src {FIRST}" in netns.ip("-4", "route", "show", "dev", HOST, pid=pod)
    assert "secondary" in netns.ip("-4", "-o", "addr", "show", "dev", HOST, pid=pod).splitlines()[1]
    assert netns.ip("-4", "route", "show", "table", "all", "dev", PEER).strip() == ""  # the host keeps nothing
    assert netns.ip("-4", "route", "show", "table", str(TABLE)).strip() == ""
    # the second container of the pod finds the NIC in place and adds nothing twice
    view = (netns.ip("-4", "-o", "addr", pid=pod), netns.ip("-4", "route", "show", "table", "all", pid=pod))
    again = run_hook(hook, pod)
    assert again.returncode == 0 and "in-place" in again.stderr, again.stderr
    assert (netns.ip("-4", "-o", "addr", pid=pod), netns.ip("-4", "route", "show", "table", "all", pid=pod)) == view

    driver.kill9()  # the checkpoint carries what the host had across a restart
    driver.start()
    pod_ends(node, pod, HOST)
    assert host_view(HOST) == {"addresses": [], "routes": []}
    assert driver.unprepare([ref]).claims[ref["uid"]].error == ""
    assert host_view(HOST) == rail_nic


def test_the_claims_config_wins_and_the_host_still_gets_its_own_back(cluster, rail_nic, pod):
    node, api, driver = cluster
    config = [
        h.nic_config(interfaceName=POD_NAME, addresses=["10.66.0.2/24"], routes=[{"destination": "10.67.0.0/16"}])
    ]
    ref = prepare(api, driver, "mine", config)
    hook = the_hook(node, ref["uid"])
    assert arguments(hook, "--address") == ["10.66.0.2/24"] and arguments(hook, "--route") == ["10.67.0.0/16"]
    assert arguments(hook, "--host-address") == [] and arguments(hook, "--host-route") == []
    done = run_hook(hook, pod)
    assert done.returncode == 0, done.stderr
    assert records(POD_NAME, pod)["addresses"] == [
        {"address": "10.66.0.2/24", "broadcast": None, "metric": 0, "noprefixroute": False}
    ]
    assert netns.ip("-4", "route", "show", "table", "main", pid=pod).split("\n")[0].startswith("10.66.0.0/24 ")
    assert f"10.67.0.0/16 dev {POD_NAME}" in netns.ip("-4", "route", "show", "table", "main", pid=pod)
    assert str(NEXT_RAIL) not in netns.ip("-4", "route", "show", "table", "all", pid=pod)
    pod_ends(node, pod, POD_NAME)  # back under its pod name: Unprepare renames it
    assert driver.unprepare([ref]).claims[ref["uid"]].error == ""
    assert host_view(HOST) == rail_nic


def test_routes_in_the_config_keep_the_hosts_addresses(cluster, rail_nic, pod):
    node, api, driver = cluster
    config = [h.nic_config(routes=[{"destination": "10.68.0.0/16", "gateway": GATEWAY}])]
    ref = prepare(api, driver, "routes", config)
    hook = the_hook(node, ref["uid"])
    assert len(arguments(hook, "--host-address")) == 2 and arguments(hook, "--host-route") == []
    done = run_hook(hook, pod)
    assert done.returncode == 0, done.stderr
    routes = netns.ip("-4", "route", "show", "table", "main", pid=pod)
    assert f"10.68.0.0/16 via {GATEWAY} dev {HOST}" in routes and str(NEXT_RAIL) not in routes
    pod_ends(node, pod, HOST)
    assert driver.unprepare([ref]).claims[ref["uid"]].error == ""
    assert host_view(HOST) == rail_nic


def test_a_nic_still_in_its_pod_at_unprepare_gets_its_settings_when_it_comes_back(cluster, rail_nic, pod):
    """The kernel moves a NIC back when the pod's namespace is destroyed, which may come after Unprepare."""
    node, api, driver = cluster
    ref = prepare(api, driver, "late")
    done = run_hook(the_hook(node, ref["uid"]), pod)
    assert done.returncode == 0, done.stderr
    net = node.sys / "bus" / "pci" / "devices" / h.NIC_BDF / "net"
    (net / HOST).rename(net.parent / "net-away")  # sysfs lists no interface of the function in the host
    assert driver.unprepare([ref]).claims[ref["uid"]].error == ""
    checkpoint = json.loads((node.state / "checkpoint.json").read_text())
    assert checkpoint["claims"] == {} and list(checkpoint["returning"]) == [h.NIC_BDF]
    # a new claim on the NIC waits for it (the kubelet retries)
    claim = api.create(h.claim_object("next", [{"request": "nic", "device": h.NIC}]))
    waiting = driver.prepare([h.claim_ref(claim)]).claims[claim["metadata"]["uid"]].error
    assert "has not come back to the host from its last pod yet" in waiting
    driver.kill9()  # and a restart does not forget it
    driver.start()
    (net.parent / "net-away").rename(net / HOST)
    pod_ends(node, pod, HOST)
    h.wait_until(lambda: host_view(HOST) == rail_nic, timeout=10, what="the NIC's settings back (the rescan)")
    h.wait_until(
        lambda: "returning" not in json.loads((node.state / "checkpoint.json").read_text()),
        what="the checkpoint without it",
    )
    assert driver.prepare([h.claim_ref(claim)]).claims[claim["metadata"]["uid"]].error == ""


def test_a_kernel_refusal_in_the_pod_puts_the_nic_back_with_its_addresses_and_routes(rail_nic, pod):
    root = h.short_tmp()
    node = h.NodeTree.build(root, nic_name=HOST)
    try:
        host = records(HOST)
        from aligned_dra_driver.network import addresses as layer3

        args = [h.hook_command(), "--pci-address", h.NIC_BDF, "--sysfs-root", str(node.sys), "--name", "net1"]
        for record in host["addresses"]:
            args += ["--host-address", layer3.address_arg(record)]
        args += ["--route", "10.78.0.0/16,10.99.0.1"]  # the gateway is on no network of the NIC: refused in the pod
        done = run_hook({"path": args[0], "args": ["aligned-dra-netdev-hook", *args[1:]]}, pod)
        assert done.returncode == 1
        assert "net1: adding route 10.78.0.0/16 via 10.99.0.1 failed: Network is unreachable (errno 101)" in done.stderr
        assert f"{HOST} is back in the host namespace with its addresses and routes" in done.stderr, done.stderr
        assert host_view(HOST) == rail_nic
        assert netns.ip("-4", "-o", "addr", pid=pod).strip().splitlines() == [
            line for line in netns.ip("-4", "-o", "addr", pid=pod).strip().splitlines() if " lo " in line
        ]
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_move_the_kernel_refuses_brings_back_the_routes_that_setting_the_link_down_flushed(pod):
    """The hook sets the link down before the move, which flushes its routes; a move that fails puts them back.

    The kernel refuses to move a bridge to another namespace (``NETIF_F_NETNS_LOCAL``): one stands in for the NIC.
    """
    from pyroute2 import IPRoute

    h.delete_links(HOST)
    with IPRoute() as ipr:
        ipr.link("add", ifname=HOST, kind="bridge")
        rail(ipr, ipr.link_lookup(ifname=HOST)[0])
    root = h.short_tmp()
    node = h.NodeTree.build(root, nic_name=HOST)
    try:
        before = host_view(HOST)
        args = ["--pci-address", h.NIC_BDF, "--sysfs-root", str(node.sys), "--name", "net1"]
        done = run_hook({"path": h.hook_command(), "args": ["aligned-dra-netdev-hook", *args]}, pod)
        assert done.returncode == 1, done.stderr
        assert "Invalid argument" in done.stderr, done.stderr
        assert host_view(HOST) == before and len(before["routes"]) == 8
    finally:
        h.delete_links(HOST)
        shutil.rmtree(root, ignore_errors=True)
