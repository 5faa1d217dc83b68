# SPDX-License-Identifier: Apache-2.0
"""The real driver process on a fixture node, the strict fake API server and real Unix sockets."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import grpc
import pytest

from ansible_collections.aligned.dra.tests.support.fakes.apiserver import FakeApiServer
from ansible_collections.aligned.dra.tests.support.harnesses import driver as h

wait_for = h.wait_until


@pytest.fixture
def driver(node, api):
    with h.DriverProcess(node, api) as process:
        yield process


@pytest.fixture
def metered(node, api):
    """The driver with its metrics endpoint: (process, port)."""
    port = h.free_port()
    with h.DriverProcess(node, api, extra=[f"--metrics-address=127.0.0.1:{port}"]) as process:
        yield process, port


def status_queue(port):
    """Claim status writes waiting or in flight, as the driver's metrics say."""
    status, text = h.http_get(f"http://127.0.0.1:{port}/metrics")
    assert status == 200
    return h.metric_value(text, "aligned_dra_claim_status_queue")


def slices(api):
    return api.list("resourceslices")


def claim_requests(api, start, name=""):
    """The requests after the ``start``-th that touch a ResourceClaim (``name``: that claim only)."""
    return [r for r in api.requests[start:] if "/resourceclaims/" + name in r[1]]


def test_registration_answers_as_the_protocol_says(driver):
    info = driver.register()
    assert info.type == "DRAPlugin"
    assert info.name == "dra.aligned.dev"
    assert info.endpoint == str(driver.dra_socket)
    assert list(info.supported_versions) == ["v1.DRAPlugin", "v1beta1.DRAPlugin"]
    assert os.path.basename(driver.reg_socket) == "dra.aligned.dev-reg.sock"


def test_publishes_one_pool_owned_by_the_node(driver, api):
    items = wait_for(lambda: slices(api), what="slices")
    assert len(items) == 1
    spec = items[0]["spec"]
    assert spec["driver"] == "dra.aligned.dev"
    assert spec["nodeName"] == "node-a"
    assert spec["pool"] == {"name": "node-a", "generation": 1, "resourceSliceCount": 1}
    names = [d["name"] for d in spec["devices"]]
    assert names == [h.GPU, h.NIC]  # the management NIC eno1 is excluded
    node_uid = api.get("nodes", "node-a")["metadata"]["uid"]
    assert items[0]["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Node", "name": "node-a", "uid": node_uid, "controller": True}
    ]
    gpu = spec["devices"][0]["attributes"]
    assert gpu["resource.kubernetes.io/pcieRoot"] == {"string": "pci0000:17"}
    assert gpu["resource.kubernetes.io/pciBusID"] == {"string": h.GPU_BDF}
    assert gpu["dra.aligned.dev/uuid"] == {"string": h.GPU_UUID}
    assert api.rejections == []


def test_republishes_after_registration_when_kubelet_deleted_the_slices(driver, api):
    first = wait_for(lambda: slices(api), what="slices")
    api.delete("resourceslices", first[0]["metadata"]["name"])
    driver.register()
    again = wait_for(lambda: slices(api), what="slices again")
    assert again[0]["spec"]["pool"]["generation"] == 1
    assert [d["name"] for d in again[0]["spec"]["devices"]] == [h.GPU, h.NIC]


def test_device_change_moves_the_pool_to_a_new_generation(driver, api, node):
    wait_for(lambda: slices(api), what="slices")
    # the NIC goes away (hot-unplug): the kernel removes its directory and the bus link
    (node.sys / "bus" / "pci" / "devices" / h.NIC_BDF).unlink()
    updated = wait_for(lambda: [s for s in slices(api) if s["spec"]["pool"]["generation"] == 2], what="generation 2")
    assert [d["name"] for d in updated[0]["spec"]["devices"]] == [h.GPU]


