# SPDX-License-Identifier: Apache-2.0
"""The netdev hook under 10,000 generated command lines and OCI states, in-process.

Every run must end with exit status 0, 1 (a refusal or a failure, one line on
standard error) or 2 (a bad command line, argparse's message), never a
traceback; and a run that does not succeed must leave every network namespace
exactly as it found it. Real veths in namespaces would cost a namespace move
per example, so the netlink layer is the strict fake below; the same refusals
run on real veths in tests/integration/driver/aligned_dra_driver/network/test_hook.py, and the fake
(tests/support/fakes/netlink.py) is held to the kernel's answers in tests/unit/support/fakes/test_netlink.py.
"""

from __future__ import annotations

import contextlib
import copy
import errno
import io
import json
import os
import shutil

import pytest
from aligned_dra_driver.network import hook as netdev_hook
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.aligned.dra.tests.support.fakes.netlink import FakeIPRoute, FakeKernel
from ansible_collections.aligned.dra.tests.support.fuzzing import profiles as fuzz_profiles
from ansible_collections.aligned.dra.tests.support.harnesses import driver as h

HOST_NIC = "aldnic0"  # the fixture NIC's name in the host (its sysfs entry)
POD_PID, HOST_NET_PID, GONE_PID = 4242, 77, 999
EXAMPLES = fuzz_profiles.examples(10000)


@pytest.fixture(scope="module")
def world():
    root = h.memory_tmp()
    node = h.NodeTree.build(root, nic_name=HOST_NIC)
    procfs = root / "fakeproc"
    for pid in ("self", str(POD_PID)):
        (procfs / pid / "ns").mkdir(parents=True)
        (procfs / pid / "ns" / "net").write_text("")
    for pid in ("1", str(HOST_NET_PID)):  # PID 1 (the host's namespace) and a pod with host networking
        (procfs / pid / "ns").mkdir(parents=True)
        os.link(procfs / "self" / "ns" / "net", procfs / pid / "ns" / "net")
    state_file = root / "state.json"
    state_file.write_text(json.dumps({"pid": POD_PID}))
    yield {"node": node, "procfs": str(procfs), "state_file": str(state_file)}
    shutil.rmtree(root, ignore_errors=True)


def fresh_kernel(procfs: str) -> FakeKernel:
    kernel = FakeKernel({"host": f"{procfs}/self/ns/net", "pod": f"{procfs}/{POD_PID}/ns/net"})
    kernel.add_link("host", 1, "lo", mtu=65536, max_mtu=65536)
    kernel.add_link("host", 2, "eno1")
    kernel.add_link("host", 7, HOST_NIC, max_mtu=9000)
    kernel.add_link("pod", 1, "lo", mtu=65536, max_mtu=65536)
    kernel.add_link("pod", 2, "eth0")  # what the CNI plugin made
    # the NIC on its rail: two addresses (the second one secondary), the kernel's prefix route, a route of
    # the rail through its gateway, a link route with a metric, one in a policy table; a refused run leaves
    # all of it as it was (the move flushes it, and so does setting the link down)
    host = FakeIPRoute(kernel)
    host.addr("add", index=7, address="192.168.128.5", prefixlen=21, broadcast="192.168.135.255")
    host.addr("add", index=7, address="192.168.128.6", prefixlen=21)
    host.route("add", dst="10.200.0.0/16", oif=7, gateway="192.168.128.1")
    host.route("add", dst="192.168.200.0/24", oif=7, priority=100, scope=253, proto=3)
    host.route("add", dst="192.168.201.0/24", oif=7, table=100)
    kernel.changes = 0
    return kernel


# -- generated inputs ----------------------------------------------------------------------------
# Each value is drawn from a pool of valid and malformed constants, or (the NOISE entry) as free text:
# one draw per value keeps 10,000 examples within seconds.

