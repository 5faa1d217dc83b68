# SPDX-License-Identifier: Apache-2.0
"""Two nodes, two rails: pods holding rail-0 NICs on different nodes reach each other, a rail-1 pod does not.

The tests run in file order and build on each other, as the life of a job's
pods does: the rails the drivers publish, three NIC claims allocated from
those slices and prepared over the nodes' DRA sockets, a "pod" per claim
that takes its NIC through the CDI createRuntime hook, pings between the
pods, and the claims unprepared with the NICs back on their nodes.

A pod is a process in a network namespace of its own (``unshare --net``)
inside its node, and its NIC comes to it as a runtime brings it: the hook of
the CDI spec the driver wrote runs with the spec's path and argv and the OCI
state (the pod's pid) on standard input. Real podman inside the nodes is not
an option: the node image has no container runtime, and nesting one would
test the nesting more than the hook. Where the fixture tree must change as
the kernel's sysfs would (an interface leaving the node, and coming back),
the test does it (``leaves``, ``comes_back``); the network itself is real:
veths on one host bridge per rail (create.yml).
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import testinfra
import yaml

DRIVER = "dra.aligned.dev"
RAIL = f"{DRIVER}/rail"
NODES = ("rails-node1", "rails-node2")
NAMESPACE = "default"
VENV_PY = "/opt/aligned-dra/venv/bin/python"
DRA_SOCK = f"/var/lib/kubelet/plugins/{DRIVER}/dra.sock"
CDI_DIR = "/var/run/cdi"
SYSFS = "/fixture/sys"
AWAY = "/fixture/away"  # where a moved interface's sysfs entries wait (the kernel hides them per netns)
METRICS = "http://127.0.0.1:8089/metrics"  # the role's default port: each node has its own network namespace

SCENARIO = Path(__file__).resolve().parents[1]
RAILS = yaml.safe_load((SCENARIO / "vars" / "rails.yml").read_text())["rails_networks"]
EXPECTED = {rail["pci_address"]: index for index, rail in enumerate(RAILS)}  # PCI address -> rail
EPHEMERAL = Path(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "/nonexistent"))

# name -> (node, rail): A and B hold rail 0 on different nodes, C holds rail 1 beside B
CLAIMS = {"rail0-a": ("rails-node1", 0), "rail0-b": ("rails-node2", 0), "rail1-c": ("rails-node2", 1)}
# what the tests found out, for the tests after them: claim name -> uid, device, pid, ...
STATE: dict[str, dict] = {}

# Runs in the node with the driver's venv: NodePrepareResources or NodeUnprepareResources.
CLIENT = """
import json, sys
import grpc
from google.protobuf.json_format import MessageToDict
from aligned_dra_driver.kubelet.proto import dra_v1_pb2, dra_v1_pb2_grpc
call, claims = sys.argv[1], [dra_v1_pb2.Claim(**c) for c in json.loads(sys.argv[2])]
stub = dra_v1_pb2_grpc.DRAPluginStub(grpc.insecure_channel("unix://" + sys.argv[3]))
if call == "prepare":
    answer = stub.NodePrepareResources(dra_v1_pb2.NodePrepareResourcesRequest(claims=claims), timeout=45)
else:
    answer = stub.NodeUnprepareResources(dra_v1_pb2.NodeUnprepareResourcesRequest(claims=claims), timeout=45)
print(json.dumps(MessageToDict(answer)))
"""

# Runs in the node: one CDI hook as runc runs it (execve of path with args, args[0] as argv[0], the
# hook's env only, the OCI state on standard input, killed at its timeout).
RUN_HOOK = """
import json, subprocess, sys
hook, state = json.loads(sys.argv[1]), sys.argv[2]
env = dict(item.split("=", 1) for item in hook.get("env") or [])
proc = subprocess.run(hook["args"], executable=hook["path"], input=state.encode(), env=env,
                      capture_output=True, timeout=hook.get("timeout") or 30)