@pytest.mark.parametrize("version", ["v1", "v1beta1"])
def test_prepare_and_unprepare(driver, api, node, version):
    config = [
        h.nic_config("FromClass", interfaceName="cls0", mtu=1500),
        h.nic_config("FromClaim", requests=["nic"], interfaceName="net1", addresses=["10.0.0.2/24"]),
    ]
    claim = api.create(
        h.claim_object(
            "both",
            [{"request": "gpu", "device": h.GPU}, {"request": "nic", "device": h.NIC}],
            config,
        )
    )
    ref = h.claim_ref(claim)
    uid = ref["uid"]
    answer = driver.prepare([ref], version=version).claims[uid]
    assert answer.error == ""
    got = {d.device_name: d for d in answer.devices}
    assert set(got) == {h.GPU, h.NIC}
    assert list(got[h.GPU].cdi_device_ids) == [f"aligned.dev/claim={uid}-{h.GPU}"]
    assert list(got[h.NIC].request_names) == ["nic"]
    assert got[h.NIC].pool_name == "node-a"

    spec_file = node.cdi / f"aligned.dev-claim_{uid}.json"
    spec = json.loads(spec_file.read_text())
    assert spec["cdiVersion"] == "0.5.0" and spec["kind"] == "aligned.dev/claim"
    by_name = {d["name"]: d["containerEdits"] for d in spec["devices"]}
    gpu_nodes = {n["path"]: n["hostPath"] for n in by_name[f"{uid}-{h.GPU}"]["deviceNodes"]}
    assert gpu_nodes["/dev/nvidia0"] == str(node.dev / "nvidia0")
    assert "/dev/nvidiactl" in gpu_nodes
    nic = by_name[f"{uid}-{h.NIC}"]
    assert {n["path"] for n in nic["deviceNodes"]} == {
        "/dev/infiniband/rdma_cm",
        "/dev/infiniband/uverbs0",
        "/dev/infiniband/umad0",
    }
    (hook,) = nic["hooks"]
    assert hook["hookName"] == "createRuntime"
    args = hook["args"]
    assert args[args.index("--pci-address") + 1] == h.NIC_BDF
    assert args[args.index("--name") + 1] == "net1"  # claim config wins over class config
    assert args[args.index("--mtu") + 1] == "1500"  # class config still applies
    assert args[args.index("--address") + 1] == "10.0.0.2/24"

    checkpoint = json.loads((node.state / "checkpoint.json").read_text())
    entry = checkpoint["claims"][uid]
    assert {d["pci_address"] for d in entry["devices"]} == {h.GPU_BDF, h.NIC_BDF}
    assert entry["devices"][1]["netdev"]["original_name"] == "aldnic0"

    # the status is written in the background, after the answer
    status = wait_for(lambda: api.get("resourceclaims", "both", "default")["status"].get("devices"), what="status")
    nic_status = next(s for s in status if s["device"] == h.NIC)
    assert nic_status["networkData"]["interfaceName"] == "net1"
    assert nic_status["networkData"]["ips"] == ["10.0.0.2/24"]
    assert nic_status["conditions"][0]["type"] == "Ready"

    # idempotent: a second Prepare answers the same without touching the API
    before = len(api.requests)
    again = driver.prepare([ref], version=version).claims[uid]
    assert [d.device_name for d in again.devices] == [d.device_name for d in answer.devices]
    # the publication loop lists the slices on its own clock: only requests about claims count here
    assert claim_requests(api, before) == []

    never = "00000000-0000-4000-8000-00000000beef"
    malformed = {"namespace": "default", "uid": "never-seen", "name": "x"}
    gone = driver.unprepare([ref, {"namespace": "default", "uid": never, "name": "x"}, malformed], version=version)
    assert gone.claims[uid].error == "" and gone.claims[never].error == ""  # an unknown claim is unprepared
    assert "'never-seen' is not a Kubernetes UID" in gone.claims["never-seen"].error
    assert not spec_file.exists()
    assert json.loads((node.state / "checkpoint.json").read_text())["claims"] == {}


