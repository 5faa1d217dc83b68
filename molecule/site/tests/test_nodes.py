# SPDX-License-Identifier: Apache-2.0
"""On every node after the whole rollout: VFs, driver service and sockets, a claim prepared over the DRA socket.

The GPU nodes run the driver in host mode; the CPU-only node has
``aligned_dra_driver_state: absent`` and must have nothing of it. Claims live
in the strict fake API server prepare.yml started on the controller; gRPC
calls run inside the node with the driver's own venv Python, so they go
through the node's real Unix sockets.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from pathlib import Path

import pytest

DRIVER = "dra.aligned.dev"
VENV_PY = "/opt/aligned-dra/venv/bin/python"
REG_SOCK = f"/var/lib/kubelet/plugins_registry/{DRIVER}-reg.sock"
DRA_SOCK = f"/var/lib/kubelet/plugins/{DRIVER}/dra.sock"
CDI_DIR = "/var/run/cdi"
PCI = "/fixture/sys/bus/pci/devices"
NAMESPACE = "default"
EPHEMERAL = Path(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "/nonexistent"))

# What molecule.yml asks of each node's SR-IOV PF, and where the fake kernel puts the VFs.
SRIOV = {
    "site-dgx": {
        "pf": "0000:5a:00.0",
        "numvfs": 4,
        "vfs": ["0000:5a:00.2", "0000:5a:00.3", "0000:5a:00.4", "0000:5a:00.5"],
    },
    "site-mi300x": {"pf": "0000:02:00.0", "numvfs": 2, "vfs": ["0000:02:00.1", "0000:02:00.2"]},
}
# The first GPU of each GPU node (MI300X: class 0x12, an "accelerator" device), the
# device node its CDI spec must hand on.
GPU = {
    "site-dgx": ("gpu-0000-1a-00-0", {"path": "/dev/nvidia0", "hostPath": "/srv/fixture-dev/nvidia0"}),
    "site-mi300x": ("acc-0000-01-00-0", {"path": "/dev/dri/renderD128", "hostPath": "/srv/fixture-dev/dri/renderD128"}),
}

# Runs in the node: NodePrepareResources on the DRA socket; prints the answer as JSON.
CLIENT = """
import json, sys
import grpc
from google.protobuf.json_format import MessageToDict
from aligned_dra_driver.kubelet.proto import dra_v1_pb2, dra_v1_pb2_grpc
channel = grpc.insecure_channel("unix://" + sys.argv[1])
claims = [dra_v1_pb2.Claim(**c) for c in json.loads(sys.argv[2])]
answer = dra_v1_pb2_grpc.DRAPluginStub(channel).NodePrepareResources(
    dra_v1_pb2.NodePrepareResourcesRequest(claims=claims), timeout=45)