sys.stdout.write(proc.stderr.decode())
sys.exit(proc.returncode)
"""

# Runs in a pod's network namespace: ICMP echo to one address, as ping does; prints what came back.
PING = """
import json, os, socket, struct, sys, time
dst, count, timeout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
def checksum(data):
    data += bytes(len(data) % 2)
    total = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    total = (total >> 16) + (total & 0xFFFF)
    return ~(total + (total >> 16)) & 0xFFFF
ident, replies, errors = os.getpid() & 0xFFFF, 0, []
with socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP) as sock:
    for seq in range(1, count + 1):
        body = struct.pack("!BBHHH", 8, 0, 0, ident, seq) + b"aligned-dra-rails"
        packet = body[:2] + struct.pack("!H", checksum(body)) + body[4:]
        try:
            sock.sendto(packet, (dst, 0))
        except OSError as exc:
            errors.append(exc.strerror)
            continue
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            sock.settimeout(max(deadline - time.monotonic(), 0.001))
            try:
                data = sock.recv(2048)
            except socket.timeout:
                break
            start = (data[0] & 0x0F) * 4
            kind, _code, _sum, who, got = struct.unpack("!BBHHH", data[start:start + 8])
            if kind == 0 and (who, got) == (ident, seq):
                replies += 1
                break
print(json.dumps({"sent": count, "replies": replies, "errors": errors}))
"""


def node(name: str):
    return testinfra.get_host(f"podman://{name}")


def run(host, *argv: str):
    result = host.run(" ".join(["%s"] * len(argv)), *argv)
    assert result.rc == 0, f"{' '.join(argv[:3])}: {result.stdout} {result.stderr}"
    return result.stdout


def api(method: str, path: str, body: dict | None = None, content_type: str = "application/json"):
    url = (EPHEMERAL / "apiserver" / "url").read_text().strip()
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url + path, data=data, method=method, headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def wait_for(what: str, answer, timeout: float = 45.0):
    """Ask ``answer()`` until it is truthy (an answer, polled; never a bare sleep); fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        got = answer()
        if got:
            return got
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: no answer within {timeout:.0f} s")
        time.sleep(0.5)


def published(node_name: str) -> dict[str, dict]:
    """The node's devices in its ResourceSlices, by name."""
    status, slices = api("GET", f"/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName%3D{node_name}")
    assert status == 200, slices
    return {device["name"]: device for item in slices["items"] for device in item["spec"]["devices"]}


def rails_of(devices: dict[str, dict]) -> dict[str, int | None]:
    """PCI address -> published rail (None: no rail attribute) of every device."""
    return {
        d["attributes"]["resource.kubernetes.io/pciBusID"]["string"]: (d["attributes"].get(RAIL) or {}).get("int")
        for d in devices.values()
    }


def rails_published(node_name: str) -> dict | None:
    devices = published(node_name)
    found = rails_of(devices)
    wanted = {bdf: rail for bdf, rail in found.items() if bdf in EXPECTED}
    return devices if wanted == EXPECTED else None


def ping(host, pid: int | None, address: str, count: int = 3, timeout: float = 2.0) -> dict:
    """ICMP echo from the pod's network namespace (or the node's: ``pid`` None)."""
    prefix = ["nsenter", "-t", str(pid), "-n"] if pid else []
    return json.loads(run(host, *prefix, "python3", "-c", PING, address, str(count), str(timeout)))


def addresses(host, pid: int | None, ifname: str) -> tuple[list[str], list[str], bool]:
    """(IPv4 addresses, IPv4 routes, up) of an interface, in the node's namespace or in the pod's."""
    prefix = ["nsenter", "-t", str(pid), "-n"] if pid else []
    links = json.loads(run(host, *prefix, "ip", "-j", "-4", "addr", "show", "dev", ifname))
    routes = json.loads(run(host, *prefix, "ip", "-j", "-4", "route", "show", "dev", ifname))
    found = [f"{a['local']}/{a['prefixlen']}" for link in links for a in link["addr_info"]]
    up = bool(links) and "UP" in links[0]["flags"]
    return found, [r["dst"] for r in routes], up


