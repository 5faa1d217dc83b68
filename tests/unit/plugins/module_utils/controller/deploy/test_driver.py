# SPDX-License-Identifier: Apache-2.0
"""driver_deploy: the driver's cluster objects, DaemonSet, node kubeconfig and wheel platforms."""

from __future__ import annotations

import kubernetes_validate
import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.deploy import driver as dd
from ansible_collections.aligned.dra.tests.support.harnesses.admission_policies import evaluate_policy
from ansible_collections.aligned.dra.tests.support.sites.driver_deploy import DS, MINORS, by_kind


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
    policy, binding, *_claims = dd.admission_policy("aligned-dra-driver", "dra", "aligned-dra-node-")
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
    assert "readinessProbe" not in container


def test_liveness_never_restarts_the_driver_for_an_api_outage():
    container = dd.daemonset(DS)["spec"]["template"]["spec"]["containers"][0]
    # /healthz says "degraded" (503) while the API server is away; only /livez may decide a restart
    assert container["livenessProbe"]["httpGet"] == {"path": "/livez", "port": "metrics"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}


def test_both_stop_timeouts_leave_the_driver_its_stop_bound():
    from pathlib import Path

    from aligned_dra_driver.cli import STOP_BOUND

    pod = dd.daemonset(DS)["spec"]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] == dd.TERMINATION_GRACE_SECONDS > STOP_BOUND
    unit = Path(__file__).resolve().parents[6] / "roles" / "driver" / "templates" / "aligned-dra-driver.service.j2"
    (line,) = [x for x in unit.read_text().splitlines() if x.startswith("TimeoutStopSec=")]
    assert int(line.split("=")[1].rstrip("s")) == dd.TERMINATION_GRACE_SECONDS


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
    args = dd.driver_args(
        {"exclude": ["eno*", "ib*"], "plain_nics": True, "vfs": False, "list_attributes": True, "log_level": "DEBUG"}
    )
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
        "--list-attributes",
        "--log-level=DEBUG",
    ]


def test_driver_args_are_accepted_by_the_driver_command_line():
    from aligned_dra_driver.cli import parser

    args = parser().parse_args(["--node-name=n1", *dd.driver_args({"exclude": ["eno*"], "fractional_gpus": True})])
    assert args.exclude == ["eno*"] and args.fractional_gpus == "on" and args.state_dir == "/var/lib/aligned-dra"
    assert args.list_attributes is False
    listed = parser().parse_args(["--node-name=n1", *dd.driver_args({"list_attributes": True})])
    assert listed.list_attributes is True


def test_node_kubeconfig():
    config = dd.node_kubeconfig("https://api:6443", "Q0E=", "tok", "n1")
    assert config["users"][0]["user"] == {"token": "tok"}
    assert config["clusters"][0]["cluster"] == {"server": "https://api:6443", "certificate-authority-data": "Q0E="}
    assert config["contexts"][0]["context"] == {"cluster": "cluster", "user": "aligned-dra-driver-n1"}
    with pytest.raises(dd.DeployError, match="empty"):
        dd.node_kubeconfig("https://api:6443", "", "", "n1")
    with pytest.raises(dd.DeployError, match="URL"):
        dd.node_kubeconfig("api:6443", "", "t", "n1")
    # A bearer token never goes to a plain-HTTP server.
    with pytest.raises(dd.DeployError, match="https://"):
        dd.node_kubeconfig("http://api:8080", "", "t", "n1")


def test_wheel_platforms_cover_the_node_glibc_newest_first():
    tags = dd.wheel_platforms("x86_64", "glibc", "2.36")
    assert tags[0] == "manylinux_2_36_x86_64" and tags[-3] == "manylinux_2_17_x86_64"
    assert tags[-2:] == ["manylinux2014_x86_64", "any"]
    assert dd.wheel_platforms("arm64", "glibc", "2.17")[0] == "manylinux_2_17_aarch64"
    for bad in (("riscv64", "glibc", "2.36"), ("x86_64", "musl", "1.2"), ("x86_64", "glibc", "2.12")):
        with pytest.raises(dd.DeployError):
            dd.wheel_platforms(*bad)


