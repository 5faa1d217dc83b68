# SPDX-License-Identifier: Apache-2.0
"""Split by kind: two processes of the driver on one fixture node (docs/driver.md, "Split by kind").

``gpu.aligned.dev --kinds=gpu,accelerator`` and the default ``dra.aligned.dev --kinds=nic,vf``, each with
its own sockets and state directory, both writing into one CDI directory, against one fake API server.
Everything waits on an answer (a socket, a gRPC call, an API read with a deadline), never on a file.
"""

from __future__ import annotations

import json

import pytest
from aligned_dra_driver.claims import cdi

from ansible_collections.aligned.dra.tests.support.fakes.apiserver import FakeApiServer
from ansible_collections.aligned.dra.tests.support.harnesses import driver as h

GPU_DRIVER = "gpu.aligned.dev"
NIC_DRIVER = h.DRIVER  # dra.aligned.dev, the default name
# test stand-in for nvidia-cuda-mps-control (no GPU here): records every call
MPS_STAND_IN = '#!/bin/sh\necho "$*" >> "$0.calls"\ncat >> "$0.calls"\n'


def plugin(node: h.NodeTree, api: FakeApiServer, name: str, kinds: str, env: dict[str, str]) -> h.DriverProcess:
    """One plugin of the pair: its own driver name, kinds, state directory, sockets and log."""
    extra = [f"--driver-name={name}", f"--kinds={kinds}", f"--state-dir={node.root / name}"]
    extra += [f"--mps-root={node.root / 'mps'}"]  # the node's one MPS directory, as /run/aligned-dra/mps is
    process = h.DriverProcess(node, api, extra=extra, env=env)
    process.reg_socket = node.kubelet / "plugins_registry" / f"{name}-reg.sock"
    process.dra_socket = node.kubelet / "plugins" / name / "dra.sock"
    process.log = node.root / f"{name}.log"
    return process


# one pair for the module: the first test only reads, the second prepares, restarts and unprepares
@pytest.fixture(scope="module")
def mps_calls(module_node):
    """The stand-in's record of its calls (absent until one is made)."""
    bin_dir = module_node.root / "bin"
    bin_dir.mkdir()
    script = bin_dir / "nvidia-cuda-mps-control"
    script.write_text(MPS_STAND_IN)
    script.chmod(0o755)
    return script.with_name(script.name + ".calls")


@pytest.fixture(scope="module")
def pair(module_node, module_api, mps_calls):
    env = {"PATH": f"{mps_calls.parent}:/usr/bin:/bin"}
    gpu = plugin(module_node, module_api, GPU_DRIVER, "gpu,accelerator", env)
    nic = plugin(module_node, module_api, NIC_DRIVER, "nic,vf", env)
    try:
        for process in (gpu, nic):  # both start at once: the pair comes up in the time of one
            process.start(wait=False)
        for process in (gpu, nic):
            process.wait_ready()
        yield gpu, nic
    finally:
        nic.stop()
        gpu.stop()


def published(api: FakeApiServer) -> dict[str, list[dict]]:
    """``{driver: devices}`` once both drivers have published."""
    by_driver: dict[str, list[dict]] = {}
    for item in api.list("resourceslices"):
        by_driver.setdefault(item["spec"]["driver"], []).extend(item["spec"]["devices"])
    return by_driver if set(by_driver) == {GPU_DRIVER, NIC_DRIVER} else {}


def test_each_plugin_registers_and_publishes_only_its_kinds(pair, module_api, module_node):
    gpu, nic = pair
    for process, name in ((gpu, GPU_DRIVER), (nic, NIC_DRIVER)):
        info = process.register()
        assert (info.name, info.endpoint) == (name, str(process.dra_socket))
        # nothing of one is the other's: sockets, instance lock and checkpoint go by the driver name
        assert (module_node.kubelet / "plugins" / name / "driver.lock").exists()
        assert json.loads((module_node.root / name / "checkpoint.json").read_text())["driver"] == name
    assert not (module_node.state / "checkpoint.json").exists()
    devices = h.wait_until(lambda: published(module_api), what="the slices of both drivers")
    assert [d["name"] for d in devices[GPU_DRIVER]] == [h.GPU]
    assert [d["name"] for d in devices[NIC_DRIVER]] == [h.NIC]
    (gpu_device,), (nic_device,) = devices[GPU_DRIVER], devices[NIC_DRIVER]
    # the attributes keep the one domain whatever the driver name, and the standard ones align across drivers
    assert gpu_device["attributes"]["dra.aligned.dev/kind"] == {"string": "gpu"}
    for standard in ("resource.kubernetes.io/pcieRoot", "resource.kubernetes.io/numaNode"):
        assert gpu_device["attributes"][standard] == nic_device["attributes"][standard]
    assert module_api.rejections == []


