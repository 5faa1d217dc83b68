# SPDX-License-Identifier: Apache-2.0
"""The driver installed in host mode on a podman node, split by kind, then upgraded and removed.

The site sets aligned_dra_device_options.split_gpu_driver: two kubelet plugins
run on the node, the GPUs under gpu.aligned.dev and the NICs under
dra.aligned.dev. The tests run in file order and build on each other, as a
node's life does: install checks of both plugins and what each publishes, a
claim with a GPU of one and a NIC of the other prepared over both DRA sockets,
an upgrade to a rebuilt wheel that must keep that claim in both, and removal
(refused while the claim is prepared, then forced). gRPC calls run inside the
node with the driver's own venv Python, so they use the node's real Unix
sockets; the claim lives in the strict fake API server that prepare.yml
started on the controller.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

DRIVER = "dra.aligned.dev"  # the main plugin: NICs and VFs
GPU_DRIVER = "gpu.aligned.dev"  # the GPU plugin (molecule.yml's split_gpu_driver): GPUs and accelerators
DRIVERS = (DRIVER, GPU_DRIVER)
UNITS = {DRIVER: "aligned-dra-driver.service", GPU_DRIVER: "aligned-dra-driver-gpu.service"}
NODE = "drv-node1"
GPU = "gpu-0000-1a-00-0"
GPU_UUID = "GPU-94ce9b47-c533-4f91-9e9f-a73fd579171e"  # dgx-h100 snapshot, minor 0
NIC = "nic-0000-1d-00-0"  # the ConnectX on the GPU's PCIe root (mlx5_0, uverbs0)
VENV_PY = "/opt/aligned-dra/venv/bin/python"
STATES = {DRIVER: "/var/lib/aligned-dra/checkpoint.json", GPU_DRIVER: "/var/lib/aligned-dra/gpu/checkpoint.json"}
CDI_DIR = "/var/run/cdi"
CLAIM, NAMESPACE = "molecule-gpu-nic", "default"


def reg_sock(driver):
    return f"/var/lib/kubelet/plugins_registry/{driver}-reg.sock"


def dra_sock(driver):
    return f"/var/lib/kubelet/plugins/{driver}/dra.sock"


def spec_path(driver, uid):
    """The driver names its CDI specs by its driver name (the default name keeps the name of earlier releases)."""
    return (
        f"{CDI_DIR}/aligned.dev-claim_{uid}.json"
        if driver == DRIVER
        else f"{CDI_DIR}/aligned.dev-claim-{driver}_{uid}.json"
    )


PROJECT = Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY", Path(__file__).resolve().parents[3]))
EPHEMERAL = Path(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "/nonexistent"))
INVENTORY = Path(os.environ.get("MOLECULE_INVENTORY_FILE", EPHEMERAL / "inventory" / "x")).parent

# Runs in the node: GetInfo on the registration socket, or NodePrepareResources
# on the DRA socket; prints the answer as JSON.
CLIENT = """
import json, sys
import grpc
from google.protobuf.json_format import MessageToDict
from aligned_dra_driver.kubelet.proto import dra_v1_pb2, dra_v1_pb2_grpc, registration_pb2, registration_pb2_grpc
call, sock = sys.argv[1], sys.argv[2]
channel = grpc.insecure_channel("unix://" + sock)
if call == "info":
    answer = registration_pb2_grpc.RegistrationStub(channel).GetInfo(registration_pb2.InfoRequest(), timeout=10)
else:
    claims = [dra_v1_pb2.Claim(**c) for c in json.loads(sys.argv[3])]
    answer = dra_v1_pb2_grpc.DRAPluginStub(channel).NodePrepareResources(
        dra_v1_pb2.NodePrepareResourcesRequest(claims=claims), timeout=45)
