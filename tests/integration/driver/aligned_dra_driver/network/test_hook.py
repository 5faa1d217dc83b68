# SPDX-License-Identifier: Apache-2.0
"""The CDI netdev hook and the NIC restore on real veths and network namespaces."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

from ansible_collections.aligned.dra.tests.support.harnesses import driver as h
from ansible_collections.aligned.dra.tests.support.harnesses import netns

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


def start_pod(*prefix):
    # sleep until killed: a pod that ended on its own while a slow test still used it
    # would leave a zombie whose namespace pyroute2 waits on for ever
    proc = subprocess.Popen([*prefix, "unshare", "--net", "sleep", "infinity"])
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:  # unshare execs sleep once the namespace exists
        try:
            if os.readlink(f"/proc/{proc.pid}/ns/net") != os.readlink("/proc/self/ns/net"):
                break
        except FileNotFoundError:
            pass
        time.sleep(0.01)
    return proc


@pytest.fixture
def pod():
    """A process in its own network namespace, standing in for a pod sandbox."""
    proc = start_pod()
    yield proc.pid
    proc.kill()
    proc.wait()


@pytest.fixture
def build_node():
    return functools.partial(h.NodeTree.build, nic_name=HOST)


def fake_procfs(node, *pids, links=None):
    """A ``--procfs-root`` for the hook: symbolic links into /proc, with PID 1 standing for the test's process.

    The hook takes PID 1's network namespace for the host's. The tests' host is the namespace they run in,
    which need not be PID 1's (tests in a container), and PID 1's may not even be readable there; ``self``
    stays the hook's own process and every pid given is the real one.
    """
    root = tempfile.mkdtemp(prefix="proc", dir=node.root)
    entries = {"1": f"/proc/{os.getpid()}", "self": "/proc/self"}
    entries.update({str(pid): f"/proc/{pid}" for pid in (os.getpid(), *pids) if pid != 1})
    entries.update(links or {})
    for name, target in entries.items():
        os.symlink(target, os.path.join(root, name))
    return root


def run_hook(node, pid, *extra, stdin=None, procfs_root=None, prefix=()):
    args = [
        *prefix,
        sys.executable,
        "-m",
        "aligned_dra_driver.network.hook",
        "--pci-address",
        h.NIC_BDF,
        "--sysfs-root",
        str(node.sys),
        "--name",
        "net1",
        "--procfs-root",
        procfs_root or fake_procfs(node, pid),
        *extra,
    ]
    state = stdin if stdin is not None else json.dumps({"ociVersion": "1.0.2", "id": "c", "pid": pid})
    if isinstance(state, str):
        state = state.encode()
    done = subprocess.run(args, input=state, capture_output=True, env=h.driver_env(), check=False)
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode(), done.stderr.decode())


def links_in(pid):
    return netns.links(pid)


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
    assert "10.78.0.0" in netns.route_destinations(pod)
    # the second container of the pod finds it in place
    again = run_hook(node, pod, "--mtu", "1400", "--address", "10.77.0.2/24")
    assert again.returncode == 0, again.stderr
    assert "in-place" in again.stderr
    assert links_in(pod)["net1"]["addresses"].count("10.77.0.2") == 1


def test_the_hosts_addresses_and_routes_are_added_once_whatever_the_containers(veth, pod, node):
    host = ["--host-address", "10.76.0.5/24,brd=10.76.0.255", "--host-address", "10.76.0.6/24"]
    host += ["--host-route", "10.79.0.0/16,10.76.0.1,scope=0,proto=4"]
    host += ["--host-route", "10.80.0.9/32,metric=10,scope=253,proto=3"]
    for outcome in ("moved", "in-place", "in-place"):
        done = run_hook(node, pod, *host, "--address", "10.77.0.2/24")
        assert done.returncode == 0 and outcome in done.stderr, done.stderr
        addresses = subprocess.run(
            ["nsenter", f"--net=/proc/{pod}/ns/net", "ip", "-4", "-o", "addr", "show", "dev", "net1"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        # the kernel lists primary addresses first
        assert [line.split()[3] for line in addresses.splitlines()] == ["10.76.0.5/24", "10.77.0.2/24", "10.76.0.6/24"]
        assert "brd 10.76.0.255" in addresses.splitlines()[0] and "secondary" in addresses.splitlines()[2]
        routes = subprocess.run(
            ["nsenter", f"--net=/proc/{pod}/ns/net", "ip", "-4", "route", "show", "dev", "net1"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
        assert sorted(line.replace(" linkdown", "").strip() for line in routes) == [  # the peer is down
            "10.76.0.0/24 proto kernel scope link src 10.76.0.5",
            "10.77.0.0/24 proto kernel scope link src 10.77.0.2",
            "10.79.0.0/16 via 10.76.0.1 proto static",
            "10.80.0.9 scope link metric 10",  # protocol boot, which ip does not show
        ]


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
        ([], "own-pid", "host networking"),  # this process: PID 1's namespace (fake_procfs)
        ([], b"\xff\xfe{", "UTF-8"),
        ([], "[" * 100000, "not JSON"),
    ],
)
def test_refuses_bad_input_before_changing_anything(veth, node, extra, stdin, needle):
    if stdin == "own-pid":  # read when the test runs: test ids must not depend on the collecting process (xdist)
        stdin = json.dumps({"pid": os.getpid()})
    done = run_hook(node, 1, *extra, stdin=stdin)
    assert done.returncode != 0
    assert needle in done.stderr
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        assert ipr.link_lookup(ifname=HOST)  # still on the host


def test_bad_pci_address_and_name_are_refused(node):
    bad = subprocess.run(
        [sys.executable, "-m", "aligned_dra_driver.network.hook", "--pci-address", "0000:19:00.0/../x", "--name", "n"],
        input="{}",
        capture_output=True,
        text=True,
        env=h.driver_env(),
        check=False,
    )
    assert bad.returncode == 2 and "PCI address" in bad.stderr
    bad = subprocess.run(
        [sys.executable, "-m", "aligned_dra_driver.network.hook", "--pci-address", h.NIC_BDF, "--name", "a/b"],
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
    from aligned_dra_driver.network.interfaces import restore_name
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


def test_restore_name_gives_a_nic_back_under_its_own_name_its_state_addresses_and_routes(veth, node):
    """The kernel brings a NIC back from a pod down, with the pod's MTU and nothing else: in place, all comes back."""
    from aligned_dra_driver.network import addresses as layer3
    from aligned_dra_driver.network.interfaces import restore_name
    from pyroute2 import IPRoute

    records = {
        "addresses": [layer3.parse_address_arg("10.76.0.5/24,brd=10.76.0.255")],
        "routes": [
            {**layer3.parse_route_arg("10.79.0.0/16,10.76.0.1,scope=0,proto=4"), "table": 200 + os.getpid() % 1000},
            layer3.parse_route_arg("10.81.0.0/16,10.99.0.1,scope=0,proto=4"),  # a gateway on no network of the NIC
        ],
    }
    with IPRoute() as ipr:
        ipr.link("set", index=ipr.link_lookup(ifname=HOST)[0], mtu=1400)  # the pod's, and down
    with pytest.raises(layer3.Layer3Error) as refused:
        restore_name(str(node.sys), h.NIC_BDF, HOST, mtu=1500, up=True, records=records)
    assert str(refused.value) == (
        f"{HOST}: adding route 10.81.0.0/16,10.99.0.1,scope=0,proto=4 failed: Network is unreachable (errno 101)"
    )
    assert host_link(HOST) == {"mtu": 1500, "up": True}  # and everything else is there
    shown = subprocess.run(
        ["ip", "-4", "-o", "addr", "show", "dev", HOST], capture_output=True, text=True, check=True
    ).stdout
    assert "inet 10.76.0.5/24 brd 10.76.0.255" in shown
    table = str(records["routes"][0]["table"])
    shown = subprocess.run(
        ["ip", "-4", "route", "show", "table", table], capture_output=True, text=True, check=True
    ).stdout
    assert f"10.79.0.0/16 via 10.76.0.1 dev {HOST} proto static" in shown
    # the kubelet's retry adds nothing twice; without the refused route it succeeds
    records["routes"].pop()
    assert restore_name(str(node.sys), h.NIC_BDF, HOST, mtu=1500, up=True, records=records) == "in-place"
    shown = subprocess.run(
        ["ip", "-4", "-o", "addr", "show", "dev", HOST], capture_output=True, text=True, check=True
    ).stdout
    assert shown.count("inet ") == 1


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
    "import sys; from aligned_dra_driver.network import hook as m; "
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
        "--procfs-root",
        fake_procfs(node, pod),
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
    from aligned_dra_driver.network import hook as netdev_hook

    marker = tmp_path / "ran"
    evil = tmp_path / "evil"
    evil.mkdir()
    for name in ("ip", "rdma"):
        (evil / name).write_text(f"#!/bin/sh\necho {name} >> {marker}\nexit 0\n")
        (evil / name).chmod(0o755)
    env = h.driver_env()
    env["PATH"] = f"{evil}:{env['PATH']}"
    args = ["--pci-address", h.NIC_BDF, "--sysfs-root", str(node.sys), "--name", "net1", "--rdma-device", "mlx5_0"]
    args += ["--procfs-root", fake_procfs(node, pod)]
    done = subprocess.run(
        [sys.executable, "-m", "aligned_dra_driver.network.hook", *args],
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
    from aligned_dra_driver.network import hook as netdev_hook

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

    netns.ip("link", "add", "net1", "type", "veth", "peer", "name", "net1p", pid=pod)
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


# -- whose namespace is the host's -----------------------------------------------------------------
# Host networking is a pod in PID 1's namespace, not in the hook's own: the hook may run in another one.
# The hook without CAP_SYS_PTRACE stands for one that may not read a process's namespace: the kernel
# answers EACCES for a process whose capabilities are not a subset of the reader's.
WITHOUT_PTRACE = ("setpriv", "--bounding-set=-sys_ptrace")
needs_setpriv = pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) is not installed")


