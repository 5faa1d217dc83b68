# SPDX-License-Identifier: Apache-2.0
"""The driver installed in host mode on a podman node, then upgraded and removed.

The tests run in file order and build on each other, as a node's life does:
install checks, a claim prepared over the DRA socket, an upgrade to a rebuilt
wheel that must keep that claim, and removal (refused while the claim is
prepared, then forced). gRPC calls run inside the node with the driver's own
venv Python, so they use the node's real Unix sockets; the claim lives in the
strict fake API server that prepare.yml started on the controller.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import urllib.request
from pathlib import Path

import pytest

DRIVER = "dra.aligned.dev"
NODE = "drv-node1"
GPU = "gpu-0000-1a-00-0"
GPU_UUID = "GPU-94ce9b47-c533-4f91-9e9f-a73fd579171e"  # dgx-h100 snapshot, minor 0
VENV_PY = "/opt/aligned-dra/venv/bin/python"
REG_SOCK = f"/var/lib/kubelet/plugins_registry/{DRIVER}-reg.sock"
DRA_SOCK = f"/var/lib/kubelet/plugins/{DRIVER}/dra.sock"
STATE = "/var/lib/aligned-dra/checkpoint.json"
CDI_DIR = "/var/run/cdi"
CLAIM, NAMESPACE = "molecule-gpu", "default"

PROJECT = Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY", Path(__file__).resolve().parents[3]))
EPHEMERAL = Path(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "/nonexistent"))
INVENTORY = Path(os.environ.get("MOLECULE_INVENTORY_FILE", EPHEMERAL / "inventory" / "x")).parent

# Runs in the node: GetInfo on the registration socket, or NodePrepareResources
# on the DRA socket; prints the answer as JSON.
CLIENT = """
import json, sys
import grpc
from google.protobuf.json_format import MessageToDict
from aligned_dra_driver.proto import dra_v1_pb2, dra_v1_pb2_grpc, registration_pb2, registration_pb2_grpc
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


def checkpoint(host):
    return json.loads(host.file(STATE).content_string)


def main_pid(host):
    return host.run("systemctl show -p MainPID --value aligned-dra-driver.service").stdout.strip()


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


def test_service_enabled_and_active(host):
    service = host.service("aligned-dra-driver.service")
    assert service.is_enabled
    assert service.is_running


def test_sockets_owner_and_mode(host):
    for path in (REG_SOCK, DRA_SOCK):
        sock = host.file(path)
        assert sock.is_socket, path
        assert (sock.user, sock.group, sock.mode) == ("root", "root", 0o660), path
    plugin_dir = host.file(f"/var/lib/kubelet/plugins/{DRIVER}")
    assert (plugin_dir.user, plugin_dir.mode) == ("root", 0o700)
    assert host.file("/etc/aligned-dra/kubeconfig").mode == 0o600
    assert host.file("/var/lib/aligned-dra").mode == 0o700


def test_unit_is_hardened(host):
    show = host.run(
        "systemctl show -p User -p NoNewPrivileges -p ProtectSystem -p CapabilityBoundingSet aligned-dra-driver.service"
    ).stdout
    assert "NoNewPrivileges=yes" in show
    assert "ProtectSystem=strict" in show
    assert "CapabilityBoundingSet=cap_net_admin" in show


def test_get_info_over_the_registration_socket(host):
    info = grpc_call(host, "info", REG_SOCK)
    assert info["type"] == "DRAPlugin"
    assert info["name"] == DRIVER
    assert info["endpoint"] == DRA_SOCK
    assert "v1.DRAPlugin" in info["supportedVersions"]


def test_devices_published_for_the_node():
    status, slices = api("GET", f"/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName%3D{NODE}")
    assert status == 200
    names = [device["name"] for item in slices["items"] for device in item["spec"]["devices"]]
    assert GPU in names
    assert sum(name.startswith("gpu-") for name in names) == 8


# -- a claim prepared over the DRA socket --------------------------------------