def last_publication(host) -> float:
    """The driver's aligned_dra_last_publish_timestamp_seconds, asked in the node."""
    code = "import urllib.request,sys; print(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())"
    for line in run(host, "python3", "-c", code, METRICS).splitlines():
        if line.startswith("aligned_dra_last_publish_timestamp_seconds "):
            return float(line.split()[1])
    pytest.fail("the driver's metrics have no aligned_dra_last_publish_timestamp_seconds")


def publication_after(host, moment: float) -> float | None:
    published_at = last_publication(host)
    return published_at if published_at > moment else None


def scanned_after(host, moment: float, what: str) -> None:
    """Wait until the driver has published a scan that began after ``moment``.

    Scans and publications alternate in one thread (every --rescan-interval: 2 s in this scenario,
    or sooner on a uevent): the publication after the first one later than
    ``moment`` comes from a scan that began after it.
    """
    first = wait_for(f"{what}: a publication", lambda: publication_after(host, moment))
    wait_for(f"{what}: the publication after that", lambda: publication_after(host, first))


# -- the kernel's part: a moved interface leaves the node's sysfs and comes back --------------


def leaves(host, rail: dict) -> str:
    """Before the hook: the interface's class/net link goes, as the kernel hides it from the node.

    The probe finds interfaces through class/net; taking that link away first means
    that a scan between this and the move sees the NIC out of view (read as last
    seen), never in view without its addresses, which the kernel never shows. The
    function's net/ entry stays: the hook finds the interface there by PCI address.
    """
    link = f"{SYSFS}/class/net/{rail['interface']}"
    target = run(host, "readlink", link).strip()
    run(host, "rm", link)
    return target


def left(host, rail: dict) -> None:
    """After the hook moved it: the function's net/ entry goes too."""
    run(host, "mkdir", "-p", AWAY)
    run(host, "mv", f"{SYSFS}/bus/pci/devices/{rail['pci_address']}/net/{rail['interface']}", AWAY)


def comes_back(host, rail: dict, pid: int, target: str) -> None:
    """The pod ends: the kernel returns a physical NIC to the host's namespace (down, no addresses)."""
    run(host, "nsenter", "-t", str(pid), "-n", "ip", "link", "set", "dev", rail["interface"], "netns", "1")
    run(host, "mv", f"{AWAY}/{rail['interface']}", f"{SYSFS}/bus/pci/devices/{rail['pci_address']}/net/")
    run(host, "ln", "-s", target, f"{SYSFS}/class/net/{rail['interface']}")


# -- the rails in the published slices -------------------------------------------------------


@pytest.mark.parametrize("node_name", NODES)
def test_slices_carry_each_nics_rail(node_name):
    devices = wait_for(f"{node_name}: rails {EXPECTED} in the ResourceSlices", lambda: rails_published(node_name))
    rails = rails_of(devices)
    assert {bdf: rail for bdf, rail in rails.items() if bdf not in EXPECTED} == {
        "0000:18:00.0": None,  # GPUs are on no rail
        "0000:29:00.0": None,
    }
    for rail in RAILS:  # what the rule read: the NIC stand-in's address in the rail's subnet
        found, _routes, up = addresses(node(node_name), None, rail["interface"])
        assert found == [f"{rail['addresses'][node_name]}/21"] and up


# -- claims allocated from the slices and prepared on the nodes -----------------------------


def allocate(name: str, node_name: str, rail: int) -> None:
    """A claim for the NIC on ``rail``, allocated as the scheduler would from the node's slice."""
    device = next(
        d["name"] for d in published(node_name).values() if (d["attributes"].get(RAIL) or {}).get("int") == rail
    )
    path = f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaims"
    api("DELETE", f"{path}/{name}")  # a server kept from an earlier run
    selector = {"cel": {"expression": f'device.attributes["{DRIVER}"].rail == {rail}'}}
    request = {"name": "nic", "exactly": {"deviceClassName": "aligned-nic", "selectors": [selector]}}
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"devices": {"requests": [request]}},
    }
    status, created = api("POST", path, claim)
    assert status == 201, created
    allocation = {
        "devices": {"results": [{"request": "nic", "driver": DRIVER, "pool": node_name, "device": device}]},
        "nodeSelector": {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}]
        },
    }
    body = {"status": {"allocation": allocation}}
    status, patched = api("PATCH", f"{path}/{name}/status", body, "application/merge-patch+json")
    assert status == 200, patched
    STATE[name] = {"uid": patched["metadata"]["uid"], "device": device, "rail": RAILS[rail]}


