# SPDX-License-Identifier: Apache-2.0
"""roles/mig's GPU clients as mig-parted stops them, its templates evaluated by Ansible's own templar with the
role's defaults and vars: which pods on the node each daemonset_pods entry names (by labels, or, as NVIDIA's
mig-manager finds the clients of nvidia.com/gpu.deploy.client, a DaemonSet's pods whose nodeSelector has the
label), which GPU clients found by image the role cannot make leave (tasks/clients_found.yml refuses them),
and the defaults (NVSM's units, the operator's validator, the third-party clients) as argument_specs.yml
documents them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

ROLE = Path(__file__).resolve().parents[3] / "roles" / "mig"
NODE = "node-a"


def trusted(value: Any) -> Any:
    """The role's files as Ansible reads them: every string of theirs may be a template."""
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, dict):
        return {key: trusted(item) for key, item in value.items()}
    if isinstance(value, list):
        return [trusted(item) for item in value]
    return value


def role_files() -> dict:
    return {
        **yaml.safe_load((ROLE / "defaults" / "main.yml").read_text()),
        **yaml.safe_load((ROLE / "vars" / "main.yml").read_text()),
    }


def evaluate(name: str, **variables: Any) -> Any:
    """The role variable ``name`` with the role's defaults and vars, ``variables`` over them (inventory or facts)."""
    templar = Templar(loader=DataLoader(), variables={**trusted(role_files()), **variables})
    return templar.template(trust_as_template("{{ " + name + " }}"))


def pod(name: str, image: str = "busybox", *, namespace: str = "default", owner: str | None = "DaemonSet",
        labels: dict | None = None, node_selector: dict | None = None, phase: str = "Running",
        annotations: dict | None = None) -> dict:  # fmt: skip
    metadata: dict = {"name": name, "namespace": namespace, "labels": labels or {}}
    if owner:
        metadata["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner, "name": f"{name}-owner", "uid": "u"}]
    if annotations:
        metadata["annotations"] = annotations
    spec = {"nodeName": NODE, "containers": [{"name": "c", "image": image}], "nodeSelector": node_selector or {}}
    return {"metadata": metadata, "spec": spec, "status": {"phase": phase}}


def matches(pods: list[dict], **variables: Any) -> list[tuple[str, str, str | None]]:
    found = evaluate("aligned_dra_mig_client_pod_matches", aligned_dra_mig_node_pods={"resources": pods}, **variables)
    return [(m["node_label"], "/".join(m["pod"]), m["daemonset"]) for m in found]


def unstoppable(pods: list[dict], **variables: Any) -> list[str]:
    found = evaluate("aligned_dra_mig_clients_unstoppable", aligned_dra_mig_node_pods={"resources": pods}, **variables)
    return [f["pod"] for f in found]


# -- which pods each entry names ------------------------------------------------------------------------------

CLIENT = "nvidia.com/gpu.deploy.client"


def test_the_defaults_name_the_operators_pods_its_validator_and_third_party_clients_by_node_selector():
    pods = [
        pod("exporter", labels={"app": "nvidia-dcgm-exporter"}, namespace="gpu-operator"),
        pod("validator", labels={"app": "nvidia-operator-validator"}, namespace="gpu-operator"),
        pod("agent", node_selector={CLIENT: "true"}, namespace="monitoring"),
        # the key alone counts, as for NVIDIA's mig-manager: a DaemonSet that selects another value is its too
        pod("agent-b", node_selector={CLIENT: "yes"}),
        # not a DaemonSet's: the drain evicts it, nothing to pause
        pod("job", node_selector={CLIENT: "true"}, owner="Job"),
        pod("bare", node_selector={CLIENT: "true"}, owner=None),
        pod("other", labels={"app": "something"}, node_selector={"gpu": "true"}),
    ]
    assert matches(pods) == [
        ("nvidia.com/gpu.deploy.dcgm-exporter", "gpu-operator/exporter", "exporter-owner"),
        ("nvidia.com/gpu.deploy.operator-validator", "gpu-operator/validator", "validator-owner"),
        (CLIENT, "monitoring/agent", "agent-owner"),
        (CLIENT, "default/agent-b", "agent-b-owner"),
    ]


def test_an_entry_by_labels_keeps_its_namespace_and_every_label_and_an_entry_with_neither_names_no_pod():
    clients = {
        "daemonset_pods": [
            {"namespace": "gpu", "labels": {"app": "plugin", "tier": "node"}, "node_label": "x/plugin"},
            {"node_label": "x/nothing"},
            {"node_label": "x/off", "match_node_selector": False},
        ],
        "bundled_driver": False,
    }
    pods = [
        pod("p1", labels={"app": "plugin", "tier": "node"}, namespace="gpu"),
        pod("p2", labels={"app": "plugin", "tier": "node"}, namespace="other"),
        pod("p3", labels={"app": "plugin"}, namespace="gpu"),
        pod("p4", node_selector={"x/nothing": "true", "x/off": "true"}),
    ]
    assert matches(pods, aligned_dra_mig_gpu_clients=clients) == [("x/plugin", "gpu/p1", "p1-owner")]


# -- GPU clients found by image ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "image",
    [
        "nvcr.io/nvidia/k8s-device-plugin:v0.17.0",
        "registry.local:5000/mirror/nvidia/k8s-device-plugin@sha256:" + "a" * 64,
        "k8s-device-plugin",
        "nvcr.io/nvidia/k8s/dcgm-exporter:4.2.3-4.1.3-ubuntu22.04",
        "nvcr.io/nvidia/cloud-native/dcgm:4.2.3-1-ubuntu22.04",
        "nvcr.io/nvidia/gpu-feature-discovery:v0.8.2",
    ],
)
def test_a_daemonsets_pod_running_a_gpu_client_image_that_no_entry_names_is_found(image):
    assert unstoppable([pod("found", image=image)]) == ["default/found"]


