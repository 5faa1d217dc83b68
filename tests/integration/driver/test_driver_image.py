# SPDX-License-Identifier: Apache-2.0
"""The DaemonSet-mode driver image, end to end: the role writes the build context, podman builds it
offline, and the image runs as the DaemonSet runs it.

The base image is derived from the offline node image (Debian bookworm, CPython 3.11 without pip or
ensurepip, as Debian's python3 without python3-venv): ``podman build`` gets no network, so the build
proves the context is complete. The container gets the DaemonSet's arguments, security context,
host network and volume mounts, read from the ``daemonset.yaml`` the same playbook run wrote; each
hostPath is a directory of the fixture node instead (the kubelet plugin directories, CDI, state, MPS,
``/dev``). Changed for the test only: a kubeconfig for the strict fake API server (a pod would use its
ServiceAccount token), the fixture node's sysfs and procfs, and its ``/dev`` at ``/fixture/dev``
(``--dev-root``): podman cannot lay a read-only directory over the container's ``/dev``. The test then reads the published
ResourceSlices from the fake API server and calls the driver over its sockets in the bind-mounted
kubelet plugin directory, as the kubelet does.

One image per pytest process (a session fixture, tags unique to the process): xdist workers never
share or remove each other's images, and the images and the container are removed at the end.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_collections.aligned.dra.tests.support.fakes.apiserver import FakeApiServer
from ansible_collections.aligned.dra.tests.support.harnesses import driver as h
from ansible_collections.aligned.dra.tests.support.harnesses.playbook_runs import (
    PLAYBOOKS,
    run_playbook,
    write_inventory,
)

pytestmark = [pytest.mark.podman, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[3]
NODE_IMAGE = "localhost/aligned-dra-node:bookworm"
# The node image's platform, which the role downloads the wheels for.
PYTHON, GLIBC = "3.11", "2.36"
MACHINE = platform.machine()
SITE = "lab"
BUILD_TIMEOUT = 540

BASE_CONTAINERFILE = f"""\
FROM {NODE_IMAGE}
# A plain base: no systemd as PID 1, no stop signal of its own, no pip.
ENTRYPOINT []
CMD []
STOPSIGNAL SIGTERM
RUN ! python3 -c 'import pip' 2>/dev/null && ! python3 -c 'import ensurepip' 2>/dev/null
"""


def podman(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout, check=False)
    if check:
        assert done.returncode == 0, f"podman {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done


def run_role(work: Path, base: str, image: str, metrics_port: int) -> subprocess.CompletedProcess[str]:
    """playbooks/driver.yml in daemonset mode for one node, everything on the controller."""
    variables = {
        "aligned_dra_output_dir": str(work / "output"),
        "aligned_dra_site": SITE,
        "aligned_dra_driver_mode": "daemonset",
        "aligned_dra_driver_image": image,
        "aligned_dra_driver_base_image": base,
        "aligned_dra_driver_image_python": PYTHON,
        "aligned_dra_driver_image_machine": MACHINE,
        "aligned_dra_driver_image_glibc": GLIBC,
        "aligned_dra_driver_wheelhouse_dir": str(work / "wheelhouse"),
        "aligned_dra_driver_metrics_port": metrics_port,
        # what the fixture node's tree asks of the device model (the driver harness excludes eno*)
        "aligned_dra_device_options": {"exclude": ["eno*"]},
    }
    inventory = write_inventory(work / "inventory.yml", [h.NODE], variables)
    return run_playbook(inventory, PLAYBOOKS / "driver.yml", timeout=600)


@pytest.fixture(scope="session")
def driver_image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The driver image built from the role's build context, and the DaemonSet the role rendered for it."""
    if shutil.which("podman") is None or podman("image", "exists", NODE_IMAGE, check=False).returncode != 0:
        pytest.skip(f"podman or {NODE_IMAGE} missing: run scripts/bootstrap.sh")
    tag = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
    base = f"localhost/aligned-dra-driver-test-base:{tag}"
    image = f"localhost/aligned-dra-driver-test:{tag}"
    work = tmp_path_factory.mktemp("driver-image")
    metrics_port = h.free_port()
    try:
        (work / "base").mkdir()
        (work / "base" / "Containerfile").write_text(BASE_CONTAINERFILE)
        podman("build", "--network=none", "--layers=false", "-t", base, str(work / "base"), timeout=BUILD_TIMEOUT)

        started = time.monotonic()
        role = run_role(work, base, image, metrics_port)
        assert role.returncode == 0, role.stdout + role.stderr
        role_seconds = time.monotonic() - started
        context = work / "output" / SITE / "driver" / "image"

        started = time.monotonic()
        # --network=none: everything the image needs is in the context
        podman(
            "build",
            "--network=none",
            "--pull=never",
            "--layers=false",
            "-t",
            image,
            str(context),
            timeout=BUILD_TIMEOUT,
        )
        build_seconds = time.monotonic() - started
        print(f"\nrole (build context): {role_seconds:.1f} s; podman build: {build_seconds:.1f} s")

        objects = yaml.safe_load_all((work / "output" / SITE / "driver" / "daemonset.yaml").read_text())
        (daemonset,) = [o for o in objects if o and o["kind"] == "DaemonSet"]
        yield {"image": image, "daemonset": daemonset, "context": context, "metrics_port": metrics_port}
    finally:
        podman("rmi", "--force", "--ignore", image, base, check=False, timeout=120)