print(json.dumps(MessageToDict(answer)))
"""


def grpc_call(host, call, sock, *args):
    result = host.run(" ".join(["%s"] * (5 + len(args))), VENV_PY, "-c", CLIENT, call, sock, *args)
    assert result.rc == 0, result.stderr
    return json.loads(result.stdout)


def api(method, path, body=None, content_type="application/json"):
    url = (EPHEMERAL / "apiserver" / "url").read_text().strip()
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url + path, data=data, method=method, headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def checkpoint(host, driver=DRIVER):
    return json.loads(host.file(STATES[driver]).content_string)


def main_pid(host, driver=DRIVER):
    return host.run(f"systemctl show -p MainPID --value {UNITS[driver]}").stdout.strip()


def node_slices(until, deadline=60.0):
    """The node's ResourceSlices by driver, asked until ``until(slices)`` holds (the deadline only bounds a failure)."""
    end = time.monotonic() + deadline
    while True:
        status, found = api("GET", f"/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName%3D{NODE}")
        assert status == 200, found
        by_driver = {}
        for item in found["items"]:
            by_driver.setdefault(item["spec"]["driver"], []).extend(d["name"] for d in item["spec"]["devices"])
        if until(by_driver) or time.monotonic() > end:
            return by_driver
        time.sleep(0.5)


def playbook(*args, collections=None):
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    if collections:
        env["ANSIBLE_COLLECTIONS_PATH"] = os.pathsep.join([str(collections), env.get("ANSIBLE_COLLECTIONS_PATH", "")])
    proc = subprocess.run(
        ["ansible-playbook", "-i", str(INVENTORY), *args], capture_output=True, text=True, check=False, env=env
    )
    proc.output = " ".join((proc.stdout + proc.stderr).split())
    return proc


def recap(proc):
    found = re.search(rf"{NODE}\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", proc.output)
    assert found, proc.output[-3000:]
    return {
        key: int(value) for key, value in zip(("ok", "changed", "unreachable", "failed"), found.groups(), strict=True)
    }


# -- installed ----------------------------------------------------------------


@pytest.mark.parametrize("driver", DRIVERS)
def test_service_enabled_and_active(host, driver):
    service = host.service(UNITS[driver])
    assert service.is_enabled
    assert service.is_running


@pytest.mark.parametrize("driver", DRIVERS)
def test_sockets_owner_and_mode(host, driver):
    for path in (reg_sock(driver), dra_sock(driver)):
        sock = host.file(path)
        assert sock.is_socket, path
        assert (sock.user, sock.group, sock.mode) == ("root", "root", 0o660), path
    plugin_dir = host.file(f"/var/lib/kubelet/plugins/{driver}")
    assert (plugin_dir.user, plugin_dir.mode) == ("root", 0o700)
    assert host.file("/etc/aligned-dra/kubeconfig").mode == 0o600
    # each plugin its own state directory (the GPU plugin's below the main one's)
    assert host.file(os.path.dirname(STATES[driver])).mode == 0o700
    assert checkpoint(host, driver)["driver"] == driver


@pytest.mark.parametrize("driver", DRIVERS)
def test_unit_is_hardened(host, driver):
    show = host.run(
        f"systemctl show -p User -p NoNewPrivileges -p ProtectSystem -p CapabilityBoundingSet {UNITS[driver]}"
    ).stdout
    assert "NoNewPrivileges=yes" in show
    assert "ProtectSystem=strict" in show
    assert "CapabilityBoundingSet=cap_net_admin" in show


@pytest.mark.parametrize("driver", DRIVERS)
def test_get_info_over_the_registration_socket(host, driver):
    info = grpc_call(host, "info", reg_sock(driver))
    assert info["type"] == "DRAPlugin"
    assert info["name"] == driver
    assert info["endpoint"] == dra_sock(driver)
    assert "v1.DRAPlugin" in info["supportedVersions"]


def test_each_plugin_publishes_only_its_kinds():
    slices = node_slices(lambda found: GPU in found.get(GPU_DRIVER, []) and NIC in found.get(DRIVER, []))
    assert set(slices) == set(DRIVERS), slices
    # KAI Scheduler counts the devices of drivers whose name contains "gpu": the GPUs, and only they
    assert all(name.startswith(("gpu-", "acc-")) for name in slices[GPU_DRIVER]), slices[GPU_DRIVER]
    assert sum(name.startswith("gpu-") for name in slices[GPU_DRIVER]) == 8
    assert slices[DRIVER] and all(name.startswith(("nic-", "vf-")) for name in slices[DRIVER]), slices[DRIVER]
    assert NIC in slices[DRIVER]


# -- a claim with a GPU of one plugin and a NIC of the other, prepared over both DRA sockets ----


def prepare(host, driver, uid):
    answer = grpc_call(
        host, "prepare", dra_sock(driver), json.dumps([{"namespace": NAMESPACE, "name": CLAIM, "uid": uid}])
    )
    result = answer["claims"][uid]
    assert "error" not in result, (driver, result)
    return result