# -- the admission policies, evaluated (tests/support/harnesses/admission_policies.py) --------------------------------

NS = "aligned-dra"
D = "dra.aligned.dev"


def policies():
    objects = dd.objects({"mode": "host", "nodes": ["n1", "n2"]})
    found = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ValidatingAdmissionPolicy"}
    bindings = {o["spec"]["policyName"]: o for o in objects if o["kind"] == "ValidatingAdmissionPolicyBinding"}
    assert set(found) == set(bindings) == {"aligned-dra-driver-node-slices", "aligned-dra-driver-node-claims"}
    assert all(b["spec"]["validationActions"] == ["Deny"] for b in bindings.values())
    assert all(p["spec"]["failurePolicy"] == "Fail" for p in found.values())
    return found["aligned-dra-driver-node-slices"], found["aligned-dra-driver-node-claims"]


def host_user(node):
    return {"username": f"system:serviceaccount:{NS}:aligned-dra-node-{node}", "groups": ["system:serviceaccounts"]}


def pod_user(*nodes):
    """The DaemonSet's pod-bound token: the kubelet's node is in the user's extra."""
    return {
        "username": f"system:serviceaccount:{NS}:aligned-dra-driver",
        "extra": {"authentication.kubernetes.io/node-name": list(nodes)},
    }


def slice_of(node=None, driver=D, **spec):
    body = {"driver": driver, "pool": {"name": node or "x", "generation": 1, "resourceSliceCount": 1}, **spec}
    if node is not None:
        body["nodeName"] = node
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "spec": body}


def slice_request(user, operation, new=None, old=None):
    return {"userInfo": user, "operation": operation}, new, old


@pytest.mark.parametrize(
    ("user", "operation", "new", "old", "denied"),
    [
        (host_user("n1"), "CREATE", slice_of("n1"), None, None),
        (host_user("n1"), "UPDATE", slice_of("n1"), slice_of("n1"), None),
        (host_user("n1"), "DELETE", None, slice_of("n1"), None),
        (host_user("n1"), "CREATE", slice_of("n2"), None, "spec.nodeName is n1"),
        (host_user("n1"), "UPDATE", slice_of("n1"), slice_of("n2"), "another node"),
        (host_user("n1"), "UPDATE", slice_of("n2"), slice_of("n1"), "spec.nodeName is n1"),
        (host_user("n1"), "DELETE", None, slice_of("n2"), "another node"),
        (host_user("n1"), "CREATE", slice_of(None, allNodes=True), None, "spec.nodeName is n1"),
        (host_user("n1"), "CREATE", slice_of("n1", driver="gpu.nvidia.com"), None, "of driver dra.aligned.dev"),
        (host_user("n1"), "DELETE", None, slice_of("n1", driver="gpu.nvidia.com"), "of driver dra.aligned.dev"),
        (host_user("n1"), "UPDATE", slice_of("n1"), slice_of("n1", driver="gpu.nvidia.com"), "of driver"),
        (pod_user("n2"), "CREATE", slice_of("n2"), None, None),
        (pod_user("n2"), "CREATE", slice_of("n1"), None, "spec.nodeName is n2"),
        # A token that is not bound to a pod (a legacy Secret of the DaemonSet's account) has no node.
        ({"username": f"system:serviceaccount:{NS}:aligned-dra-driver"}, "CREATE", slice_of("n1"), None, "not bound"),
        (pod_user("n1", "n2"), "CREATE", slice_of("n1"), None, "not bound"),
        # Other users are not matched: the kubelet's own node authorizer and RBAC apply to them.
        ({"username": "system:serviceaccount:kube-system:other"}, "CREATE", slice_of("n2"), None, None),
        ({"username": "system:node:n1"}, "CREATE", slice_of("n2"), None, None),
    ],
)
def test_slice_policy_binds_each_credential_to_its_node_and_driver(user, operation, new, old, denied):
    slices, _claims = policies()
    message = evaluate_policy(slices, {"userInfo": user, "operation": operation}, new, old)
    if denied is None:
        assert message is None
    else:
        assert message is not None and denied in message