def test_prepare_writes_cdi_spec_and_checkpoint(host):
    path = f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaims"
    api("DELETE", f"{path}/{CLAIM}")  # a server kept from an earlier run
    status, claim = api(
        "POST",
        path,
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": CLAIM, "namespace": NAMESPACE},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "aligned-gpu"}}]}},
        },
    )
    assert status == 201, claim
    allocation = {
        "devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": NODE, "device": GPU}]},
        "nodeSelector": {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [NODE]}]}]
        },
    }
    status, claim = api(
        "PATCH", f"{path}/{CLAIM}/status", {"status": {"allocation": allocation}}, "application/merge-patch+json"
    )
    assert status == 200, claim
    uid = claim["metadata"]["uid"]

    answer = grpc_call(host, "prepare", DRA_SOCK, json.dumps([{"namespace": NAMESPACE, "name": CLAIM, "uid": uid}]))
    result = answer["claims"][uid]
    assert "error" not in result, result
    assert [d["deviceName"] for d in result["devices"]] == [GPU]
    cdi_ids = result["devices"][0]["cdiDeviceIds"]
    assert cdi_ids[0].startswith("aligned.dev/claim=")

    spec = json.loads(host.file(f"{CDI_DIR}/aligned.dev-claim_{uid}.json").content_string)
    assert spec["kind"] == "aligned.dev/claim"
    assert spec["cdiVersion"] == "0.5.0"
    edits = spec["devices"][0]["containerEdits"]
    assert edits["deviceNodes"][0] == {"path": "/dev/nvidia0", "hostPath": "/srv/fixture-dev/nvidia0"}
    assert f"NVIDIA_VISIBLE_DEVICES={GPU_UUID}" in edits["env"]
    assert f"aligned.dev/claim={spec['devices'][0]['name']}" == cdi_ids[0]

    entry = checkpoint(host)["claims"][uid]
    assert (entry["namespace"], entry["name"]) == (NAMESPACE, CLAIM)


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
    before = checkpoint(host)["claims"]
    assert len(before) == 1, "the prepare test must run first"
    uid = next(iter(before))
    spec_path = f"{CDI_DIR}/aligned.dev-claim_{uid}.json"
    spec_before = host.file(spec_path).content_string
    pid_before = main_pid(host)
    version_before = installed_version(host)

    target, version = rebuilt_collection(EPHEMERAL / "upgrade")
    # Check mode shows the upgrade and leaves the running driver alone.
    check = playbook(str(target / "playbooks" / "driver.yml"), "--check", collections=EPHEMERAL / "upgrade")
    assert check.returncode == 0, check.output[-3000:]
    assert recap(check)["changed"] >= 1
    assert (installed_version(host), main_pid(host)) == (version_before, pid_before)

    proc = playbook(str(target / "playbooks" / "driver.yml"), collections=EPHEMERAL / "upgrade")
    assert proc.returncode == 0, proc.output[-3000:]
    assert recap(proc)["changed"] >= 1
    assert "Install the driver and its pinned dependencies" in proc.output

    assert installed_version(host) == version != version_before
    assert main_pid(host) not in ("0", pid_before), "the service was not restarted"
    assert host.service("aligned-dra-driver.service").is_running
    assert host.file(REG_SOCK).is_socket
    # The new process took the checkpoint over: the claim and its CDI spec are still there.
    assert checkpoint(host)["claims"] == before
    assert host.file(spec_path).content_string == spec_before
    # The kubelet prepares it again after a restart: the same answer, nothing lost.
    answer = grpc_call(host, "prepare", DRA_SOCK, json.dumps([{"namespace": NAMESPACE, "name": CLAIM, "uid": uid}]))
    assert [d["deviceName"] for d in answer["claims"][uid]["devices"]] == [GPU]


# -- removal -------------------------------------------------------------------


def test_remove_is_refused_while_a_claim_is_prepared(host):
    proc = playbook(str(PROJECT / "playbooks" / "driver.yml"), "-e", "aligned_dra_driver_state=absent")
    assert proc.returncode != 0
    assert f"1 claim(s) are still prepared by the driver: {NAMESPACE}/{CLAIM}" in proc.output
    assert host.service("aligned-dra-driver.service").is_running
    assert host.file(DRA_SOCK).is_socket


@pytest.mark.parametrize("attempt", ["forced", "again"])
def test_forced_remove_cleans_up(host, attempt):
    proc = playbook(
        str(PROJECT / "playbooks" / "driver.yml"),
        "-e",
        "aligned_dra_driver_state=absent",
        "-e",
        "aligned_dra_driver_force=true",
    )
    assert proc.returncode == 0, proc.output[-3000:]
    assert (recap(proc)["changed"] > 0) == (attempt == "forced"), proc.output[-3000:]
    assert not host.file("/etc/systemd/system/aligned-dra-driver.service").exists
    assert host.run("systemctl is-active aligned-dra-driver.service").stdout.strip() in ("inactive", "unknown")
    for path in (
        REG_SOCK,
        f"/var/lib/kubelet/plugins/{DRIVER}",
        "/opt/aligned-dra",
        "/etc/aligned-dra",
        "/var/lib/aligned-dra",
        "/etc/tmpfiles.d/aligned-dra-driver.conf",
    ):
        assert not host.file(path).exists, path
    assert host.run(f"ls {CDI_DIR}").stdout.split() == []
    processes = host.run("for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done").stdout
    assert "venv/bin/aligned-dra-driver" not in processes
