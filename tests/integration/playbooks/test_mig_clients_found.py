# SPDX-License-Identifier: Apache-2.0
"""roles/mig's clients_found.yml and cdi_refresh.yml, in one ansible-playbook run on a local node whose
``systemctl`` is the fake one, against the fake API server: a device plugin's DaemonSet pod (found by its
image) that no daemonset_pods entry names refuses the change, naming the pod, its image, its DaemonSet and an
entry to add, and nothing is written to the cluster; the default entries name the GPU operator's validator and
a third-party client whose nodeSelector names nvidia.com/gpu.deploy.client (as NVIDIA's mig-manager finds
them), so with only those on the node nothing is refused; Then the CDI
refresh: nvidia-cdi-refresh.service restarted where installed, skipped where not, and a failing one fails
naming the host, the unit and what to do. The full rollout (main.yml) runs in test_mig.py."""

from __future__ import annotations

import sys

import pytest

from ansible_collections.aligned.dra.tests.support.fakes.apiserver import FakeApiServer
from ansible_collections.aligned.dra.tests.support.fakes.systemctl import read_state, write_systemctl
from ansible_collections.aligned.dra.tests.support.harnesses.playbook_runs import (
    run_playbook,
    write_inventory,
    write_play,
)

pytestmark = pytest.mark.slow

NODE = "node-a"
CDI = "nvidia-cdi-refresh.service"
OPERATOR = {"apiVersion": "apps/v1", "kind": "DaemonSet", "controller": True, "uid": "ds-1"}


def pod(namespace: str, name: str, image: str, *, owner: str | None = None, **extra) -> dict:
    metadata = {"name": name, "namespace": namespace, **extra.pop("metadata", {})}
    if owner:
        metadata["ownerReferences"] = [{**OPERATOR, "name": owner}]
    spec = {"nodeName": NODE, "containers": [{"name": "main", "image": image}], **extra}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def step(name: str, tasks_from: str, variables: dict) -> dict:
    """A block that runs one of the role's task files and, where it fails, prints its message."""
    include = {"ansible.builtin.include_role": {"name": "aligned.dra.mig", "tasks_from": tasks_from}}
    return {
        "name": name,
        "vars": variables,
        "block": [include, {"ansible.builtin.debug": {"msg": f"{name}: passed"}}],
        "rescue": [{"ansible.builtin.debug": {"msg": f"{name}: refused: {{{{ ansible_failed_result.msg }}}}"}}],
    }


def test_clients_found_by_image_and_the_cdi_refresh(tmp_path):
    tools = tmp_path / "bin"
    state = tmp_path / "systemd.json"
    write_systemctl(tools, state, {CDI: "inactive", "broken-cdi.service": "inactive"})
    state.write_text(state.read_text().replace('"calls": []', '"calls": [], "fail_start": ["broken-cdi.service"]'))
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nPATH={tools}:$PATH exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    with FakeApiServer(minor="1.35") as api:
        api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}})
        api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-b"}})
        plugin = pod("kube-system", "nvdp-x1", "nvcr.io/nvidia/k8s-device-plugin:v0.17.0", owner="nvdp",
                     metadata={"labels": {"app.kubernetes.io/name": "nvdp", "controller-revision-hash": "5f6"}})  # fmt: skip
        api.create(plugin)
        # named by the defaults: the operator's validator (its app label), a third-party client (nodeSelector)
        api.create(pod("gpu-operator", "nvidia-operator-validator-q", "nvcr.io/nvidia/gpu-operator:v25",
                       owner="nvidia-operator-validator", metadata={"labels": {"app": "nvidia-operator-validator"}}))  # fmt: skip
        api.create(pod("monitoring", "gpu-agent-z", "example.com/dcgm-exporter@sha256:" + "0" * 64,
                       owner="gpu-agent", nodeSelector={"nvidia.com/gpu.deploy.client": "true"}))  # fmt: skip
        # not the role's to stop: a finished pod, a Deployment's (the drain evicts it), another node's
        api.create({**pod("default", "probe", "nvcr.io/nvidia/k8s/dcgm-exporter:4", owner="probe"),
                    "status": {"phase": "Succeeded"}})  # fmt: skip
        api.create(pod("default", "dashboard", "nvcr.io/nvidia/k8s/dcgm-exporter:4", metadata={
            "ownerReferences": [{**OPERATOR, "kind": "ReplicaSet", "name": "dashboard-7"}]}))  # fmt: skip
        other_node = pod("kube-system", "nvdp-y", "nvcr.io/nvidia/k8s-device-plugin:v0.17.0", owner="nvdp")
        api.create({**other_node, "spec": {**other_node["spec"], "nodeName": "node-b"}})
        del api.requests[:]

        variables = {
            "aligned_dra_kubeconfig": str(api.write_kubeconfig(tmp_path / "kubeconfig")),
            "ansible_python_interpreter": str(python),
        }
        inventory = write_inventory(tmp_path / "hosts.yml", {NODE: {}}, variables)
        entry = {"namespace": "kube-system", "labels": {"app.kubernetes.io/name": "nvdp"}, "node_label": "x/nvdp"}
        clients = {"daemonset_pods": [entry, {"node_label": "nvidia.com/gpu.deploy.client", "match_node_selector": True},
                                      {"labels": {"app": "nvidia-operator-validator"}, "node_label": "v"}]}  # fmt: skip
        play = write_play(tmp_path / "play.yml", [{
            "hosts": NODE, "gather_facts": False,
            "tasks": [
                step("unknown plugin", "clients_found", {}),
                step("plugin named", "clients_found", {"aligned_dra_mig_gpu_clients": clients}),
                step("cdi installed", "cdi_refresh", {}),
                step("cdi not installed", "cdi_refresh", {"aligned_dra_mig_cdi_refresh_unit": "absent.service"}),
                step("cdi failing", "cdi_refresh", {"aligned_dra_mig_cdi_refresh_unit": "broken-cdi.service"}),
            ],
        }])  # fmt: skip
        result = run_playbook(inventory, play)
        assert result.returncode == 0, result.output
        refused = result.output.split("unknown plugin: refused: ")[1].split("Then run the playbook again.")[0]
        assert refused.startswith(f"{NODE}: GPU clients that no aligned_dra_mig_gpu_clients.daemonset_pods entry")
        assert "pod kube-system/nvdp-x1 (image nvcr.io/nvidia/k8s-device-plugin:v0.17.0, DaemonSet nvdp)." in refused, (
            refused
        )
        # the entry to add: the pod's own labels, less those its DaemonSet generates
        assert '{"namespace": "kube-system", "labels": {"app.kubernetes.io/name": "nvdp"}, "node_label": ' in refused
        # only the plugin: the validator and the third-party client are the defaults', the rest a drain's
        for other in ("validator", "gpu-agent", "probe", "dashboard", "nvdp-y"):
            assert other not in refused, refused
        assert "plugin named: passed" in result.output
        assert [m for m, _p, _t in api.requests if m != "GET"] == []  # nothing written to the cluster

        assert "cdi installed: passed" in result.output and "cdi not installed: passed" in result.output
        failed = result.output.split("cdi failing: refused: ")[1]
        assert failed.startswith(f"{NODE}: broken-cdi.service failed after the MIG change"), failed
        assert "Job for broken-cdi.service failed" in failed and "set aligned_dra_mig_cdi_refresh: false" in failed
        # a oneshot that ran is inactive: restarted is a start, which runs it again
        assert read_state(state)["calls"] == [["start", CDI], ["start", "broken-cdi.service"]]