def test_every_claim_is_answered_and_errors_stay_per_claim(driver, api):
    good = api.create(h.claim_object("good", [{"request": "gpu", "device": h.GPU}]))
    other_pool = api.create(h.claim_object("elsewhere", [{"request": "gpu", "device": h.GPU, "pool": "node-b"}]))
    unknown = api.create(h.claim_object("unknown", [{"request": "gpu", "device": "gpu-0000-99-00-0"}]))
    bad_config = api.create(h.claim_object("badcfg", [{"request": "nic", "device": h.NIC}], [h.nic_config(mtu=10)]))
    unallocated = api.create(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "pending", "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "aligned"}}]}},
        }
    )
    stale = dict(h.claim_ref(good), uid="00000000-0000-0000-0000-000000000000")
    missing = {"namespace": "default", "uid": "11111111-0000-0000-0000-000000000000", "name": "absent"}
    refs = [h.claim_ref(c) for c in (good, other_pool, unknown, bad_config, unallocated)] + [stale, missing]
    answer = driver.prepare(refs).claims
    assert set(answer) == {r["uid"] for r in refs}
    assert answer[refs[0]["uid"]].error == ""
    assert "pool" in answer[refs[1]["uid"]].error
    assert "not on this node" in answer[refs[2]["uid"]].error
    assert "mtu" in answer[refs[3]["uid"]].error
    assert "not allocated" in answer[refs[4]["uid"]].error
    assert "now has UID" in answer[stale["uid"]].error
    assert "404" in answer[missing["uid"]].error
    checkpoint = json.loads(Path(driver.node.state / "checkpoint.json").read_text())
    assert list(checkpoint["claims"]) == [refs[0]["uid"]]


def test_a_claim_with_no_result_of_this_driver_is_refused_without_a_spec(driver, api, node):
    # the kubelet asks a driver only about claims with its results: anything else is an odd allocation
    claim = api.create(h.claim_object("foreign", [{"request": "gpu", "device": "x", "driver": "gpu.example.com"}]))
    answer = driver.prepare([h.claim_ref(claim)]).claims[claim["metadata"]["uid"]]
    assert "no device of driver dra.aligned.dev" in answer.error and list(answer.devices) == []
    assert list(node.cdi.iterdir()) == []


def test_vendor_cdi_device_is_returned_too(driver, api, node):
    (node.vendor_cdi / "nvidia.json").write_text(
        json.dumps(
            {
                "cdiVersion": "0.5.0",
                "kind": "nvidia.com/gpu",
                "devices": [{"name": h.GPU_UUID, "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia0"}]}}],
            }
        )
    )
    claim = api.create(h.claim_object("vendor", [{"request": "gpu", "device": h.GPU}]))
    answer = driver.prepare([h.claim_ref(claim)]).claims[claim["metadata"]["uid"]]
    assert list(answer.devices[0].cdi_device_ids)[1] == f"nvidia.com/gpu={h.GPU_UUID}"


def test_restart_restores_cdi_specs_and_removes_strays(node, api):
    with h.DriverProcess(node, api) as process:
        claim = api.create(h.claim_object("keep", [{"request": "gpu", "device": h.GPU}]))
        uid = claim["metadata"]["uid"]
        assert process.prepare([h.claim_ref(claim)]).claims[uid].error == ""
    spec_file = node.cdi / f"aligned.dev-claim_{uid}.json"
    wanted = spec_file.read_text()
    spec_file.unlink()  # /var/run/cdi is a tmpfs: empty after a reboot
    stray = node.cdi / "aligned.dev-claim_deadbeef-0000.json"
    stray.write_text("{}")
    half = node.cdi / ".aligned.dev-claim_x.json.tmp"
    half.write_text("{")
    with h.DriverProcess(node, api):
        assert spec_file.read_text() == wanted
        assert not stray.exists() and not half.exists()


def test_corrupt_checkpoint_stops_the_driver(node, api):
    (node.state / "checkpoint.json").write_text("{not json")
    process = h.DriverProcess(node, api)
    with pytest.raises(RuntimeError, match="not valid JSON"):
        process.start()
    process.stop()


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--match", "not a name=x"], "not an attribute name"),
        (["--selector", "device.attributes["], "does not compile"),
        (["--node-name", "Not_A_Node"], "DNS subdomain"),
        (["--node-name", "node-a\n"], "DNS subdomain"),  # a $-anchored pattern let the newline through
        (["--driver-name", "dra.aligned.dev\n"], "DNS subdomain"),
        (["--rescan-interval", "0"], "positive"),
        (["--metrics-address", "nowhere"], "HOST:PORT"),
    ],
)
def test_bad_arguments_are_refused(node, api, extra, needle):
    process = h.DriverProcess(node, api, extra=extra)
    with pytest.raises(RuntimeError, match="exited with 2") as caught:
        process.start()
    assert needle in str(caught.value)


def test_cel_selector_limits_what_is_published(node, api):
    selector = 'device.attributes["dra.aligned.dev"].linkSpeed >= 100'
    with h.DriverProcess(node, api, extra=["--selector", selector]):
        items = wait_for(lambda: slices(api), what="slices")
        assert [d["name"] for d in items[0]["spec"]["devices"]] == [h.NIC]