def test_a_pod_in_pid_1s_namespace_is_host_networking_even_when_self_is_elsewhere(veth, pod, node):
    # the pod shares PID 1's namespace (the test's); <procfs>/self is in the pod fixture's, another one
    procfs = fake_procfs(node, links={"self": f"/proc/{pod}"})
    before = host_link(HOST)
    done = run_hook(node, os.getpid(), procfs_root=procfs)
    assert done.returncode == 1 and "host networking" in done.stderr, done.stderr
    assert host_link(HOST) == before


def test_a_hook_in_another_namespace_than_pid_1_configures_the_pod_it_shares(veth, pod, node):
    """The hook run inside the pod's namespace (as in a container): that namespace is not PID 1's."""
    from pyroute2 import IPRoute

    with IPRoute() as ipr:  # the first container moved the NIC in and named it net1
        index = ipr.link_lookup(ifname=HOST)[0]
        fd = os.open(f"/proc/{pod}/ns/net", os.O_RDONLY)
        try:
            ipr.link("set", index=index, net_ns_fd=fd)
        finally:
            os.close(fd)
    netns.ip("link", "set", "dev", HOST, "name", "net1", pid=pod)
    done = run_hook(node, pod, "--mtu", "1400", prefix=("nsenter", f"--net=/proc/{pod}/ns/net"))
    assert done.returncode == 0 and "in-place" in done.stderr, done.stderr
    assert links_in(pod)["net1"]["mtu"] == 1400


