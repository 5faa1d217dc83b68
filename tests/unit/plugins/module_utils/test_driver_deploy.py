# SPDX-License-Identifier: Apache-2.0
"""driver_deploy: the driver's cluster objects, DaemonSet, node kubeconfig and wheel platforms."""

from __future__ import annotations

import kubernetes_validate
import pytest

from ansible_collections.aligned.dra.plugins.module_utils import driver_deploy as dd

MINORS = ("1.34.0", "1.35.0", "1.36.0", "1.37.0")
DS = {"mode": "daemonset", "image": "registry.example/aligned-dra-driver:0.1.0", "exclude": ["eno*"]}


def by_kind(objects, kind):
    return [o for o in objects if o["kind"] == kind]


@pytest.mark.parametrize("minor", MINORS)
@pytest.mark.parametrize(
    "settings",
    [
        DS,
        dict(DS, node_selector={"aligned.dev/driver": "true"}, tolerations=[{"operator": "Exists"}], metrics_port=0),
        {"mode": "host", "nodes": ["gpu-a", "gpu-b.example.com"]},
    ],
    ids=["daemonset", "daemonset-selector-nometrics", "host"],
)
def test_every_object_validates_strictly_against_the_official_schema(settings, minor):
    objects = dd.objects(settings)
    assert objects[0]["kind"] == "Namespace"
    for obj in objects:
        kubernetes_validate.validate(obj, minor, strict=True)


def test_schema_validation_would_catch_an_unknown_field():
    ds = dd.daemonset(DS)
    ds["spec"]["template"]["spec"]["containers"][0]["privilegd"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(ds, "1.35.0", strict=True)


def test_cluster_role_grants_only_what_the_driver_calls():
    rules = dd.cluster_role("x")["rules"]
    table = {(r["apiGroups"][0], res): set(r["verbs"]) for r in rules for res in r["resources"]}
    assert table == {
        ("resource.k8s.io", "resourceslices"): {"get", "list", "watch", "create", "update", "patch", "delete"},
        ("resource.k8s.io", "resourceclaims"): {"get"},
        ("resource.k8s.io", "resourceclaims/status"): {"patch"},
        ("", "nodes"): {"get"},
    }


def test_host_mode_has_one_account_and_token_per_node_bound_to_the_role():
    objects = dd.objects({"mode": "host", "nodes": ["n2", "n1"], "namespace": "dra"})
    accounts = by_kind(objects, "ServiceAccount")
    assert [a["metadata"]["name"] for a in accounts] == ["aligned-dra-node-n1", "aligned-dra-node-n2"]
    assert all(a["metadata"]["namespace"] == "dra" for a in accounts)
    secrets = by_kind(objects, "Secret")
    assert [s["metadata"]["name"] for s in secrets] == ["aligned-dra-node-n1-token", "aligned-dra-node-n2-token"]
    assert secrets[0]["type"] == "kubernetes.io/service-account-token"
    assert secrets[0]["metadata"]["annotations"] == {"kubernetes.io/service-account.name": "aligned-dra-node-n1"}
    (binding,) = by_kind(objects, "ClusterRoleBinding")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "aligned-dra-node-n1", "namespace": "dra"},
        {"kind": "ServiceAccount", "name": "aligned-dra-node-n2", "namespace": "dra"},
    ]
    assert not by_kind(objects, "DaemonSet")


def test_admission_policy_ties_credentials_to_their_node():
    policy, binding = dd.admission_policy("aligned-dra-driver", "dra", "aligned-dra-node-")
    spec = policy["spec"]
    assert (
        spec["matchConditions"][0]["expression"] == "request.userInfo.username.startsWith('system:serviceaccount:dra:')"
    )
    assert spec["matchConstraints"]["resourceRules"][0]["operations"] == ["CREATE", "UPDATE", "DELETE"]
    node = spec["variables"][0]["expression"]
    prefix = "system:serviceaccount:dra:aligned-dra-node-"
    assert f"substring({len(prefix)})" in node and f"startsWith('{prefix}')" in node
    assert "authentication.kubernetes.io/node-name" in node
    checks = " ".join(v["expression"] for v in spec["validations"])
    assert "object.spec.nodeName == variables.nodeName" in checks
    assert "oldObject.spec.nodeName == variables.nodeName" in checks
    assert binding["spec"] == {"policyName": policy["metadata"]["name"], "validationActions": ["Deny"]}