def test_api_outage_is_reported_per_claim_and_in_health(node, api):
    with h.DriverProcess(node, api, extra=["--metrics-address", "127.0.0.1:0"]) as process:
        claim = api.create(h.claim_object("flaky", [{"request": "gpu", "device": h.GPU}]))
        api.fail_next("GET", r"/resourceclaims/flaky$", code=503)
        uid = claim["metadata"]["uid"]
        assert "503" in process.prepare([h.claim_ref(claim)]).claims[uid].error
        assert process.prepare([h.claim_ref(claim)]).claims[uid].error == ""


def test_grpc_over_a_closed_socket_fails_cleanly(node, api):
    process = h.DriverProcess(node, api).start()
    process.stop()
    with pytest.raises(grpc.RpcError):
        process.prepare([{"namespace": "a", "uid": "b", "name": "c"}], timeout=1)


def test_rdma_exclusive_mode_adds_the_rdma_device_to_the_hook(node, api):
    params = node.sys / "module" / "ib_core" / "parameters"
    params.mkdir(parents=True)
    (params / "netns_mode").write_text("0\n")
    with h.DriverProcess(node, api) as process:
        claim = api.create(h.claim_object("excl", [{"request": "nic", "device": h.NIC}]))
        uid = claim["metadata"]["uid"]
        assert process.prepare([h.claim_ref(claim)]).claims[uid].error == ""
        spec = json.loads((node.cdi / f"aligned.dev-claim_{uid}.json").read_text())
        args = spec["devices"][0]["containerEdits"]["hooks"][0]["args"]
        assert args[args.index("--rdma-device") + 1] == "mlx5_0"
        assert args[args.index("--name") + 1] == "aldnic0"  # no NicConfig: the host name


def test_move_to_pod_false_leaves_the_nic_on_the_host(driver, api, node):
    claim = api.create(h.claim_object("stay", [{"request": "nic", "device": h.NIC}], [h.nic_config(moveToPod=False)]))
    uid = claim["metadata"]["uid"]
    assert driver.prepare([h.claim_ref(claim)]).claims[uid].error == ""
    spec = json.loads((node.cdi / f"aligned.dev-claim_{uid}.json").read_text())
    edits = spec["devices"][0]["containerEdits"]
    assert "hooks" not in edits
    assert "ALIGNED_DRA_NIC_0000_19_00_0=aldnic0" in edits["env"]


def test_the_same_nic_allocated_twice_fails_the_claim(node, api):
    with h.DriverProcess(node, api, extra=["--plain-nics"]) as process:
        # with --plain-nics the management NIC would be published, but --exclude eno* keeps it out
        assert [d["name"] for d in process_devices(api)] == [h.GPU, h.NIC]
        claim = api.create(
            h.claim_object(
                "dup",
                [{"request": "a", "device": h.NIC}, {"request": "b", "device": h.NIC}],
                [h.nic_config(interfaceName="same")],
            )
        )
        uid = claim["metadata"]["uid"]
        assert "is allocated twice" in process.prepare([h.claim_ref(claim)]).claims[uid].error
        assert list(node.cdi.iterdir()) == []


def process_devices(api):
    items = wait_for(lambda: slices(api), what="slices")
    return items[0]["spec"]["devices"]


def test_original_nic_name_is_read_at_prepare_time(node, api):
    """A NIC renamed since the last scan is recorded under its name now (found in a kill -9 run)."""
    with h.DriverProcess(node, api, extra=["--rescan-interval", "3600"]) as process:
        wait_for(lambda: slices(api), what="slices")
        net = node.sys / "bus" / "pci" / "devices" / h.NIC_BDF / "net"
        (net / "aldnic0").rename(net / "aldnic9")
        claim = api.create(h.claim_object("renamed", [{"request": "nic", "device": h.NIC}]))
        uid = claim["metadata"]["uid"]
        assert process.prepare([h.claim_ref(claim)]).claims[uid].error == ""
        entry = json.loads((node.state / "checkpoint.json").read_text())["claims"][uid]
        assert entry["devices"][0]["netdev"]["original_name"] == "aldnic9"