NOISE, NUMBER = object(), object()
noise = st.text(max_size=12).filter(lambda t: t not in ("-h", "--help"))
VALID_BDFS = [h.NIC_BDF]
BAD_BDFS = ["0000:19:00.1", h.NIC_BDF + "\n", h.NIC_BDF.upper(), "0000:19:00.0/../x", "", "19:00.0", "0000:19:00.8"]
VALID_NAMES = ["net1", "rdma_0", "a.b-c", HOST_NIC, "x" * 15]
BAD_NAMES = ["eth0", "lo", "net1\n", "x" * 16, "a/b", "a:b", "a b", ".", "..", "-x", "\u00e9", "", "net1\x00"]
VALID_MTUS = [None, "68", "1500", "9000"]
BAD_MTUS = ["9001", "65535", "65536", "67", "0", "-1", "\u0661\u0665\u0660\u0660", "1500\n", "1e3", " 1500", "+1500"]
VALID_ADDRESSES = ["10.77.0.2/24", "fd00::2/64", "192.168.5.9/16"]
BAD_ADDRESSES = ["10.0.0.1", "fe80::1%eth0/64", "10.0.0.1/33", "fd00::1/129", "10.0.0.1/24\n", "::/x", "/24"]
ROUTES = {  # route -> the address that makes its gateway reachable (None: none needed)
    "10.78.0.0/16,10.77.0.1": "10.77.0.2/24",
    "10.79.0.0/16": None,
    "fd01::/64,fd00::1": "fd00::2/64",
}
GOOD_ROUTES = list(ROUTES)
# what the driver passes from the host: the fixture NIC's own (see fresh_kernel), and others
VALID_HOST_ADDRESSES = [
    "192.168.128.5/21,brd=192.168.135.255",
    "192.168.128.6/21",
    "10.9.0.5/24,metric=100,noprefixroute",
]
BAD_HOST_ADDRESSES = [
    "192.168.128.5",
    "fd00::2/64",
    "10.0.0.1/24,brd=x",
    "10.0.0.1/24,noprefix",
    "10.0.0.1/24,metric=-1",
]
BAD_HOST_ADDRESSES += ["10.0.0.1/24,metric=1,metric=1", "10.0.0.1/24,metric=4294967296", "10.0.0.1/33", "10.0.0.1/24,"]
HOST_ROUTES = {  # route -> the host address that makes its gateway or source usable (None: none needed)
    "10.200.0.0/16,192.168.128.1,scope=0,proto=4": "192.168.128.5/21,brd=192.168.135.255",
    "192.168.200.0/24,metric=100,scope=253,proto=3": None,
    "172.30.0.0/16,172.31.0.1,scope=0,proto=4,onlink": None,
    "10.9.1.0/24,10.9.0.1,metric=100,src=10.9.0.5,scope=0,proto=16": "10.9.0.5/24,metric=100,noprefixroute",
}
GOOD_HOST_ROUTES = list(HOST_ROUTES)
BAD_HOST_ROUTES = ["10.0.0.0/8,fd00::1", "10.0.0.0/8,metric=x", "10.0.0.0/8,scope=256", "10.0.0.0/8,bogus=1"]
BAD_HOST_ROUTES += ["10.0.0.0/8,10.0.0.1,10.0.0.2", "fd01::/64,fd00::1", "10.200.0.0/16,10.99.0.1,proto=4", "/8"]
BAD_HOST_ROUTES += ["10.0.0.0/8,src=10.99.0.9", "10.0.0.0/8,onlink=1", "10.0.0.0/8,proto=1,proto=2"]
BAD_ROUTES = ["10.78.0.0/16,fd00::1", "nowhere", "10.0.0.0/8,", ",10.0.0.1", "10.78.0.0/16,10.99.0.1", "fe80::/64%1"]
VALID_RDMA = [None, "mlx5_0"]
BAD_RDMA = ["mlx5_0\n", "mlx5;rm", "x" * 65, ""]
GOOD_STATE = json.dumps({"ociVersion": "1.0.2", "id": "c", "pid": POD_PID}).encode()
BAD_STATES = [json.dumps({"pid": p}).encode() for p in (1, HOST_NET_PID, GONE_PID, 0, -1, 2**22 + 1, True, 1.5, "42")]
BAD_STATES += [b"[" * 50_000, b"\xff\xfe{}", b"", b"null", b"[]", b'{"pid": 1' + b"0" * 5000 + b"}", b"{" * 3]
json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5), st.lists, max_leaves=4)