def test_daemonset_rolls_one_node_at_a_time_and_keeps_state_on_the_host():
    ds = dd.daemonset(dict(DS, state_dir="/var/lib/x", kubelet_dir="/k/"))
    assert ds["spec"]["updateStrategy"]["rollingUpdate"] == {"maxUnavailable": 1, "maxSurge": 0}
    pod = ds["spec"]["template"]["spec"]
    paths = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"]}
    assert paths["state"] == "/var/lib/x"
    assert paths["plugins"] == "/k/plugins" and paths["plugins-registry"] == "/k/plugins_registry"
    container = pod["containers"][0]
    assert "--state-dir=/var/lib/x" in container["args"] and "--exclude=eno*" in container["args"]
    assert container["args"][0] == "--node-name=$(NODE_NAME)"
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["NET_ADMIN"]}
    assert container["securityContext"]["privileged"] is False
    assert ds["spec"]["selector"]["matchLabels"] == ds["spec"]["template"]["metadata"]["labels"]
    assert "--metrics-address=$(POD_IP):8089" in container["args"]


def test_metrics_port_zero_turns_off_the_probe():
    container = dd.daemonset(dict(DS, metrics_port=0))["spec"]["template"]["spec"]["containers"][0]
    assert "livenessProbe" not in container and not any(a.startswith("--metrics") for a in container["args"])


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (dict(DS, image=""), "image"),
        (dict(DS, image="a b"), "image"),
        (dict(DS, namespace="Bad_NS"), "namespace"),
        (dict(DS, mode="pod"), "mode"),
        (dict(DS, metrics_port=70000), "metrics_port"),
        (dict(DS, state_dir="relative"), "state_dir"),
        ({"mode": "host", "nodes": ["UPPER"]}, "node name"),
        ({"mode": "host", "nodes": ["a", "a"]}, "twice"),
        ({"mode": "host", "nodes": ["n" * 240]}, "ServiceAccount name"),
        ({"mode": "host", "node_prefix": "nodash"}, "node_prefix"),
    ],
)
def test_bad_settings_are_refused_with_the_setting_named(settings, message):
    with pytest.raises(dd.DeployError, match=message):
        dd.objects(settings)


def test_driver_args_follow_the_device_options():
    args = dd.driver_args({"exclude": ["eno*", "ib*"], "plain_nics": True, "vfs": False, "log_level": "DEBUG"})
    assert args == [
        "--driver-name=dra.aligned.dev",
        "--kubelet-dir=/var/lib/kubelet",
        "--cdi-dir=/var/run/cdi",
        "--state-dir=/var/lib/aligned-dra",
        "--mps-root=/run/aligned-dra/mps",
        "--exclude=eno*",
        "--exclude=ib*",
        "--plain-nics",
        "--no-vfs",
        "--log-level=DEBUG",
    ]


def test_driver_args_are_accepted_by_the_driver_command_line():
    from aligned_dra_driver.cli import parser

    args = parser().parse_args(["--node-name=n1", *dd.driver_args({"exclude": ["eno*"], "fractional_gpus": True})])
    assert args.exclude == ["eno*"] and args.fractional_gpus == "on" and args.state_dir == "/var/lib/aligned-dra"


def test_node_kubeconfig():
    config = dd.node_kubeconfig("https://api:6443", "Q0E=", "tok", "n1")
    assert config["users"][0]["user"] == {"token": "tok"}
    assert config["clusters"][0]["cluster"] == {"server": "https://api:6443", "certificate-authority-data": "Q0E="}
    assert config["contexts"][0]["context"] == {"cluster": "cluster", "user": "aligned-dra-driver-n1"}
    with pytest.raises(dd.DeployError, match="empty"):
        dd.node_kubeconfig("https://api:6443", "", "", "n1")
    with pytest.raises(dd.DeployError, match="URL"):
        dd.node_kubeconfig("api:6443", "", "t", "n1")


def test_wheel_platforms_cover_the_node_glibc_newest_first():
    tags = dd.wheel_platforms("x86_64", "glibc", "2.36")
    assert tags[0] == "manylinux_2_36_x86_64" and tags[-3] == "manylinux_2_17_x86_64"
    assert tags[-2:] == ["manylinux2014_x86_64", "any"]
    assert dd.wheel_platforms("arm64", "glibc", "2.17")[0] == "manylinux_2_17_aarch64"
    for bad in (("riscv64", "glibc", "2.36"), ("x86_64", "musl", "1.2"), ("x86_64", "glibc", "2.12")):
        with pytest.raises(dd.DeployError):
            dd.wheel_platforms(*bad)