@needs_setpriv
def test_a_pod_namespace_the_hook_may_not_read_is_a_permission_problem_not_a_process_gone(veth, pod, node):
    procfs = fake_procfs(node, pod)
    before = host_link(HOST)
    done = run_hook(node, pod, procfs_root=procfs, prefix=WITHOUT_PTRACE)
    assert done.returncode == 1, done.stderr
    assert f"permission denied on {procfs}/{pod}/ns/net (Permission denied)" in done.stderr, done.stderr
    assert "gone" not in done.stderr
    assert host_link(HOST) == before and HOST not in links_in(pod)


@pytest.fixture
def readable_pod():
    """A pod the hook without CAP_SYS_PTRACE may read: it has no more capabilities than the hook."""
    proc = start_pod(*WITHOUT_PTRACE)
    yield proc.pid
    proc.kill()
    proc.wait()


@needs_setpriv
@pytest.mark.parametrize("pid_1", ["unreadable", "missing"])
def test_pid_1s_namespace_unreadable_is_refused(veth, readable_pod, node, pid_1):
    links = {"1": "/proc/0"} if pid_1 == "missing" else None  # there is no process 0
    procfs = fake_procfs(node, readable_pod, links=links)
    before = host_link(HOST)
    done = run_hook(node, readable_pod, procfs_root=procfs, prefix=WITHOUT_PTRACE)
    why = "No such file or directory" if pid_1 == "missing" else "Permission denied"
    assert done.returncode == 1, done.stderr
    assert f"cannot read the host's network namespace {procfs}/1/ns/net ({why})" in done.stderr, done.stderr
    assert host_link(HOST) == before and HOST not in links_in(readable_pod)


def test_the_default_procfs_root_judges_by_the_machines_pid_1(veth, node):
    """With /proc (the default): whatever this machine's PID 1 is, the hook answers as it should."""
    from aligned_dra_driver.network import hook as netdev_hook

    assert netdev_hook.parser().get_default("procfs_root") == "/proc"
    before = host_link(HOST)
    done = run_hook(node, os.getpid(), procfs_root="/proc")
    assert done.returncode == 1, done.stderr
    try:
        host = os.stat("/proc/1/ns/net")
    except PermissionError as exc:  # PID 1 is not ours to read (a sandbox): refused, not taken for another one
        assert f"cannot read the host's network namespace /proc/1/ns/net ({exc.strerror})" in done.stderr
    else:
        own = os.stat("/proc/self/ns/net")
        if (host.st_dev, host.st_ino) == (own.st_dev, own.st_ino):
            assert "host networking" in done.stderr, done.stderr
        else:  # tests in a namespace of their own: this one is a pod's, whose NIC name is taken
            assert f"already has an interface named {HOST!r}" in done.stderr, done.stderr
    assert host_link(HOST) == before