def dra(host, call: str, name: str) -> dict:
    claims = [{"namespace": NAMESPACE, "name": name, "uid": STATE[name]["uid"]}]
    return json.loads(run(host, VENV_PY, "-c", CLIENT, call, json.dumps(claims), DRA_SOCK))


@pytest.mark.parametrize("name", CLAIMS)
def test_claim_prepared_with_the_nic_hook(name):
    node_name, rail = CLAIMS[name]
    allocate(name, node_name, rail)
    uid, host = STATE[name]["uid"], node(node_name)
    result = dra(host, "prepare", name)["claims"][uid]
    assert "error" not in result, result
    assert [d["deviceName"] for d in result["devices"]] == [STATE[name]["device"]]

    spec = json.loads(host.file(f"{CDI_DIR}/aligned.dev-claim_{uid}.json").content_string)
    (hook,) = [h for d in spec["devices"] for h in d["containerEdits"].get("hooks", [])]
    assert hook["hookName"] == "createRuntime"
    assert hook["path"] == "/opt/aligned-dra/venv/bin/aligned-dra-netdev-hook"
    args = hook["args"]
    assert args[args.index("--pci-address") + 1] == STATE[name]["rail"]["pci_address"]
    STATE[name]["hook"] = hook


# -- pods take their NICs through the hook ----------------------------------------------------


@pytest.mark.parametrize("name", CLAIMS)
def test_pod_takes_its_nic_through_the_hook(name):
    assert "hook" in STATE.get(name, {}), "the prepare test must run first"
    node_name, _rail = CLAIMS[name]
    host, rail = node(node_name), STATE[name]["rail"]
    unit = f"rails-pod-{name}"
    host.run("systemctl stop %s", f"{unit}.service")  # a pod left by an earlier run
    run(host, "systemd-run", f"--unit={unit}", "--collect", "--service-type=exec", "unshare", "--net", "sleep", "1d")
    pid = int(run(host, "systemctl", "show", "-p", "MainPID", "--value", f"{unit}.service"))
    assert pid > 0
    assert run(host, "readlink", f"/proc/{pid}/ns/net") != run(host, "readlink", "/proc/1/ns/net")
    run(host, "nsenter", "-t", str(pid), "-n", "ip", "link", "set", "lo", "up")  # what the runtime's CNI does
    STATE[name].update(pid=pid, unit=unit, sysfs_link=leaves(host, rail))

    state = {"ociVersion": "1.0.2", "id": unit, "status": "creating", "pid": pid, "bundle": f"/run/{unit}"}
    said = run(host, "python3", "-c", RUN_HOOK, json.dumps(STATE[name]["hook"]), json.dumps(state))
    left(host, rail)
    STATE[name]["moved_at"] = time.time()
    assert f"{rail['pci_address']} -> {rail['interface']}: moved" in said

    node_address = rail["addresses"][node_name]
    found, routes, up = addresses(host, pid, rail["interface"])
    assert (found, up) == ([f"{node_address}/21"], True), "the NIC's host address did not come along"
    assert rail["subnet"] in routes, "the route of the NIC's rail subnet did not come along"
    assert rail["interface"] not in run(host, "ip", "-br", "link")


# -- rails: who reaches whom -----------------------------------------------------------------


def rail_address(name: str) -> str:
    node_name, _rail = CLAIMS[name]
    return STATE[name]["rail"]["addresses"][node_name]