def spec_files(node: h.NodeTree) -> dict[str, dict]:
    return {p.name: json.loads(p.read_text()) for p in node.cdi.iterdir() if p.name.endswith(".json")}


def test_a_claim_of_both_is_prepared_by_both_and_a_restart_keeps_the_others_spec(
    pair, module_api, module_node, mps_calls
):
    gpu, nic = pair
    claim = module_api.create(
        h.claim_object(
            "both",
            [{"request": "gpu", "device": h.GPU, "driver": GPU_DRIVER}, {"request": "nic", "device": h.NIC}],
            [h.nic_config(interfaceName="net1")],
        )
    )
    ref = h.claim_ref(claim)
    uid = ref["uid"]
    # the kubelet calls each driver of the claim's results with the claim, one after the other
    answers = {name: process.prepare([ref]).claims[uid] for name, process in ((GPU_DRIVER, gpu), (NIC_DRIVER, nic))}
    assert {name: a.error for name, a in answers.items()} == {GPU_DRIVER: "", NIC_DRIVER: ""}
    assert [d.device_name for d in answers[GPU_DRIVER].devices] == [h.GPU]
    assert [d.device_name for d in answers[NIC_DRIVER].devices] == [h.NIC]

    gpu_file, nic_file = f"aligned.dev-claim-{GPU_DRIVER}_{uid}.json", f"aligned.dev-claim_{uid}.json"
    specs = spec_files(module_node)
    assert set(specs) == {gpu_file, nic_file}
    names = {file: {d["name"] for d in spec["devices"]} for file, spec in specs.items()}
    assert names == {gpu_file: {f"{uid}-{h.GPU}"}, nic_file: {f"{uid}-{h.NIC}"}}
    assert [list(d.cdi_device_ids) for d in answers[GPU_DRIVER].devices] == [[f"aligned.dev/claim={uid}-{h.GPU}"]]
    # both status entries stay: each driver applies its own with a field manager of its own
    wanted = {(GPU_DRIVER, h.GPU), (NIC_DRIVER, h.NIC)}
    h.wait_until(
        lambda: (
            {
                (s["driver"], s["device"])
                for s in module_api.get("resourceclaims", "both", "default")["status"].get("devices", [])
            }
            == wanted
        ),
        what="the status entries of both drivers",
    )

    # the NIC plugin dies; meanwhile its spec is lost, strays of both appear, the GPU plugin's MPS daemon runs
    nic.kill9()
    gpu_spec = (module_node.cdi / gpu_file).read_bytes()
    nic_spec = (module_node.cdi / nic_file).read_bytes()
    (module_node.cdi / nic_file).unlink()
    stray = module_node.cdi / "aligned.dev-claim_00000000-0000-4000-8000-00000000beef.json"
    stray.write_text("{}")
    halves = {name: module_node.cdi / f".{cdi.spec_prefix(name)}x.json.tmp" for name in (GPU_DRIVER, NIC_DRIVER)}
    for half in halves.values():
        half.write_text("{")
    control = module_node.root / "mps" / h.GPU_BDF.replace(":", "-") / "pipe" / "control"
    control.parent.mkdir(parents=True)
    control.write_text("")
    nic.start()  # restores before it serves: ready means restored

    assert (module_node.cdi / nic_file).read_bytes() == nic_spec
    assert not stray.exists() and not halves[NIC_DRIVER].exists()
    assert (module_node.cdi / gpu_file).read_bytes() == gpu_spec and halves[GPU_DRIVER].exists()
    assert control.exists() and not mps_calls.exists()  # not the NIC plugin's to stop
    again = nic.prepare([ref]).claims[uid]
    assert [d.device_name for d in again.devices] == [h.NIC] and again.error == ""

    # each Unprepare removes its own spec only
    assert nic.unprepare([ref]).claims[uid].error == ""
    assert set(spec_files(module_node)) == {gpu_file}
    assert gpu.unprepare([ref]).claims[uid].error == ""
    assert spec_files(module_node) == {}