_POOLS: dict[tuple[int, int], st.SearchStrategy] = {}
_STATES = st.sampled_from([GOOD_STATE, *BAD_STATES, NOISE, NUMBER])
_FREE_STATES = st.one_of(st.binary(max_size=32), json_values.map(lambda v: json.dumps(v).encode()))
_COUNTS = [st.integers(0, n) for n in range(40)]


def _pools(good, bad):
    """One strategy per pool, made once: building strategies per draw costs more than the example."""
    key = (id(good), id(bad))
    if key not in _POOLS:
        _POOLS[key] = st.sampled_from([*good, *bad, NOISE])
    return _POOLS[key]


@st.composite
def hook_inputs(draw):
    argv: list[str] = []
    valid = True

    def pick(good, bad, option=None):
        nonlocal valid
        value = draw(_pools(good, bad))
        if value is NOISE:
            value = draw(noise)
        valid = valid and value in good
        if option and value is not None:
            argv.extend([option, value])
        return value

    pick(VALID_BDFS, BAD_BDFS, "--pci-address")
    name = pick(VALID_NAMES, BAD_NAMES, "--name")
    mtu = pick(VALID_MTUS, BAD_MTUS, "--mtu")
    address_list = [pick(VALID_ADDRESSES, BAD_ADDRESSES) for _index in range(draw(_COUNTS[3]))]
    route_list = [pick(GOOD_ROUTES, BAD_ROUTES) for _index in range(draw(_COUNTS[2]))]
    if valid:  # a gateway needs its network on the link
        address_list = sorted(set(address_list) | {ROUTES[r] for r in route_list if ROUTES[r]})
    for item in address_list:
        argv.extend(["--address", item])
    for item in route_list:
        argv.extend(["--route", item])
    host_addresses = [pick(VALID_HOST_ADDRESSES, BAD_HOST_ADDRESSES) for _index in range(draw(_COUNTS[3]))]
    host_routes = [pick(GOOD_HOST_ROUTES, BAD_HOST_ROUTES) for _index in range(draw(_COUNTS[2]))]
    if valid:  # as the driver passes them: no address twice, each route's gateway or source with it
        host_addresses = sorted(set(host_addresses) | {HOST_ROUTES[r] for r in host_routes if HOST_ROUTES[r]})
        host_routes = sorted(set(host_routes))
    for item in host_addresses:
        argv.extend(["--host-address", item])
    for item in host_routes:
        argv.extend(["--host-route", item])
    pick(VALID_RDMA, BAD_RDMA, "--rdma-device")
    if draw(_COUNTS[9]) == 0:  # a stray argument somewhere
        argv.insert(draw(_COUNTS[len(argv)]), draw(noise))
        valid = False
    state = draw(_STATES)
    if state is NOISE:
        state = draw(_FREE_STATES)
    elif state is NUMBER:
        state = json.dumps({"pid": draw(st.integers())}).encode()
    state_ok = state == GOOD_STATE
    flags = draw(_COUNTS[15])
    return {
        "argv": argv,
        "state": state,
        "via_file": state_ok and bool(flags & 1),
        "valid": valid and state_ok and (not flags & 8 or name == "net1"),
        "name": name,
        "mtu": mtu,
        "host_addresses": host_addresses,
        "fail_at": 1 + draw(_COUNTS[11]) if flags & 2 else None,
        "rdma_fails": bool(flags & 4),
        # the pod's second container: the NIC is in the pod already, named net1
        "second": bool(flags & 8),
    }