@pytest.mark.parametrize(("source", "target"), [("rail0-a", "rail0-b"), ("rail0-b", "rail0-a")])
def test_rail0_pods_on_two_nodes_reach_each_other(source, target):
    assert "pid" in STATE.get(source, {}) and "pid" in STATE.get(target, {}), "the pod tests must run first"
    answer = ping(node(CLAIMS[source][0]), STATE[source]["pid"], rail_address(target))
    assert answer["replies"] > 0, answer


def test_rail1_pod_reaches_neither_rail0_pod():
    c = STATE.get("rail1-c", {})
    assert "pid" in c, "the pod tests must run first"
    host, pid, interface = node("rails-node2"), c["pid"], c["rail"]["interface"]
    # its own rail works: node1's rail-1 NIC is still on node1's host side
    assert ping(host, pid, RAILS[1]["addresses"]["rails-node1"])["replies"] > 0
    for target in ("rail0-a", "rail0-b"):
        answer = ping(host, pid, rail_address(target), count=1)
        assert answer["replies"] == 0 and answer["errors"] == ["Network is unreachable"], answer
    # Even told that rail 0's subnet is on its link, it reaches nobody: rail 1's bridge does not carry rail 0.
    run(host, "nsenter", "-t", str(pid), "-n", "ip", "route", "add", RAILS[0]["subnet"], "dev", interface)
    for target in ("rail0-a", "rail0-b"):
        answer = ping(host, pid, rail_address(target), count=1, timeout=1.5)
        assert answer["replies"] == 0, answer
    # and the rail-0 pods do not reach it, B not even beside it on node 2
    for source in ("rail0-a", "rail0-b"):
        answer = ping(node(CLAIMS[source][0]), STATE[source]["pid"], rail_address("rail1-c"), count=1)
        assert answer["replies"] == 0 and answer["errors"] == ["Network is unreachable"], answer


@pytest.mark.parametrize("node_name", NODES)
def test_nics_in_pods_keep_their_rail(node_name):
    """A scan while the NICs are in pods (their addresses out of the node's view) publishes the same rails."""
    host = node(node_name)
    moved = [STATE[name].get("moved_at") for name, (where, _rail) in CLAIMS.items() if where == node_name]
    assert all(moved), "the pod tests must run first"
    scanned_after(host, max(moved), f"{node_name}: after the NICs moved")
    assert rails_published(node_name), rails_of(published(node_name))


# -- unprepared: the NICs are back on their nodes, with their addresses ----------------------


@pytest.mark.parametrize("name", CLAIMS)
def test_unprepare_gives_the_nic_back_with_its_addresses(name):
    assert "pid" in STATE.get(name, {}), "the pod tests must run first"
    node_name, _rail = CLAIMS[name]
    host, rail, pid = node(node_name), STATE[name]["rail"], STATE[name]["pid"]
    comes_back(host, rail, pid, STATE[name]["sysfs_link"])
    run(host, "systemctl", "stop", f"{STATE[name]['unit']}.service")

    answer = dra(host, "unprepare", name)
    STATE[name]["unprepared_at"] = time.time()
    assert answer["claims"][STATE[name]["uid"]] == {}, answer
    assert not host.file(f"{CDI_DIR}/aligned.dev-claim_{STATE[name]['uid']}.json").exists
    found, routes, up = addresses(host, None, rail["interface"])
    assert (found, up) == ([f"{rail['addresses'][node_name]}/21"], True)
    assert rail["subnet"] in routes


def test_nodes_reach_each_other_again_over_rail0():
    assert ping(node("rails-node1"), None, RAILS[0]["addresses"]["rails-node2"])["replies"] > 0


@pytest.mark.parametrize("node_name", NODES)
def test_slices_carry_the_rails_after_unprepare(node_name):
    """A scan after Unprepare (the NICs back, their addresses restored) publishes the rails again."""
    host = node(node_name)
    done = [STATE[name].get("unprepared_at") for name, (where, _rail) in CLAIMS.items() if where == node_name]
    assert all(done), "the unprepare tests must run first"
    scanned_after(host, max(done), f"{node_name}: after Unprepare")
    assert rails_published(node_name), rails_of(published(node_name))
