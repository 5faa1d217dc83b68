# SPDX-License-Identifier: Apache-2.0
"""The netdev hook under 10,000 generated command lines and OCI states, in-process.

Every run must end with exit status 0, 1 (a refusal or a failure, one line on
standard error) or 2 (a bad command line, argparse's message), never a
traceback; and a run that does not succeed must leave every network namespace
exactly as it found it. Real veths in namespaces would cost a namespace move
per example, so the netlink layer is the strict fake below; the same refusals
run on real veths in tests/integration/driver/aligned_dra_driver/test_netdev_hook.py.
"""

from __future__ import annotations

import contextlib
import copy
import errno
import io
import ipaddress
import json
import os
import shutil

import pytest
from aligned_dra_driver import netdev_hook
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.aligned.dra.tests import driver_harness as h

HOST_NIC = "aldnic0"  # the fixture NIC's name in the host (its sysfs entry)
POD_PID, HOST_NET_PID, GONE_PID = 4242, 77, 999
EXAMPLES = int(os.environ.get("ALIGNED_DRA_FUZZ_EXAMPLES", "10000"))


class FakeNetlinkError(Exception):
    """Raised like pyroute2's NetlinkError: (errno, message)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(code, message)
        self.code = code


class Msg(dict):
    def __init__(self, attrs: dict, **fields) -> None:
        super().__init__(**fields)
        self.attrs = attrs

    def get_attr(self, name):
        return self.attrs.get(name)


def _kernel_name_ok(name) -> bool:
    """The kernel's dev_valid_name: 1..15 bytes, not . or .., no / : or white space."""
    if not isinstance(name, str) or name in (".", ".."):
        return False
    raw = name.encode("utf-8", "surrogatepass")
    return 0 < len(raw) < 16 and not any(c in name for c in "/:") and not any(c.isspace() for c in name)


class FakeKernel:
    """TEST FAKE: network namespaces with links, addresses and routes, as strict as the kernel where the hook
    depends on it (tests only, never shipped).

    A namespace is named by a file (``<procfs>/<pid>/ns/net``); an fd or path is mapped to it by inode, as
    ``net_ns_fd`` works. Refused like the kernel: invalid or taken names (EINVAL, EEXIST), an MTU outside the
    link's min/max (EINVAL), a duplicate address (EEXIST), a route whose gateway is on no connected network of
    the link or of the other family (ENETUNREACH, EINVAL), a move onto a taken name (EEXIST). A move flushes the
    link's addresses and routes and leaves it down. ``fail_at`` makes the n-th changing call fail with EBUSY,
    standing in for the refusals a real NIC driver may add.
    """

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


class FakeIPRoute:
    """pyroute2.IPRoute's calls the hook makes, on a FakeKernel."""

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

    def get_addr(self, index):
        return [Msg({"IFA_ADDRESS": a}, prefixlen=p) for a, p in self._link(index)["addrs"]]

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
            link["up"] = kw["state"] == "up"
        if "net_ns_fd" in kw:
            target = self.kernel.key_of_inode(os.fstat(kw["net_ns_fd"]).st_ino)
            other = self.kernel.state[target]["links"]
            if any(item["name"] == link["name"] for item in other.values()):
                raise FakeNetlinkError(17, "File exists")
            del self.links[index]
            self.kernel.state[self.ns]["routes"] = [r for r in self.kernel.state[self.ns]["routes"] if r[0] != index]
            new_index = index if index not in other else max(other) + 1
            other[new_index] = {**link, "up": False, "addrs": []}

    def addr(self, command, index, address, prefixlen):
        assert command == "add"
        link = self._link(index)
        self.kernel.change()
        if (address, prefixlen) in link["addrs"]:
            raise FakeNetlinkError(17, "File exists")
        ipaddress.ip_interface(f"{address}/{prefixlen}")
        link["addrs"].append((address, prefixlen))

    def route(self, command, dst, oif, gateway=None):
        assert command == "replace"
        link = self._link(oif)
        self.kernel.change()
        network = ipaddress.ip_network(dst)
        if not link["up"]:
            raise FakeNetlinkError(100, "Network is down")
        if gateway is not None:
            gw = ipaddress.ip_address(gateway)
            if gw.version != network.version:
                raise FakeNetlinkError(22, "Invalid argument")
            connected = [ipaddress.ip_interface(f"{a}/{p}").network for a, p in link["addrs"]]
            if not any(gw in net for net in connected if net.version == gw.version):
                raise FakeNetlinkError(101, "Network is unreachable")
        routes = [r for r in self.kernel.state[self.ns]["routes"] if r[1] != dst]
        self.kernel.state[self.ns]["routes"] = [*routes, (oif, dst, gateway)]


@pytest.fixture(scope="module")
def world():
    root = h.short_tmp()
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
    assert link["mtu"] == 9000 and ("10.77.0.2", 24) in link["addrs"] and moved_rdma == ["mlx5_0"]
    assert len(kernel.state["pod"]["routes"]) == 2


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