def run_in_process(world, monkeypatch, case, kernel=None, procfs=None):
    procfs = procfs or world["procfs"]
    kernel = kernel or fresh_kernel(procfs)
    if case.get("second"):
        nic = kernel.state["host"]["links"].pop(7)
        kernel.state["pod"]["links"][7] = {**nic, "name": "net1", "parent": ("pci", h.NIC_BDF)}
    kernel.fail_at = case["fail_at"]
    moved_rdma = []

    def fake_move_rdma(device, pid):
        if case["rdma_fails"]:
            raise netdev_hook.HookError(f"rdma dev set {device} netns: Operation not supported")
        moved_rdma.append(device)
        return "moved"

    monkeypatch.setattr(netdev_hook, "_netlink", lambda netns=None: FakeIPRoute(kernel, netns))
    monkeypatch.setattr(netdev_hook, "move_rdma", fake_move_rdma)
    argv = [*case["argv"], "--sysfs-root", str(world["node"].sys), "--procfs-root", procfs]
    if case["via_file"]:
        argv += ["--state-file", world["state_file"]]
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(case["state"])))
    before = copy.deepcopy(kernel.state)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = netdev_hook.main(argv)
        except SystemExit as exc:  # argparse refusing the command line
            code = exc.code
    return code, err.getvalue(), before, kernel, moved_rdma


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)
@given(case=hook_inputs())
def test_hook_refuses_malformed_input_without_a_traceback_or_a_partial_change(world, monkeypatch, case):
    code, err, before, kernel, moved_rdma = run_in_process(world, monkeypatch, case)
    assert code in (0, 1, 2), (code, err)
    rdma_fails = case["rdma_fails"] and "--rdma-device" in case["argv"]
    if case["valid"] and case["fail_at"] is None and not rdma_fails:
        assert code == 0, f"valid input refused: {case['argv']}: {err}"
    assert "Traceback" not in err
    assert err.strip(), "every outcome is reported on standard error"
    if code == 2:
        assert "aligned-dra-netdev-hook: error:" in err
    else:
        assert err.startswith("aligned-dra-netdev-hook: ") and err.count("\n") == 1, err
    if code != 0:
        assert kernel.state == before, f"partial change after: {err}"
        return
    pod = {link["name"]: link for link in kernel.state["pod"]["links"].values()}
    assert case["name"] in pod and pod[case["name"]]["up"]
    assert HOST_NIC not in {link["name"] for link in kernel.state["host"]["links"].values()}
    if case["mtu"]:
        assert pod[case["name"]]["mtu"] == int(case["mtu"])
    pod_addresses = {(a["address"], a["prefixlen"]) for a in pod[case["name"]]["addrs"]}
    for item in case["host_addresses"]:
        address, prefixlen = item.split(",")[0].split("/")
        assert (address, int(prefixlen)) in pod_addresses, (item, pod_addresses)
    assert moved_rdma == (["mlx5_0"] if "--rdma-device" in case["argv"] else [])


def test_valid_input_succeeds(world, monkeypatch):
    """The fuzz oracle's other half: what the generator calls valid does succeed (the checks are not too strict)."""
    case = {
        "argv": ["--pci-address", h.NIC_BDF, "--name", "net1", "--mtu", "9000"]
        + ["--address", "10.77.0.2/24", "--address", "fd00::2/64", "--route", "10.78.0.0/16,10.77.0.1"]
        + ["--route", "fd01::/64,fd00::1", "--rdma-device", "mlx5_0"],
        "state": json.dumps({"pid": POD_PID}).encode(),
        "via_file": False,
        "fail_at": None,
        "rdma_fails": False,
    }
    code, err, _before, kernel, moved_rdma = run_in_process(world, monkeypatch, case)
    assert code == 0, err
    (link,) = [v for v in kernel.state["pod"]["links"].values() if v["name"] == "net1"]
    addresses = {(a["address"], a["prefixlen"]) for a in link["addrs"]}
    assert link["mtu"] == 9000 and ("10.77.0.2", 24) in addresses and moved_rdma == ["mlx5_0"]
    assert {r["dst"] for r in kernel.state["pod"]["routes"] if r["proto"] != 2} == {"10.78.0.0/16", "fd01::/64"}