@pytest.mark.parametrize("minor", ["1.34", "1.35", "1.36", "1.37"])
def test_every_supported_minor_accepts_what_the_driver_writes(node, minor):
    with FakeApiServer(minor) as server:
        server.create(h.node_object())
        with h.DriverProcess(node, server) as process:
            process.register()
            wait_for(lambda: server.list("resourceslices"), what="slices")
            claim = server.create(
                h.claim_object(
                    "all",
                    [{"request": "gpu", "device": h.GPU}, {"request": "nic", "device": h.NIC}],
                    [h.nic_config(interfaceName="net1", addresses=["10.0.0.2/24"])],
                )
            )
            uid = claim["metadata"]["uid"]
            assert process.prepare([h.claim_ref(claim)]).claims[uid].error == ""
            wait_for(
                lambda: len(server.get("resourceclaims", "all", "default")["status"].get("devices") or []) == 2,
                what="the status of both devices",
            )
        assert server.rejections == []


def test_vf_count_changes_are_republished(api):
    from ansible_collections.aligned.dra.tests.support.node_side.fake_sysfs_sriov import FakeSriovKernel

    root = h.short_tmp()
    node = h.NodeTree.build(root, totalvfs=4)
    kernel = FakeSriovKernel(str(node.sys))
    try:
        with h.DriverProcess(node, api):
            first = wait_for(lambda: slices(api), what="slices")
            nic = next(d for d in first[0]["spec"]["devices"] if d["name"] == h.NIC)
            assert nic["attributes"]["dra.aligned.dev/sriovRole"] == {"string": "pf"}
            kernel.set_numvfs(kernel.pf_dir(h.NIC_BDF), "2")
            second = wait_for(
                lambda: [s for s in slices(api) if s["spec"]["pool"]["generation"] == 2], what="generation 2"
            )
            vfs = [d for d in second[0]["spec"]["devices"] if d["name"].startswith("vf-")]
            assert len(vfs) == 2
            assert all(v["attributes"]["dra.aligned.dev/sriovParent"] == {"string": h.NIC_BDF} for v in vfs)
            kernel.set_numvfs(kernel.pf_dir(h.NIC_BDF), "0")
            third = wait_for(
                lambda: [s for s in slices(api) if s["spec"]["pool"]["generation"] == 3], what="generation 3"
            )
            assert not [d for d in third[0]["spec"]["devices"] if d["name"].startswith("vf-")]
            assert api.rejections == []
    finally:
        import shutil

        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.netns
def test_kernel_uevents_trigger_a_rescan(node, api):
    from pyroute2 import IPRoute

    with h.DriverProcess(node, api, extra=["--rescan-interval", "3600"]):
        wait_for(lambda: slices(api), what="slices")
        (node.sys / "bus" / "pci" / "devices" / h.NIC_BDF).unlink()  # the fixture changes silently
        with IPRoute() as ipr:  # a real hotplug event: a new network interface
            name = h.ifname("ue")
            for index in ipr.link_lookup(ifname=name):
                ipr.link("del", index=index)
            ipr.link("add", ifname=name, kind="veth", peer=h.ifname("uep"))
            try:
                updated = wait_for(
                    lambda: [s for s in slices(api) if s["spec"]["pool"]["generation"] == 2],
                    timeout=5,
                    what="a rescan woken by the uevent",
                )
            finally:
                ipr.link("del", index=ipr.link_lookup(ifname=name)[0])
        assert [d["name"] for d in updated[0]["spec"]["devices"]] == [h.GPU]


def test_uevent_subsystem_parsing():
    from aligned_dra_driver.devices.uevents import subsystem

    assert subsystem(b"add@/devices/virtual/net/x\0ACTION=add\0SUBSYSTEM=net\0IFINDEX=4\0") == b"net"
    assert subsystem(b"libudev\0garbage") is None