def claim(pool="n1", devices=None, reserved=True, driver=D, allocated=True):
    status = {}
    if allocated:
        status["allocation"] = {
            "devices": {"results": [{"request": "nic", "driver": driver, "pool": pool, "device": "nic-0"}]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In"}]}]},
        }
    if reserved:
        status["reservedFor"] = [{"resource": "pods", "name": "p", "uid": "u1"}]
    if devices is not None:
        status["devices"] = devices
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "status": status}


def entry(pool="n1", driver=D, name="net1"):
    return {"driver": driver, "pool": pool, "device": "nic-0", "networkData": {"interfaceName": name}}


def with_status(obj, **changes):
    return dict(obj, status=dict(obj["status"], **changes))


@pytest.mark.parametrize(
    ("user", "new", "old", "denied"),
    [
        (host_user("n1"), claim(devices=[entry()]), claim(), None),
        (host_user("n1"), claim(devices=[entry(name="net2")]), claim(devices=[entry()]), None),
        (pod_user("n1"), claim(devices=[entry()]), claim(), None),
        (host_user("n2"), claim(devices=[entry()]), claim(), "allocated devices of its own pool"),
        (host_user("n1"), claim(allocated=False, devices=[]), claim(allocated=False), "of its own pool"),
        (host_user("n1"), claim(pool="n1", driver="gpu.nvidia.com", devices=[]), claim(driver="gpu.nvidia.com"), "own"),
        (host_user("n1"), claim(allocated=False), claim(), "allocation or reservedFor"),
        (host_user("n1"), claim(reserved=False), claim(), "allocation or reservedFor"),
        (host_user("n1"), claim(), claim(reserved=False), "allocation or reservedFor"),
        (
            host_user("n1"),
            with_status(claim(), reservedFor=[{"resource": "pods", "name": "q", "uid": "u2"}]),
            claim(),
            "allocation or reservedFor",
        ),
        (host_user("n1"), claim(devices=[entry(pool="n2")]), claim(), "in its own pool"),
        (host_user("n1"), claim(devices=[entry(driver="gpu.nvidia.com")]), claim(), "in its own pool"),
        (
            host_user("n1"),
            claim(devices=[entry(), entry(driver="gpu.nvidia.com", name="x")]),
            claim(devices=[entry(), entry(driver="gpu.nvidia.com", name="y")]),
            "in its own pool",
        ),
        (
            {"username": "system:serviceaccount:kube-system:resourceclaim-controller"},
            claim(allocated=False),
            claim(),
            None,
        ),
    ],
)
def test_claim_status_policy_lets_a_node_write_only_its_own_device_status(user, new, old, denied):
    _slices, claims = policies()
    assert claims["spec"]["matchConstraints"]["resourceRules"][0]["resources"] == ["resourceclaims/status"]
    message = evaluate_policy(claims, {"userInfo": user, "operation": "UPDATE"}, new, old)
    if denied is None:
        assert message is None
    else:
        assert message is not None and denied in message


def test_policies_follow_the_driver_name_and_namespace():
    objects = dd.objects({"mode": "daemonset", "image": "r/i:1", "namespace": "dra", "driver_name": "nic.example.com"})
    slices = next(
        o
        for o in objects
        if o["kind"] == "ValidatingAdmissionPolicy" and o["metadata"]["name"].endswith("-node-slices")
    )
    user = {"username": "system:serviceaccount:dra:aligned-dra-driver", "extra": {dd.NODE_NAME_EXTRA: ["n1"]}}
    request = {"userInfo": user, "operation": "CREATE"}
    assert evaluate_policy(slices, request, slice_of("n1", driver="nic.example.com"), None) is None
    assert "nic.example.com" in evaluate_policy(slices, request, slice_of("n1"), None)


