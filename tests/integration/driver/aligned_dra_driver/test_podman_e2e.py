# SPDX-License-Identifier: Apache-2.0
"""End to end with podman, a real CDI consumer: Prepare, then ``podman run --device <CDI names>``.

podman 4.3 reads CDI specs only from /etc/cdi and /var/run/cdi, so podman runs
in a private mount namespace where the driver's CDI directory is bind-mounted
on /run/cdi; the host's directories are left alone. A veth stands in for the
NIC: the fixture node lists it under the NIC's PCI address. (The veth is
destroyed with the container's namespace, so what comes back to the host at
Unprepare is tested in test_pod_nic_rail.py, where the kernel's part is played
by hand.)
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import subprocess
import uuid

import pytest

from ansible_collections.aligned.dra.tests.support.fakes.apiserver import FakeApiServer
from ansible_collections.aligned.dra.tests.support.harnesses import driver as h

pytestmark = [pytest.mark.podman, pytest.mark.netns]

HOST = h.ifname("pm")
PEER = h.ifname("pmp")


@pytest.fixture
def veth():
    from pyroute2 import IPRoute

    h.delete_links(HOST, PEER)
    with IPRoute() as ipr:
        ipr.link("add", ifname=HOST, kind="veth", peer=PEER)
    yield
    h.delete_links(HOST, PEER)


@pytest.fixture
def prepared(veth, node_image):
    root = h.short_tmp()
    node = h.NodeTree.build(root, nic_name=HOST)
    with FakeApiServer("1.35") as api:
        api.create(h.node_object())
        with h.DriverProcess(node, api) as driver:
            claim = api.create(
                h.claim_object(
                    "e2e",
                    [{"request": "gpu", "device": h.GPU}, {"request": "nic", "device": h.NIC}],
                    [h.nic_config(interfaceName="net1", mtu=1400, addresses=["10.66.0.2/24"])],
                )
            )
            ref = h.claim_ref(claim)
            answer = driver.prepare([ref]).claims[ref["uid"]]
            assert answer.error == ""
            ids = [cdi_id for device in answer.devices for cdi_id in device.cdi_device_ids]
            yield node, ids, ref
            assert driver.unprepare([ref]).claims[ref["uid"]].error == ""
    shutil.rmtree(root, ignore_errors=True)


# the veth's own network on the host (its rail's), per test process: they share the machine's namespace
RAIL = ipaddress.IPv4Network(f"{ipaddress.IPv4Address('100.64.0.0') + (os.getpid() % 1024) * 2048}/21")
ROUTE = ipaddress.IPv4Network(f"{ipaddress.IPv4Address('100.96.0.0') + (os.getpid() % 1024) * 2048}/21")


@pytest.fixture
def prepared_on_its_rail(veth, node_image):
    """A claim with no NicConfig addresses: the NIC's host addresses and routes go with it."""
    from pyroute2 import IPRoute

    gateway = str(RAIL.network_address + 1)
    with IPRoute() as ipr:
        index = ipr.link_lookup(ifname=HOST)[0]
        ipr.link("set", index=ipr.link_lookup(ifname=PEER)[0], state="up")
        ipr.link("set", index=index, state="up")
        ipr.addr("add", index=index, address=str(RAIL.network_address + 5), prefixlen=21)
        ipr.addr("add", index=index, address=str(RAIL.network_address + 6), prefixlen=21)
        ipr.route("add", dst=str(ROUTE), gateway=gateway, oif=index)
    root = h.short_tmp()
    node = h.NodeTree.build(root, nic_name=HOST)
    with FakeApiServer("1.35") as api:
        api.create(h.node_object())
        with h.DriverProcess(node, api) as driver:
            claim = api.create(h.claim_object("rail", [{"request": "nic", "device": h.NIC}]))
            ref = h.claim_ref(claim)
            answer = driver.prepare([ref]).claims[ref["uid"]]
            assert answer.error == ""
            yield node, [cdi_id for device in answer.devices for cdi_id in device.cdi_device_ids]
            assert driver.unprepare([ref]).claims[ref["uid"]].error == ""
    shutil.rmtree(root, ignore_errors=True)


def podman(node, *args, check=True):
    command = [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        'mkdir -p /run/cdi && mount --bind "$0" /run/cdi && exec "$@"',
        str(node.cdi),
        "podman",
        *args,
    ]
    done = subprocess.run(command, capture_output=True, text=True, env=dict(os.environ), check=False, timeout=120)
    if check:
        assert done.returncode == 0, done.stderr
    return done


def device_args(ids):
    return [arg for cdi_id in ids for arg in ("--device", cdi_id)]


SCRIPT = (
    "ls -l /dev/nvidia0 /dev/nvidiactl /dev/infiniband/uverbs0 /dev/infiniband/rdma_cm; env; ip -o addr; ip -o link"
)


def test_container_sees_device_nodes_env_and_the_moved_nic(prepared, node_image):
    node, ids, ref = prepared
    done = podman(node, "run", "--rm", "--network=none", *device_args(ids), node_image, "sh", "-c", SCRIPT)
    out = done.stdout
    assert "/dev/nvidia0" in out and out.splitlines()[0].startswith("c")  # a character device
    assert "/dev/infiniband/uverbs0" in out
    assert f"ALIGNED_DRA_GPU_0000_18_00_0={h.GPU_UUID}" in out
    assert f"NVIDIA_VISIBLE_DEVICES={h.GPU_UUID}" in out
    assert f"ALIGNED_DRA_CLAIM_UID={ref['uid']}" in out
    assert "ALIGNED_DRA_NIC_0000_19_00_0=net1" in out
    link = next(line for line in out.splitlines() if ": net1" in line and "mtu" in line)
    assert "mtu 1400" in link
    assert "inet 10.66.0.2/24" in out


def test_second_container_of_a_pod_finds_the_nic_in_place(prepared, node_image):
    node, ids, _ref = prepared
    pod = f"ald-{uuid.uuid4().hex[:8]}"
    podman(node, "pod", "create", "--name", pod, "--network=none")
    try:
        for _container in range(2):
            done = podman(node, "run", "--rm", "--pod", pod, *device_args(ids), node_image, "ip", "-o", "addr")
            assert "inet 10.66.0.2/24" in done.stdout
    finally:
        podman(node, "pod", "rm", "-f", pod, check=False)


def test_the_nic_keeps_its_host_addresses_and_routes_in_every_container_of_the_pod(prepared_on_its_rail, node_image):
    node, ids = prepared_on_its_rail
    pod = f"ald-{uuid.uuid4().hex[:8]}"
    podman(node, "pod", "create", "--name", pod, "--network=none")
    gateway = RAIL.network_address + 1
    try:
        for _container in range(2):  # the second one finds the NIC in place and adds nothing twice
            done = podman(
                node,
                "run",
                "--rm",
                "--pod",
                pod,
                *device_args(ids),
                node_image,
                "sh",
                "-c",
                "ip -4 -o addr; ip -4 route",
            )
            lines = [line.split() for line in done.stdout.splitlines()]
            addresses = [words[3] for words in lines if words[1:3] == [HOST, "inet"]]
            assert addresses == [f"{RAIL.network_address + 5}/21", f"{RAIL.network_address + 6}/21"], done.stdout
            assert done.stdout.count(f"{ROUTE} via {gateway} dev {HOST}") == 1, done.stdout
    finally:
        podman(node, "pod", "rm", "-f", pod, check=False)