def test_a_second_instance_on_the_node_exits_and_leaves_the_first_one_serving(driver, node, api):
    """The systemd unit and the DaemonSet on one node: the later one must not take the sockets over."""
    sockets = (driver.dra_socket, driver.reg_socket)
    before = [os.stat(path).st_ino for path in sockets]
    second = h.DriverProcess(node, api, kubeconfig=driver.kubeconfig)
    log_path = node.root / "second.log"
    with open(log_path, "ab") as log:  # not second.start(): the harness clears the sockets before a start
        proc = subprocess.Popen(
            second.args(), stdout=log, stderr=subprocess.STDOUT, env=h.driver_env(), cwd=str(node.root)
        )
    try:
        code = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    lock = node.kubelet / "plugins" / h.DRIVER / "driver.lock"
    assert code == 3, log_path.read_text()
    assert f"{lock} is locked by process {driver.proc.pid}" in log_path.read_text()
    assert [os.stat(path).st_ino for path in sockets] == before
    assert driver.register().name == h.DRIVER  # the first one still answers on its own sockets
    # the lock goes with the process, however it ends: a driver started after kill -9 serves
    driver.kill9()
    with h.DriverProcess(node, api, kubeconfig=driver.kubeconfig) as third:
        assert third.register().name == h.DRIVER
        assert lock.read_text() == f"{third.proc.pid}\n"


def test_unprepare_removes_the_status_entries_it_wrote_and_only_those(metered, api):
    driver, port = metered
    claim = h.claim_object("st", [{"request": "gpu", "device": h.GPU}, {"request": "nic", "device": h.NIC}])
    claim["status"]["allocation"]["devices"]["results"].append(
        {"request": "gpu", "driver": "gpu.example.com", "pool": "other-pool", "device": "other-0"}
    )
    ref = h.claim_ref(api.create(claim))
    assert driver.prepare([ref]).claims[ref["uid"]].error == ""
    wait_for(
        lambda: (
            {d["device"] for d in api.get("resourceclaims", "st", "default")["status"].get("devices") or []}
            == {h.GPU, h.NIC}
        ),
        what="the status written",
    )
    # another driver reports its device on the same claim: our Unprepare must leave it
    other = {"driver": "gpu.example.com", "pool": "other-pool", "device": "other-0"}
    api.handle(
        "PATCH",
        "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/st/status",
        {"fieldManager": "gpu.example.com"},
        {"Content-Type": "application/apply-patch+yaml"},
        json.dumps(
            {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "status": {"devices": [other]}}
        ).encode(),
    )
    assert len(api.get("resourceclaims", "st", "default")["status"]["devices"]) == 3

    assert driver.unprepare([ref]).claims[ref["uid"]].error == ""
    wait_for(lambda: api.get("resourceclaims", "st", "default")["status"]["devices"] == [other], what="cleared")
    # idempotent: a second Unprepare changes nothing (the checkpoint no longer has the claim)
    wait_for(lambda: status_queue(port) == 0, what="the clear done")
    version = api.get("resourceclaims", "st", "default")["metadata"]["resourceVersion"]
    assert driver.unprepare([ref]).claims[ref["uid"]].error == ""
    assert status_queue(port) == 0  # nothing is queued for it either (a job counts from its queueing on)
    assert api.get("resourceclaims", "st", "default")["metadata"]["resourceVersion"] == version
    assert api.rejections == []


def test_unprepare_of_a_deleted_or_recreated_claim_succeeds_and_leaves_the_new_one_alone(metered, api):
    driver, port = metered
    results = [{"request": "gpu", "device": h.GPU}]
    deleted = h.claim_ref(api.create(h.claim_object("gone", results)))
    assert driver.prepare([deleted]).claims[deleted["uid"]].error == ""
    api.delete("resourceclaims", "gone", "default")
    assert driver.unprepare([deleted]).claims[deleted["uid"]].error == ""

    old = h.claim_ref(api.create(h.claim_object("again", results)))
    assert driver.prepare([old]).claims[old["uid"]].error == ""
    api.delete("resourceclaims", "again", "default")
    new = api.create(h.claim_object("again", results))
    new["status"]["devices"] = [{"driver": h.DRIVER, "pool": h.NODE, "device": h.GPU}]
    api.handle(
        "PUT",
        "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/again/status",
        {},
        {"Content-Type": "application/json"},
        json.dumps(new).encode(),
    )
    requests = len(api.requests)
    assert driver.unprepare([old]).claims[old["uid"]].error == ""
    # the name's new claim (another UID) keeps what was written for it: the clear read it and left it
    wait_for(lambda: claim_requests(api, requests, "again"), what="the clear's GET")
    wait_for(lambda: status_queue(port) == 0, what="the clear done")
    assert api.get("resourceclaims", "again", "default")["status"]["devices"] == new["status"]["devices"]
    assert json.loads((driver.node.state / "checkpoint.json").read_text())["claims"] == {}