def test_prepare_a_claim_across_both_plugins_writes_each_ones_cdi_spec_and_checkpoint(host):
    path = f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaims"
    api("DELETE", f"{path}/{CLAIM}")  # a server kept from an earlier run
    requests = [
        {"name": "gpu", "exactly": {"deviceClassName": "aligned-gpu"}},
        {"name": "nic", "exactly": {"deviceClassName": "aligned-nic"}},
    ]
    status, claim = api(
        "POST",
        path,
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": CLAIM, "namespace": NAMESPACE},
            "spec": {"devices": {"requests": requests}},
        },
    )
    assert status == 201, claim
    # as the scheduler allocates an aligned pair: the GPU from the GPU driver's slice, its NIC from the main one's
    results = [
        {"request": "gpu", "driver": GPU_DRIVER, "pool": NODE, "device": GPU},
        {"request": "nic", "driver": DRIVER, "pool": NODE, "device": NIC},
    ]
    allocation = {
        "devices": {"results": results},
        "nodeSelector": {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [NODE]}]}]
        },
    }
    status, claim = api(
        "PATCH", f"{path}/{CLAIM}/status", {"status": {"allocation": allocation}}, "application/merge-patch+json"
    )
    assert status == 200, claim
    uid = claim["metadata"]["uid"]

    # the kubelet calls each driver of the claim's results; each prepares only its own devices
    gpu_result, nic_result = prepare(host, GPU_DRIVER, uid), prepare(host, DRIVER, uid)
    assert [d["deviceName"] for d in gpu_result["devices"]] == [GPU]
    assert [d["deviceName"] for d in nic_result["devices"]] == [NIC]
    gpu_ids, nic_ids = gpu_result["devices"][0]["cdiDeviceIds"], nic_result["devices"][0]["cdiDeviceIds"]
    assert gpu_ids[0].startswith("aligned.dev/claim=") and nic_ids[0].startswith("aligned.dev/claim=")
    assert gpu_ids[0] != nic_ids[0]  # one container gets both: the CDI names must not clash

    gpu_spec = json.loads(host.file(spec_path(GPU_DRIVER, uid)).content_string)
    assert gpu_spec["kind"] == "aligned.dev/claim"
    assert gpu_spec["cdiVersion"] == "0.5.0"
    edits = gpu_spec["devices"][0]["containerEdits"]
    assert edits["deviceNodes"][0] == {"path": "/dev/nvidia0", "hostPath": "/srv/fixture-dev/nvidia0"}
    assert f"NVIDIA_VISIBLE_DEVICES={GPU_UUID}" in edits["env"]
    assert f"aligned.dev/claim={gpu_spec['devices'][0]['name']}" == gpu_ids[0]

    nic_spec = json.loads(host.file(spec_path(DRIVER, uid)).content_string)
    (nic_device,) = nic_spec["devices"]
    assert f"aligned.dev/claim={nic_device['name']}" == nic_ids[0]
    nodes = nic_device["containerEdits"]["deviceNodes"]
    assert {"path": "/dev/infiniband/uverbs0", "hostPath": "/srv/fixture-dev/infiniband/uverbs0"} in nodes
    # the NIC moves into the pod through the netdev hook, when the runtime creates the container
    assert nic_device["containerEdits"]["hooks"][0]["hookName"] == "createRuntime"

    for driver, device in ((GPU_DRIVER, GPU), (DRIVER, NIC)):
        entry = checkpoint(host, driver)["claims"][uid]
        assert (entry["namespace"], entry["name"]) == (NAMESPACE, CLAIM)
        assert [d["device"] for d in entry["devices"]] == [device], driver


# -- upgrade to a rebuilt wheel ------------------------------------------------


def rebuilt_collection(root):
    """A copy of the collection whose driver has a higher version: a new release, built from source."""
    target = root / "ansible_collections" / "aligned" / "dra"
    shutil.rmtree(root, ignore_errors=True)
    target.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "build", "dist", "*.egg-info")
    for name in ("galaxy.yml", "meta", "plugins", "roles", "playbooks", "driver"):
        source = PROJECT / name
        if source.is_dir():
            shutil.copytree(source, target / name, ignore=ignore)
        else:
            shutil.copy2(source, target / name)
    pyproject = target / "driver" / "pyproject.toml"
    text = pyproject.read_text()
    old = re.search(r'(?m)^version = "([^"]+)"$', text).group(1)
    assert ".post" not in old, f"bump rule needs a plain release version, got {old}"
    pyproject.write_text(text.replace(f'version = "{old}"', f'version = "{old}.post1"', 1))
    return target, f"{old}.post1"