def test_the_hosts_addresses_and_routes_go_with_the_nic_and_a_second_container_adds_none_twice(world, monkeypatch):
    args = ["--host-address", "192.168.128.5/21,brd=192.168.135.255", "--host-address", "192.168.128.6/21"]
    args += ["--host-route", "10.200.0.0/16,192.168.128.1,scope=0,proto=4"]
    args += ["--host-route", "192.168.200.0/24,metric=100,scope=253,proto=3"]
    code, err, before, kernel, _moved = run_in_process(world, monkeypatch, _case(*args))
    assert code == 0 and "moved" in err, err
    (nic,) = [v for v in kernel.state["pod"]["links"].values() if v["name"] == "net1"]
    assert [(a["address"], a["prefixlen"], a["broadcast"], a["flags"] & 1) for a in nic["addrs"]] == [
        ("192.168.128.5", 21, "192.168.135.255", 0),
        ("192.168.128.6", 21, None, 1),  # secondary, as on the host
    ]
    host_nic = before["host"]["links"][7]
    assert nic["addrs"] == host_nic["addrs"]
    main = sorted((r for r in before["host"]["routes"] if r["table"] == 254), key=lambda r: r["dst"])
    assert sorted(kernel.state["pod"]["routes"], key=lambda r: r["dst"]) == main
    # the second container: the NIC in place, nothing added twice, nothing changed
    pod_before = copy.deepcopy(kernel.state["pod"])
    code, err, _before, kernel, _moved = run_in_process(world, monkeypatch, _case(*args), kernel)
    assert code == 0 and "in-place" in err, err
    assert kernel.state["pod"] == pod_before


def test_a_host_route_another_pod_interface_holds_is_refused_and_the_nic_goes_back_whole(world, monkeypatch):
    kernel = fresh_kernel(world["procfs"])
    pod = FakeIPRoute(kernel, f"{world['procfs']}/{POD_PID}/ns/net")
    pod.addr("add", index=2, address="10.244.1.7", prefixlen=24)
    pod.route("add", dst="10.200.0.0/16", oif=2, gateway="10.244.1.1")  # the pod's network has it
    kernel.changes = 0
    args = ["--host-address", "192.168.128.5/21,brd=192.168.135.255", "--host-address", "192.168.128.6/21"]
    args += ["--host-route", "10.200.0.0/16,192.168.128.1,scope=0,proto=4"]
    code, err, before, kernel, _moved = run_in_process(world, monkeypatch, _case(*args), kernel)
    assert code == 1, err
    assert "net1: route 10.200.0.0/16,192.168.128.1,scope=0,proto=4 (table 254) is held by another interface" in err
    assert "aldnic0 is back in the host namespace with its addresses and routes" in err, err
    assert kernel.state == before


@pytest.mark.parametrize("fail_at", range(1, 12))
def test_a_failure_at_any_netlink_change_leaves_the_namespaces_as_they_were(world, monkeypatch, fail_at):
    case = {
        "argv": ["--pci-address", h.NIC_BDF, "--name", "net1", "--mtu", "9000", "--address", "10.77.0.2/24"]
        + ["--route", "10.78.0.0/16,10.77.0.1"],
        "state": json.dumps({"pid": POD_PID}).encode(),
        "via_file": False,
        "fail_at": fail_at,
        "rdma_fails": False,
    }
    code, err, before, kernel, _moved = run_in_process(world, monkeypatch, case)
    if fail_at <= 8:  # down, move, down, rename, mtu, address, up, route: each one fails in turn
        assert code == 1 and "busy" in err, err
        assert kernel.state == before
    else:
        assert code == 0, err


