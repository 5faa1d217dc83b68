# SPDX-License-Identifier: Apache-2.0
"""The CDI netdev hook and the NIC restore on real veths and network namespaces."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from ansible_collections.aligned.dra.tests import driver_harness as h

pytestmark = pytest.mark.netns

HOST = h.ifname("hk")
PEER = h.ifname("hkp")
RETURNED = h.ifname("hkr")  # the name a NIC comes back with from a pod


@pytest.fixture
def veth():
    from pyroute2 import IPRoute

    h.delete_links(HOST, PEER, RETURNED)
    with IPRoute() as ipr:
        ipr.link("add", ifname=HOST, kind="veth", peer=PEER)
    yield HOST
    h.delete_links(HOST, PEER, RETURNED)


@pytest.fixture
def pod():
    """A process in its own network namespace, standing in for a pod sandbox."""
    proc = subprocess.Popen(["unshare", "--net", "sleep", "120"])
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:  # unshare execs sleep once the namespace exists
        try:
            if os.readlink(f"/proc/{proc.pid}/ns/net") != os.readlink("/proc/self/ns/net"):
                break
        except FileNotFoundError:
            pass
        time.sleep(0.01)
    yield proc.pid
    proc.kill()
    proc.wait()


@pytest.fixture
def node():
    root = h.short_tmp()
    yield h.NodeTree.build(root, nic_name=HOST)
    import shutil

    shutil.rmtree(root, ignore_errors=True)


def run_hook(node, pid, *extra, stdin=None):
    args = [
        sys.executable,
        "-m",
        "aligned_dra_driver.netdev_hook",
        "--pci-address",
        h.NIC_BDF,
        "--sysfs-root",
        str(node.sys),
        "--name",
        "net1",
        *extra,
    ]
    state = stdin if stdin is not None else json.dumps({"ociVersion": "1.0.2", "id": "c", "pid": pid})
    if isinstance(state, str):
        state = state.encode()
    done = subprocess.run(args, input=state, capture_output=True, env=h.driver_env(), check=False)
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode(), done.stderr.decode())


def links_in(pid):
    from pyroute2 import IPRoute

    with IPRoute(netns=f"/proc/{pid}/ns/net") as ipr:
        found = {}
        for link in ipr.get_links():
            name = link.get_attr("IFLA_IFNAME")
            addrs = [a.get_attr("IFA_ADDRESS") for a in ipr.get_addr(index=link["index"])]
            found[name] = {
                "mtu": link.get_attr("IFLA_MTU"),
                "addresses": addrs,
                "state": link.get_attr("IFLA_OPERSTATE"),
            }
        return found


def test_moves_renames_and_configures_then_is_idempotent(veth, pod, node):
    done = run_hook(node, pod, "--mtu", "1400", "--address", "10.77.0.2/24", "--route", "10.78.0.0/16,10.77.0.1")
    assert done.returncode == 0, done.stderr
    assert "moved" in done.stderr
    inside = links_in(pod)
    assert inside["net1"]["mtu"] == 1400
    assert "10.77.0.2" in inside["net1"]["addresses"]
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        assert ipr.link_lookup(ifname=HOST) == []
    with IPRoute(netns=f"/proc/{pod}/ns/net") as ipr:
        routes = [r.get_attr("RTA_DST") for r in ipr.get_routes(family=2)]
        assert "10.78.0.0" in routes
    # the second container of the pod finds it in place
    again = run_hook(node, pod, "--mtu", "1400", "--address", "10.77.0.2/24")
    assert again.returncode == 0, again.stderr
    assert "in-place" in again.stderr
    assert links_in(pod)["net1"]["addresses"].count("10.77.0.2") == 1


@pytest.mark.parametrize(
    ("extra", "stdin", "needle"),
    [
        (["--mtu", "20"], None, "MTU"),
        (["--address", "10.0.0.1"], None, "CIDR"),
        (["--route", "nowhere"], None, "DESTINATION"),
        (["--rdma-device", "mlx5;rm -rf"], None, "RDMA"),
        ([], "not json", "not JSON"),
        ([], json.dumps({"pid": -4}), "pid"),
        ([], json.dumps({"pid": 2**22 - 3}), "process is gone"),
        ([], json.dumps({"pid": 2**22 + 7}), "no valid pid"),
        ([], json.dumps({"pid": os.getpid()}), "host networking"),  # the host's own namespace
        ([], b"\xff\xfe{", "UTF-8"),
        ([], "[" * 100000, "not JSON"),
    ],
)
def test_refuses_bad_input_before_changing_anything(veth, node, extra, stdin, needle):
    done = run_hook(node, 1, *extra, stdin=stdin)
    assert done.returncode != 0
    assert needle in done.stderr
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        assert ipr.link_lookup(ifname=HOST)  # still on the host


def test_bad_pci_address_and_name_are_refused(node):
    bad = subprocess.run(
        [sys.executable, "-m", "aligned_dra_driver.netdev_hook", "--pci-address", "0000:19:00.0/../x", "--name", "n"],
        input="{}",
        capture_output=True,
        text=True,
        env=h.driver_env(),
        check=False,
    )
    assert bad.returncode == 2 and "PCI address" in bad.stderr
    bad = subprocess.run(
        [sys.executable, "-m", "aligned_dra_driver.netdev_hook", "--pci-address", h.NIC_BDF, "--name", "a/b"],
        input="{}",
        capture_output=True,
        text=True,
        env=h.driver_env(),
        check=False,
    )
    assert bad.returncode == 2 and "interface name" in bad.stderr


def test_missing_interface_everywhere_fails(veth, pod, node):
    (node.sys / "bus" / "pci" / "devices" / h.NIC_BDF / "net" / HOST).rename(
        node.sys / "bus" / "pci" / "devices" / h.NIC_BDF / "net" / "other0"
    )
    done = run_hook(node, pod)
    assert done.returncode == 1
    assert "no interface" in done.stderr


def test_restore_name_puts_a_returned_nic_back(veth, node):
    from aligned_dra_driver.netdev import restore_name
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        index = ipr.link_lookup(ifname=HOST)[0]
        ipr.link("set", index=index, ifname=RETURNED)
    net = node.sys / "bus" / "pci" / "devices" / h.NIC_BDF / "net"
    (net / HOST).rename(net / RETURNED)  # what the kernel lists after the rename
    assert restore_name(str(node.sys), h.NIC_BDF, HOST, mtu=1450) == "renamed"
    with IPRoute() as ipr:
        (link,) = ipr.get_links(ipr.link_lookup(ifname=HOST)[0])
        assert link.get_attr("IFLA_MTU") == 1450
    (net / RETURNED).rename(net / HOST)
    assert restore_name(str(node.sys), h.NIC_BDF, HOST) == "in-place"
    (net / HOST).rename(net.parent / "gone")
    assert restore_name(str(node.sys), h.NIC_BDF, HOST) == "absent"


RDMA_STAND_IN = """#!/bin/sh
# test stand-in for iproute2's rdma tool (no RDMA device exists here)
echo "$*" >> "{log}"
case "$*" in
  "dev show mlx5_0") exit 0 ;;
  "dev set mlx5_0 netns "*) [ -e "/run/netns/$5" ] && echo "netns $5 $(stat -L -c %d:%i /run/netns/$5)" >> "{log}"
     exit 0 ;;