def installed_version(host):
    result = host.run("%s -c %s", VENV_PY, "import importlib.metadata as m; print(m.version('aligned-dra-driver'))")
    assert result.rc == 0, result.stderr
    return result.stdout.strip()


def test_upgrade_to_a_rebuilt_wheel_keeps_the_claim(host):
    before = {driver: checkpoint(host, driver)["claims"] for driver in DRIVERS}
    assert all(len(claims) == 1 for claims in before.values()), "the prepare test must run first"
    uid = next(iter(before[DRIVER]))
    specs_before = {driver: host.file(spec_path(driver, uid)).content_string for driver in DRIVERS}
    pids_before = {driver: main_pid(host, driver) for driver in DRIVERS}
    version_before = installed_version(host)

    target, version = rebuilt_collection(EPHEMERAL / "upgrade")
    # Check mode shows the upgrade and leaves the running driver alone.
    check = playbook(str(target / "playbooks" / "driver.yml"), "--check", collections=EPHEMERAL / "upgrade")
    assert check.returncode == 0, check.output[-3000:]
    assert recap(check)["changed"] >= 1
    assert (installed_version(host), {driver: main_pid(host, driver) for driver in DRIVERS}) == (
        version_before,
        pids_before,
    )

    proc = playbook(str(target / "playbooks" / "driver.yml"), collections=EPHEMERAL / "upgrade")
    assert proc.returncode == 0, proc.output[-3000:]
    assert recap(proc)["changed"] >= 1
    assert "Install the driver and its pinned dependencies" in proc.output

    assert installed_version(host) == version != version_before
    for driver, device in ((DRIVER, NIC), (GPU_DRIVER, GPU)):
        assert main_pid(host, driver) not in ("0", pids_before[driver]), f"{UNITS[driver]} was not restarted"
        assert host.service(UNITS[driver]).is_running
        assert host.file(reg_sock(driver)).is_socket
        # The new process took its checkpoint over: the claim and its CDI spec are still there.
        assert checkpoint(host, driver)["claims"] == before[driver]
        assert host.file(spec_path(driver, uid)).content_string == specs_before[driver]
        # The kubelet prepares it again after a restart: the same answer, nothing lost.
        assert [d["deviceName"] for d in prepare(host, driver, uid)["devices"]] == [device]


# -- removal -------------------------------------------------------------------


def test_remove_is_refused_while_a_claim_is_prepared(host):
    proc = playbook(str(PROJECT / "playbooks" / "driver.yml"), "-e", "aligned_dra_driver_state=absent")
    assert proc.returncode != 0
    # one claim, in both plugins' checkpoints
    assert f"1 claim(s) are still prepared by the driver: {NAMESPACE}/{CLAIM}" in proc.output
    for driver in DRIVERS:
        assert host.service(UNITS[driver]).is_running
        assert host.file(dra_sock(driver)).is_socket


def test_forced_remove_cleans_up(host):
    """Forced removal takes everything off the node (a second removal changing nothing is the removal role test's)."""
    proc = playbook(
        str(PROJECT / "playbooks" / "driver.yml"),
        "-e",
        "aligned_dra_driver_state=absent",
        "-e",
        "aligned_dra_driver_force=true",
    )
    assert proc.returncode == 0, proc.output[-3000:]
    assert recap(proc)["changed"] > 0, proc.output[-3000:]
    for driver in DRIVERS:
        assert not host.file(f"/etc/systemd/system/{UNITS[driver]}").exists
        assert host.run(f"systemctl is-active {UNITS[driver]}").stdout.strip() in ("inactive", "unknown")
    for path in (
        *(reg_sock(driver) for driver in DRIVERS),
        *(f"/var/lib/kubelet/plugins/{driver}" for driver in DRIVERS),
        "/opt/aligned-dra",
        "/etc/aligned-dra",
        "/var/lib/aligned-dra",
        "/etc/tmpfiles.d/aligned-dra-driver.conf",
    ):
        assert not host.file(path).exists, path
    assert host.run(f"ls {CDI_DIR}").stdout.split() == []
    processes = host.run("for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done").stdout
    assert "venv/bin/aligned-dra-driver" not in processes