def test_an_mtu_beyond_the_device_is_refused_before_the_move(world, monkeypatch):
    case = {
        "argv": ["--pci-address", h.NIC_BDF, "--name", "net1", "--mtu", "9001"],
        "state": json.dumps({"pid": POD_PID}).encode(),
        "via_file": False,
        "fail_at": None,
        "rdma_fails": False,
    }
    code, err, before, kernel, _moved = run_in_process(world, monkeypatch, case)
    assert code == 1 and "outside what aldnic0 supports (68..9000)" in err
    assert kernel.changes == 0 and kernel.state == before


def test_an_rdma_move_that_fails_takes_the_nic_back(world, monkeypatch):
    case = {
        "argv": ["--pci-address", h.NIC_BDF, "--name", "net1", "--rdma-device", "mlx5_0"],
        "state": json.dumps({"pid": POD_PID}).encode(),
        "via_file": False,
        "fail_at": None,
        "rdma_fails": True,
    }
    code, err, before, kernel, _moved = run_in_process(world, monkeypatch, case)
    assert code == 1 and "back in the host namespace" in err
    assert kernel.state == before


def test_the_second_container_configures_only_the_nic_of_its_pci_address(world, monkeypatch):
    """In place, the pod's interface of that name must be the claimed PCI function (when the kernel says)."""
    case = {
        "argv": ["--pci-address", h.NIC_BDF, "--name", "eth0", "--mtu", "1400"],
        "state": json.dumps({"pid": POD_PID}).encode(),
        "via_file": False,
        "fail_at": None,
        "rdma_fails": False,
    }

    kernel = fresh_kernel(world["procfs"])
    del kernel.state["host"]["links"][7]  # moved by the first container
    kernel.state["pod"]["links"][2]["parent"] = ("virtio", "virtio2")  # the pod's eth0 is the CNI's
    code, err, before, kernel, _moved = run_in_process(world, monkeypatch, case, kernel)
    assert code == 1 and "belongs to virtio device virtio2, not to 0000:19:00.0" in err, err
    assert kernel.state == before
    kernel = fresh_kernel(world["procfs"])
    del kernel.state["host"]["links"][7]
    kernel.state["pod"]["links"][2]["parent"] = ("pci", h.NIC_BDF)  # it is the NIC, moved and named eth0 before
    code, err, _before, kernel, _moved = run_in_process(world, monkeypatch, case, kernel)
    assert code == 0 and "in-place" in err, err
    assert kernel.state["pod"]["links"][2]["mtu"] == 1400


def test_a_pci_address_not_on_the_node_never_configures_a_pod_interface_of_that_name(world, monkeypatch):
    """Found by the fuzzing above: the pod's CNI interface was configured "in place" for a device not on the node."""
    case = {
        "argv": ["--pci-address", "0000:19:00.1", "--name", "eth0", "--mtu", "1280"],
        "state": json.dumps({"pid": POD_PID}).encode(),
        "via_file": False,
        "fail_at": None,
        "rdma_fails": False,
    }
    code, err, before, kernel, _moved = run_in_process(world, monkeypatch, case)
    assert code == 1
    assert "no PCI device 0000:19:00.1 on this node" in err
    assert kernel.state == before


# -- whose namespace is the host's -----------------------------------------------------------------
# The hook judged host networking against its own namespace (<procfs>/self); it is PID 1's. The hook
# may run in another namespace than PID 1 (in a container), and then the two answers differ.


def procfs_tree(tmp_path, namespaces: dict[str, str]):
    """A procfs root: ``{pid: namespace}``, where entries with the same namespace share one inode."""
    root = tmp_path / "proc"
    first: dict[str, str] = {}
    for pid, namespace in namespaces.items():
        (root / pid / "ns").mkdir(parents=True)
        net = root / pid / "ns" / "net"
        if namespace in first:
            os.link(first[namespace], net)
        else:
            net.write_text("")
            first[namespace] = str(net)
    return str(root)


def _case(*extra):
    argv = ["--pci-address", h.NIC_BDF, "--name", "net1", *extra]
    state = json.dumps({"pid": POD_PID}).encode()
    return {"argv": argv, "state": state, "via_file": False, "fail_at": None, "rdma_fails": False}