class ImageDriver(h.DriverProcess):
    """The driver image run by podman as the DaemonSet runs it, on the fixture node (``tests/support/harnesses/driver.py``)."""

    def __init__(self, node: h.NodeTree, api: FakeApiServer, image: str, daemonset: dict[str, Any]) -> None:
        super().__init__(node, api)
        self.image = image
        self.pod = daemonset["spec"]["template"]["spec"]
        self.name = f"aligned-dra-driver-test-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.mps = node.root / "mps"
        self.mps.mkdir(exist_ok=True)

    def host_path(self, volume: dict[str, Any]) -> Path:
        """The fixture node's directory in place of a hostPath volume of the DaemonSet."""
        path = volume["hostPath"]["path"]
        kubelet = "/var/lib/kubelet"
        fixture = {
            f"{kubelet}/plugins": self.node.kubelet / "plugins",
            f"{kubelet}/plugins_registry": self.node.kubelet / "plugins_registry",
            "/var/run/cdi": self.node.cdi,
            "/var/lib/aligned-dra": self.node.state,
            "/run/aligned-dra/mps": self.mps,
            "/dev": self.node.dev,
        }
        assert path in fixture, f"a hostPath the test does not know: {path}"
        fixture[path].mkdir(parents=True, exist_ok=True)
        return fixture[path]

    def args(self) -> list[str]:
        (container,) = self.pod["containers"]
        security = container["securityContext"]
        assert self.pod["hostNetwork"] is True
        command = ["podman", "run", "--rm", "--name", self.name, "--pull=never", "--network=host"]
        # the pod's security context
        command += [f"--user={security['runAsUser']}", "--cap-drop=all"]
        command += [f"--cap-add={cap}" for cap in security["capabilities"]["add"]]
        if not security["allowPrivilegeEscalation"]:
            command += ["--security-opt=no-new-privileges"]
        if security["readOnlyRootFilesystem"]:
            # as in a pod: no writable /tmp or /run either
            command += ["--read-only", "--read-only-tmpfs=false"]
        assert security["seccompProfile"]["type"] == "RuntimeDefault" and not security["privileged"]
        # the pod's environment: the node's name and the pod's IP (host network: the node's)
        env = {"NODE_NAME": h.NODE, "POD_IP": "127.0.0.1"}
        assert [e["name"] for e in container["env"]] == list(env)
        command += [f"--env={name}={value}" for name, value in env.items()]
        volumes = {v["name"]: v for v in self.pod["volumes"]}
        for mount in container["volumeMounts"]:
            mode = "ro" if mount.get("readOnly") else "rw"
            # podman (runc) cannot lay a read-only directory over /dev: it mounts /dev/shm & co. into it
            target = "/fixture/dev" if mount["mountPath"] == "/dev" else mount["mountPath"]
            command += [f"--volume={self.host_path(volumes[mount['name']])}:{target}:{mode}"]
        # for the test only: the fake API server and the fixture node's sysfs and procfs
        command += [
            f"--volume={self.kubeconfig}:/etc/aligned-dra-test/kubeconfig:ro",
            f"--volume={self.node.sys}:/fixture/sys:ro",
            f"--volume={self.node.proc}:/fixture/proc:ro",
            self.image,
        ]
        # the kubelet expands $(VAR) in args from the container's environment
        args = [
            arg.replace("$(NODE_NAME)", env["NODE_NAME"]).replace("$(POD_IP)", env["POD_IP"])
            for arg in container["args"]
        ]
        return [
            *command,
            *args,
            "--kubeconfig=/etc/aligned-dra-test/kubeconfig",
            "--sysfs-root=/fixture/sys",
            "--procfs-root=/fixture/proc",
            "--dev-root=/fixture/dev",
            "--rescan-interval=0.5",
        ]

    def stop(self) -> int:
        code = super().stop()
        podman("rm", "--force", "--ignore", self.name, check=False)
        return code