esac
exit 1
"""

# The hook takes its tools from fixed directories only; the test puts its stand-in first in that list
# (in the hook's own process: there is no option or variable that could do it).
WITH_TOOL_DIR = (
    "import sys; from aligned_dra_driver import netdev_hook as m; "
    "m.TOOL_DIRS = (sys.argv.pop(1), *m.TOOL_DIRS); sys.exit(m.main(sys.argv[1:]))"
)


def rdma_hook(node, pod, tmp_path, env=None):
    log = tmp_path / "rdma.log"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "rdma").write_text(RDMA_STAND_IN.format(log=log))
    (bin_dir / "rdma").chmod(0o755)
    args = [
        sys.executable,
        "-c",
        WITH_TOOL_DIR,
        str(bin_dir),
        "--pci-address",
        h.NIC_BDF,
        "--sysfs-root",
        str(node.sys),
        "--name",
        "net1",
        "--rdma-device",
        "mlx5_0",
    ]
    done = subprocess.run(
        args, input=json.dumps({"pid": pod}), capture_output=True, text=True, env=env or h.driver_env(), check=False
    )
    return done, log


def namespace_id(path):
    stat = os.stat(path)
    return f"{stat.st_dev}:{stat.st_ino}"


def test_rdma_exclusive_mode_moves_the_rdma_device_into_the_pod(veth, pod, node, tmp_path):
    done, log = rdma_hook(node, pod, tmp_path)
    assert done.returncode == 0, done.stderr
    calls = log.read_text().splitlines()
    assert calls[0] == "dev show mlx5_0"
    assert calls[1] == f"dev set mlx5_0 netns aligned-dra-{pod}"
    # attached to the pod's namespace while moving
    assert calls[2] == f"netns aligned-dra-{pod} {namespace_id(f'/proc/{pod}/ns/net')}"
    assert not os.path.exists(f"/run/netns/aligned-dra-{pod}")  # and the name is gone afterwards


@pytest.mark.parametrize("stale", ["another namespace", "a plain file"])
def test_a_stale_netns_name_from_a_crashed_run_is_replaced(veth, pod, node, tmp_path, stale):
    """A run killed between ``ip netns attach`` and ``delete`` leaves the name; the pid may be reused since."""
    name = f"aligned-dra-{pod}"
    entry = f"/run/netns/{name}"
    if stale == "another namespace":
        subprocess.run(["ip", "netns", "add", name], check=True)
    else:
        os.makedirs("/run/netns", exist_ok=True)
        open(entry, "w").close()
    try:
        assert namespace_id(entry) != namespace_id(f"/proc/{pod}/ns/net")
        done, log = rdma_hook(node, pod, tmp_path)
        assert done.returncode == 0, done.stderr
        calls = log.read_text().splitlines()
        # the device went into the pod's namespace, not into the one the stale name pointed at
        assert calls[2] == f"netns {name} {namespace_id(f'/proc/{pod}/ns/net')}"
        assert not os.path.lexists(entry)
    finally:
        if os.path.lexists(entry):
            subprocess.run(["ip", "netns", "delete", name], check=False)


def test_the_tools_come_from_fixed_directories_never_from_path(veth, pod, node, tmp_path):
    from aligned_dra_driver import netdev_hook

    marker = tmp_path / "ran"
    evil = tmp_path / "evil"
    evil.mkdir()
    for name in ("ip", "rdma"):
        (evil / name).write_text(f"#!/bin/sh\necho {name} >> {marker}\nexit 0\n")
        (evil / name).chmod(0o755)
    env = h.driver_env()
    env["PATH"] = f"{evil}:{env['PATH']}"
    args = ["--pci-address", h.NIC_BDF, "--sysfs-root", str(node.sys), "--name", "net1", "--rdma-device", "mlx5_0"]
    done = subprocess.run(
        [sys.executable, "-m", "aligned_dra_driver.netdev_hook", *args],
        input=json.dumps({"pid": pod}),
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert not marker.exists(), done.stderr
    # no RDMA device here: the real rdma finds none (or is not installed, which the hook names)
    assert done.returncode == 0 or "does not search PATH" in done.stderr, done.stderr
    for name in ("ip", "rdma"):
        try:
            path = netdev_hook.tool(name)
        except netdev_hook.HookError as exc:
            assert "does not search PATH" in str(exc)
            continue
        assert os.path.dirname(path) in netdev_hook.TOOL_DIRS


def test_a_tool_outside_the_fixed_directories_is_not_run(monkeypatch, tmp_path):
    from aligned_dra_driver import netdev_hook

    monkeypatch.setattr(netdev_hook, "TOOL_DIRS", (str(tmp_path / "empty"),))
    monkeypatch.setenv("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
    with pytest.raises(netdev_hook.HookError, match="rdma is not installed in .*empty"):
        netdev_hook.move_rdma("mlx5_0", os.getpid())


def host_link(name):
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        indexes = ipr.link_lookup(ifname=name)
        if not indexes:
            return None
        (link,) = ipr.get_links(indexes[0])
        return {"mtu": link.get_attr("IFLA_MTU"), "up": bool(link["flags"] & 1)}


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--name", "net1\n"], "interface name"),  # a $-anchored pattern let the newline through
        (["--name", "lo"], "loopback"),
        (["--route", "10.78.0.0/16,fd00::1"], "IPv6"),
        (["--address", "fe80::2%eth0/64"], "CIDR"),
        (["--mtu", "\u0661\u0665\u0660\u0660"], "MTU"),  # Arabic-Indic digits pass str.isdigit()
        (["--pci-address", h.NIC_BDF + "\n"], "PCI address"),
        (["--rdma-device", "mlx5_0\n"], "RDMA"),
        (["--address", "10.0.0.1/24"] * 17, "at most 16"),
    ],
)
def test_malformed_arguments_exit_2_and_change_nothing(veth, pod, node, extra, needle):
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        ipr.link("set", index=ipr.link_lookup(ifname=HOST)[0], state="up")
    before = host_link(HOST)
    done = run_hook(node, pod, *extra)
    assert done.returncode == 2, done.stderr
    assert needle in done.stderr and "Traceback" not in done.stderr
    assert host_link(HOST) == before
    assert HOST not in links_in(pod)


def test_a_name_taken_in_the_pod_is_refused_before_the_move(veth, pod, node):
    from pyroute2 import IPRoute

    with IPRoute(netns=f"/proc/{pod}/ns/net") as inside:
        inside.link("add", ifname="net1", kind="veth", peer="net1p")
    with IPRoute() as ipr:
        ipr.link("set", index=ipr.link_lookup(ifname=HOST)[0], state="up")
    done = run_hook(node, pod)
    assert done.returncode == 1
    assert "already has an interface named 'net1'" in done.stderr
    assert host_link(HOST)["up"]  # not even set down
    assert sorted(links_in(pod)) == ["lo", "net1", "net1p"]


def test_a_kernel_refusal_after_the_move_puts_the_nic_back(veth, pod, node):
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        index = ipr.link_lookup(ifname=HOST)[0]
        ipr.link("set", index=index, mtu=1450)
        ipr.link("set", index=index, state="up")
    # the gateway is on no connected network: the kernel refuses the route after the NIC was moved and renamed
    done = run_hook(node, pod, "--mtu", "1400", "--address", "10.77.0.2/24", "--route", "10.78.0.0/16,10.99.0.1")
    assert done.returncode == 1
    assert "back in the host namespace" in done.stderr, done.stderr
    assert host_link(HOST) == {"mtu": 1450, "up": True}
    assert sorted(links_in(pod)) == ["lo"]