@pytest.mark.parametrize(
    ("version", "gates", "wanted"),
    [
        ("1.34", {}, "--device-taints=off"),
        ("1.35", {}, "--device-taints=off"),
        ("1.35", {"DRADeviceTaints": True}, "--device-taints=on"),  # alpha, turned on by the site
        ("1.36", {}, "--device-taints=on"),
        ("1.37", {"DRADeviceTaints": False}, "--device-taints=off"),
    ],
)
def test_driver_args_say_whether_the_cluster_takes_device_taints(version, gates, wanted):
    from aligned_dra_driver.cli import parser

    args = dd.driver_args({"kubernetes_version": version, "feature_gates": gates})
    assert [a for a in args if a.startswith("--device-taints")] == [wanted]
    assert parser().parse_args(["--node-name=n1", *args]).device_taints == wanted.rpartition("=")[2]
    # the DaemonSet carries the same option
    container = dd.daemonset(dict(DS, kubernetes_version=version, feature_gates=gates))["spec"]["template"]["spec"]
    assert wanted in container["containers"][0]["args"]


def test_driver_args_without_a_version_leave_taints_to_the_driver_default():
    assert not [a for a in dd.driver_args({}) if a.startswith("--device-taints")]


@pytest.mark.parametrize(
    ("version", "gates", "message"),
    [("1.33", {}, "supported minors"), ("1.36", {"DRADeviceTaints": "yes"}, "true or false")],
)
def test_device_taints_refuses_a_bad_site(version, gates, message):
    with pytest.raises(dd.DeployError, match=message):
        dd.driver_args({"kubernetes_version": version, "feature_gates": gates})


def test_list_attributes_need_the_gate_where_the_minor_is_known():
    with pytest.raises(
        dd.DeployError, match=r"^list_attributes: .*DRAListTypeAttributes, which is off on Kubernetes 1.36"
    ):
        dd.driver_args({"list_attributes": True, "kubernetes_version": "1.36"})
    args = dd.driver_args(
        {"list_attributes": True, "kubernetes_version": "1.36", "feature_gates": {"DRAListTypeAttributes": True}}
    )
    assert "--list-attributes" in args


IMAGE = {
    "aligned_dra_driver_mode": "daemonset",
    "aligned_dra_driver_state": "present",
    "aligned_dra_driver_image_context": True,
    "aligned_dra_driver_base_image": "docker.io/library/python:3.12-slim",
    "aligned_dra_driver_image_python": "3.12",
    "aligned_dra_driver_image_glibc": "2.36",
}


def test_the_image_python_minimum_is_the_driver_packages_requires_python(tmp_path):
    assert dd.requires_python_minor() == 10  # driver/pyproject.toml: requires-python = ">=3.10"
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nrequires-python = ">=3.11"\n')
    assert dd.requires_python_minor(pyproject) == 11
    assert dd.image_platform_problems(dict(IMAGE, aligned_dra_driver_image_python="3.10"), pyproject) == [
        ("aligned_dra_driver_image_python", "must be a CPython version 3.11 or newer written as a string such as "
         "'3.12' (got '3.10')"),
        ("aligned_dra_driver_image_python", "the base image docker.io/library/python:3.12-slim "
         "(aligned_dra_driver_base_image) is Python 3.12: set '3.12', or a python:3.10 base image"),
    ]  # fmt: skip
    # read once per file (cached): another file without the field
    unpinned = tmp_path / "unpinned.toml"
    unpinned.write_text("[project]\n")
    with pytest.raises(dd.DeployError, match="requires-python"):
        dd.requires_python_minor(unpinned)


def test_image_platform_problems_name_only_the_broken_rules():
    assert dd.image_platform_problems(IMAGE) == []
    assert dd.image_platform_problems(dict(IMAGE, aligned_dra_driver_image_glibc="2.5")) == [
        ("aligned_dra_driver_image_glibc", "must be 2.17 or newer, e.g. '2.36' (got '2.5')")
    ]
    assert dd.image_platform_problems(dict(IMAGE, aligned_dra_driver_image_python="3.11")) == [
        ("aligned_dra_driver_image_python", "the base image docker.io/library/python:3.12-slim "
         "(aligned_dra_driver_base_image) is Python 3.12: set '3.12', or a python:3.11 base image"),
    ]  # fmt: skip
    # every setting is needed, whichever rules apply
    with pytest.raises(dd.DeployError, match="aligned_dra_driver_image_glibc"):
        dd.image_platform_problems({k: v for k, v in IMAGE.items() if k != "aligned_dra_driver_image_glibc"})