def test_image_builds_offline_publishes_slices_and_prepares_claims_as_the_daemonset_runs_it(driver_image):
    context: Path = driver_image["context"]
    # the context is what the role prepared, nothing from a checkout
    assert sorted(p.name for p in context.iterdir()) == [
        "Containerfile",
        "aligned_dra_driver-0.1.0-py3-none-any.whl",
        "deps.tar",
        "requirements-node.txt",
    ]
    inspect = podman("image", "inspect", driver_image["image"], "--format", "{{json .Config}}").stdout
    config = json.loads(inspect)
    assert config["Labels"]["dev.aligned.dra.python"] == PYTHON
    assert config["Labels"]["dev.aligned.dra.platform"] == f"{MACHINE} glibc>={GLIBC}"
    assert config["Entrypoint"] == ["/opt/aligned-dra/venv/bin/aligned-dra-driver"]

    root = h.short_tmp()
    try:
        node = h.NodeTree.build(root)
        with FakeApiServer("1.35") as api:
            api.create(h.node_object())
            driver = ImageDriver(node, api, driver_image["image"], driver_image["daemonset"])
            driver.start()
            try:
                # the registration socket answers as the kubelet asks, naming the DRA socket's host path
                info = driver.register()
                assert info.name == h.DRIVER
                assert info.endpoint == f"/var/lib/kubelet/plugins/{h.DRIVER}/dra.sock"

                slices = h.wait_until(
                    lambda: [s for s in api.list("resourceslices") if s["spec"].get("nodeName") == h.NODE],
                    timeout=30,
                    what="the node's ResourceSlices",
                )
                assert {s["spec"]["driver"] for s in slices} == {h.DRIVER}
                devices = {d["name"] for s in slices for d in s["spec"].get("devices", [])}
                assert {h.GPU, h.NIC} <= devices, devices

                url = f"http://127.0.0.1:{driver_image['metrics_port']}/readyz"
                h.wait_until(lambda: h.http_get(url)[0] == 200, timeout=30, what="/readyz")

                claim = api.create(h.claim_object("image-gpu", [{"request": "gpu", "device": h.GPU}]))
                ref = h.claim_ref(claim)
                answer = driver.prepare([ref]).claims[ref["uid"]]
                assert answer.error == ""
                ids = [cdi_id for device in answer.devices for cdi_id in device.cdi_device_ids]
                assert ids and all(cdi_id.startswith("aligned.dev/") for cdi_id in ids), ids
                # the CDI spec and the checkpoint reached the host's directories through the mounts
                spec = node.cdi / f"aligned.dev-claim_{ref['uid']}.json"
                assert "/dev/nvidia0" in spec.read_text()
                assert ref["uid"] in (node.state / "checkpoint.json").read_text()

                assert driver.unprepare([ref]).claims[ref["uid"]].error == ""
                assert not spec.exists()
            finally:
                # SIGTERM to podman, which passes it on: the driver stops cleanly
                code = driver.stop()
            log = (root / "driver.log").read_text()
            assert code == 0, log[-4000:]
            assert "Traceback" not in log, log[-4000:]
            assert podman("container", "exists", driver.name, check=False).returncode != 0
    finally:
        shutil.rmtree(root, ignore_errors=True)