def test_a_pod_in_pid_1s_namespace_is_host_networking_when_the_hook_runs_elsewhere(world, monkeypatch, tmp_path):
    procfs = procfs_tree(tmp_path, {"self": "hook", "1": "host", str(POD_PID): "host"})
    # the hook finds the NIC in its own namespace; the "pod" is the host's namespace
    kernel = FakeKernel({"host": f"{procfs}/self/ns/net", "pod": f"{procfs}/{POD_PID}/ns/net"})
    kernel.add_link("host", 7, HOST_NIC)
    kernel.add_link("pod", 2, "eno1")
    code, err, before, kernel, _moved = run_in_process(world, monkeypatch, _case(), kernel, procfs)
    assert code == 1 and "host networking" in err, err
    assert kernel.changes == 0 and kernel.state == before


def test_a_pod_sharing_the_hooks_namespace_but_not_pid_1s_is_not_host_networking(world, monkeypatch, tmp_path):
    """The hook in a container whose namespace the pod shares: the NIC is already there (a later container)."""
    procfs = procfs_tree(tmp_path, {"self": "hook", "1": "host", str(POD_PID): "hook"})
    # "host" is the fake's name for the hook's own namespace (netlink without netns); the pod's is the same
    kernel = FakeKernel({"host": f"{procfs}/self/ns/net", "init": f"{procfs}/1/ns/net"})
    kernel.add_link("host", 1, "lo", mtu=65536, max_mtu=65536)
    kernel.add_link("host", 7, "net1")
    kernel.state["host"]["links"][7]["parent"] = ("pci", h.NIC_BDF)
    code, err, _before, kernel, _moved = run_in_process(world, monkeypatch, _case("--mtu", "9000"), kernel, procfs)
    assert code == 0 and "in-place" in err, err
    assert kernel.state["host"]["links"][7]["mtu"] == 9000


@pytest.mark.parametrize(
    ("code", "text"), [(errno.EACCES, "Permission denied"), (errno.EPERM, "Operation not permitted")]
)
def test_a_pod_namespace_the_hook_may_not_read_is_a_permission_problem_not_a_process_gone(
    world, monkeypatch, code, text
):
    """/proc/<pid>/ns/net of a process the hook may not ptrace fails with EACCES: the process is there."""
    denied = f"{world['procfs']}/{POD_PID}/ns/net"
    real_stat = os.stat

    def stat(path, *args, **kwargs):
        if os.fspath(path) == denied:
            raise PermissionError(code, text, denied)
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", stat)
    exit_code, err, before, kernel, _moved = run_in_process(world, monkeypatch, _case())
    assert exit_code == 1, err
    assert f"permission denied on {denied} ({text})" in err and "gone" not in err, err
    assert kernel.changes == 0 and kernel.state == before


@pytest.mark.parametrize("pid_1", ["missing", "denied"])
def test_pid_1s_namespace_unreadable_is_refused_not_taken_for_another_one(world, monkeypatch, tmp_path, pid_1):
    procfs = procfs_tree(tmp_path, {"self": "hook", "1": "host", str(POD_PID): "pod"})
    host = f"{procfs}/1/ns/net"
    kernel = fresh_kernel(procfs)
    if pid_1 == "missing":
        shutil.rmtree(f"{procfs}/1")
        why = "No such file or directory"
    else:
        real_stat = os.stat

        def stat(path, *args, **kwargs):
            if os.fspath(path) == host:
                raise PermissionError(errno.EACCES, "Permission denied", host)
            return real_stat(path, *args, **kwargs)

        monkeypatch.setattr(os, "stat", stat)
        why = "Permission denied"
    code, err, before, kernel, _moved = run_in_process(world, monkeypatch, _case(), kernel, procfs)
    assert code == 1, err
    assert f"cannot read the host's network namespace {host} ({why})" in err, err
    assert kernel.changes == 0 and kernel.state == before