@pytest.mark.parametrize(
    "image",
    [
        "example.com/dcgm-dashboard:1",  # the image's own name must be one of the list, not contain one
        "example.com/k8s-device-plugin-docs:1",
        "nvcr.io/nvidia/gpu-operator:v25.3.0",
        "example.com/dcgm/agent:1",  # a path segment is not the image's name
        "dcgm:5000/agent:1",  # nor a registry's host
    ],
)
def test_other_images_are_not(image):
    assert unstoppable([pod("other", image=image)]) == []


def test_only_running_pods_the_drain_leaves_and_no_entry_names_are_found():
    image = "nvcr.io/nvidia/k8s-device-plugin:v0.17.0"
    pods = [
        pod(
            "plugin",
            image=image,
            labels={"app": "nvdp", "controller-revision-hash": "6c5", "pod-template-generation": "2"},
        ),
        pod("static", image=image, owner="Node", annotations={"kubernetes.io/config.mirror": "3f2"}),
        pod("operators", image=image, labels={"app": "nvidia-device-plugin-daemonset"}),  # the default entry's
        pod("done", image=image, phase="Succeeded"),
        pod("evicted", image=image, phase="Failed"),
        pod("replicated", image=image, owner="ReplicaSet"),  # the drain evicts it
        pod("bare", image=image, owner=None),  # the drain refuses the node (not managed)
    ]
    found = evaluate("aligned_dra_mig_clients_unstoppable", aligned_dra_mig_node_pods={"resources": pods})
    assert found == [
        {"pod": "default/plugin", "image": image, "daemonset": "plugin-owner", "labels": {"app": "nvdp"}},
        {"pod": "default/static", "image": image, "daemonset": None, "labels": {}},
    ]


def test_a_sites_image_list_replaces_the_default_and_an_empty_one_finds_nothing():
    pods = [pod("agent", image="example.com/gpu-agent:2"), pod("plugin", image="nvcr.io/nvidia/k8s-device-plugin:1")]
    assert unstoppable(pods, aligned_dra_mig_gpu_client_images=["gpu-agent"]) == ["default/agent"]
    assert unstoppable(pods, aligned_dra_mig_gpu_client_images=[]) == []
    assert unstoppable([]) == []


# -- the defaults -----------------------------------------------------------------------------------------------


def test_nvsms_parts_stop_before_nvsm_and_dcgm_before_both_as_mig_parted_ordered_them():
    units = evaluate("aligned_dra_mig_client_units")
    stop = list(reversed(units))  # the role stops the last first
    parts = ["nvsm-mqtt.service", "nvsm-core.service", "nvsm-api-gateway.service", "nvsm-notifier.service"]
    assert all(stop.index(part) < stop.index("nvsm.service") for part in parts)
    assert stop.index("nvidia-dcgm.service") < min(stop.index(part) for part in parts)
    assert stop[:2] == ["aligned-dra-driver-gpu.service", "aligned-dra-driver.service"]  # the driver first
    # not stopped: it holds no GPU and is no client that blocks a reset (NVIDIA dropped it from its hooks)
    assert "nv_peer_mem.service" not in units


def test_the_defaults_are_the_ones_argument_specs_documents():
    options = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    for name in ("aligned_dra_mig_gpu_clients", "aligned_dra_mig_gpu_client_images", "aligned_dra_mig_cdi_refresh"):
        assert options[name]["default"] == defaults[name], name


def test_the_rollout_looks_for_them_before_the_drain_and_refreshes_cdi_after_the_verification():
    """main.yml's order: the refusal comes before the node is cordoned; the CDI refresh after the verification,
    in the block whose always: starts the GPU clients again (so they start on the new spec)."""
    tasks = yaml.safe_load((ROLE / "tasks" / "main.yml").read_text())
    names = [task["name"] for task in tasks]
    found = names.index("MIG | Look for GPU clients that the role cannot stop")
    assert tasks[found]["ansible.builtin.include_tasks"] == "clients_found.yml"
    assert found < names.index("MIG | Cordon and drain the node")
    (change,) = (task for task in tasks if "block" in task)
    inner = [task["name"] for task in change["block"]]
    refresh = inner.index("MIG | Refresh the node's CDI spec after the change")
    assert change["block"][refresh]["ansible.builtin.include_tasks"] == "cdi_refresh.yml"
    assert refresh > inner.index("MIG | Verify the node (nothing left to change)")
    assert refresh > inner.index("MIG | Apply the layout again after the reboot")
    assert "aligned_dra_mig_cdi_refresh | bool" in change["block"][refresh]["when"]
    assert [task["ansible.builtin.include_tasks"] for task in change["always"]] == ["clients_start.yml"]