print(json.dumps(MessageToDict(answer)))
"""


def name(host):
    return host.backend.get_hostname()


def api(method, path, body=None, content_type="application/json"):
    url = (EPHEMERAL / "apiserver" / "url").read_text().strip()
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url + path, data=data, method=method, headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def published(node):
    status, slices = api("GET", f"/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName%3D{node}")
    assert status == 200, slices
    return [device for item in slices["items"] for device in item["spec"]["devices"]]


@pytest.fixture
def gpu_node(host):
    if name(host) not in GPU:
        pytest.skip("GPU nodes only")
    return host


# -- RDMA and SR-IOV on the fake trees ------------------------------------------


def test_vfs_configured_in_the_fake_tree(host):
    want = SRIOV.get(name(host))
    if want is None:
        assert host.run(f"ls {PCI}/*/sriov_numvfs").rc != 0, "the CPU-only tree has no SR-IOV PF"
        assert not host.file("/etc/aligned-dra/sriov.json").exists or json.loads(
            host.file("/etc/aligned-dra/sriov.json").content_string
        ).get("pfs") in ([], None)
        return
    pf = f"{PCI}/{want['pf']}"
    assert host.file(f"{pf}/sriov_numvfs").content_string.strip() == str(want["numvfs"])
    for index, vf in enumerate(want["vfs"]):
        link = host.file(f"{pf}/virtfn{index}")
        assert link.is_symlink
        assert link.linked_to.endswith(vf), (index, link.linked_to)
        assert host.file(f"{PCI}/{vf}/physfn").is_symlink
    assert not host.file(f"{pf}/virtfn{want['numvfs']}").exists
    # The boot-time unit knows the desired state.
    state = json.loads(host.file("/etc/aligned-dra/sriov.json").content_string)
    assert state["sysfs_root"] == "/fixture/sys"
    assert host.service("aligned-dra-sriov.service").is_enabled


def test_rdma_settings_only_where_asked(host):
    options = host.file("/etc/modprobe.d/aligned-dra-rdma.conf")
    if name(host) == "site-cpu":
        assert not options.exists
        return
    assert options.contains("^options ib_core netns_mode=0$")
    modules = host.file("/etc/modules-load.d/aligned-dra-rdma.conf").content_string.splitlines()
    assert modules[1:] == {"site-dgx": ["ib_core", "mlx5_ib"], "site-mi300x": ["ib_core", "bnxt_re"]}[name(host)]


# -- the driver ------------------------------------------------------------------


def test_driver_service_only_on_gpu_nodes(host):
    service = host.service("aligned-dra-driver.service")
    if name(host) in GPU:
        assert service.is_enabled
        assert service.is_running
    else:
        assert not host.file("/etc/systemd/system/aligned-dra-driver.service").exists
        assert not host.file("/opt/aligned-dra").exists
        assert not host.file(REG_SOCK).exists
        assert published(name(host)) == []


def test_sockets_owner_and_mode(gpu_node):
    for path in (REG_SOCK, DRA_SOCK):
        sock = gpu_node.file(path)
        assert sock.is_socket, path
        assert (sock.user, sock.group, sock.mode) == ("root", "root", 0o660), path
    plugin_dir = gpu_node.file(f"/var/lib/kubelet/plugins/{DRIVER}")
    assert (plugin_dir.user, plugin_dir.mode) == ("root", 0o700)
    assert gpu_node.file("/etc/aligned-dra/kubeconfig").mode == 0o600


def test_published_devices_include_the_new_vfs(gpu_node):
    """The driver started after the network stage: it publishes the GPUs and the VFs that stage created."""
    devices = published(name(gpu_node))
    assert sum(d["name"].startswith(("gpu-", "acc-")) for d in devices) == 8
    bus_ids = {d["attributes"].get("resource.kubernetes.io/pciBusID", {}).get("string") for d in devices}
    assert set(SRIOV[name(gpu_node)]["vfs"]) <= bus_ids


def test_prepare_writes_the_cdi_spec(gpu_node):
    node = name(gpu_node)
    device, device_node = GPU[node]
    claim_name = f"{node}-gpu"
    path = f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaims"
    api("DELETE", f"{path}/{claim_name}")  # a server kept from an earlier verify
    status, claim = api(
        "POST",
        path,
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": claim_name, "namespace": NAMESPACE},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "aligned-gpu"}}]}},
        },
    )
    assert status == 201, claim
    allocation = {
        "devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": node, "device": device}]},
        "nodeSelector": {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]
        },
    }
    status, claim = api(
        "PATCH", f"{path}/{claim_name}/status", {"status": {"allocation": allocation}}, "application/merge-patch+json"
    )
    assert status == 200, claim
    uid = claim["metadata"]["uid"]

    claims = json.dumps([{"namespace": NAMESPACE, "name": claim_name, "uid": uid}])
    result = gpu_node.run("%s -c %s %s %s", VENV_PY, CLIENT, DRA_SOCK, claims)
    assert result.rc == 0, result.stderr
    answer = json.loads(result.stdout)["claims"][uid]
    assert "error" not in answer, answer
    assert [d["deviceName"] for d in answer["devices"]] == [device]

    spec = json.loads(gpu_node.file(f"{CDI_DIR}/aligned.dev-claim_{uid}.json").content_string)
    assert spec["kind"] == "aligned.dev/claim"
    assert device_node in spec["devices"][0]["containerEdits"]["deviceNodes"]
    assert answer["devices"][0]["cdiDeviceIds"] == [f"aligned.dev/claim={spec['devices'][0]['name']}"]
    checkpoint = json.loads(gpu_node.file("/var/lib/aligned-dra/checkpoint.json").content_string)
    assert checkpoint["claims"][uid]["name"] == claim_name
