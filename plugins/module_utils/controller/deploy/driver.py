# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""How the bundled driver is installed: cluster objects, the DaemonSet, node kubeconfigs, wheel platforms.

Pure functions, no Ansible imports: the ``driver`` role calls them through the
``aligned.dra.driver_objects`` and ``aligned.dra.driver_wheel_platforms``
filters, and tests call them directly.

Credentials (docs/driver-install.md):

- ``mode: host``: one ServiceAccount per node, ``<prefix><node>`` (default
  ``aligned-dra-node-<node>``), with a token Secret; the node's kubeconfig
  carries that token. The ServiceAccount name says which node it belongs to.
- ``mode: daemonset``: one ServiceAccount for the DaemonSet; the kubelet
  mounts pod-bound tokens, which carry the node's name in the user's extra
  field ``authentication.kubernetes.io/node-name``.
- Both: a ClusterRole with only what the driver calls (ResourceSlices: read,
  create, update, delete; ResourceClaims: get; ResourceClaim status: patch;
  Nodes: get) and two ValidatingAdmissionPolicies: a credential of the driver
  namespace writes only ResourceSlices of its driver whose ``spec.nodeName`` is
  its own node, before and after the change, and changes only its own
  ``status.devices`` entries of claims allocated from its node's pool.
- With the reclaim watcher on (``reclaim: {mode: evict}``, docs/thin-provisioning.md): the ClusterRole
  also reads pods, evicts them and writes Events, and the DaemonSet's pod shares the host's PID
  namespace. Off (the default), nothing of it: the objects and arguments of a site without it.
- With MIG on (``mig: {mode: static|dynamic}``, the inventory's ``aligned_dra_mig``; controller/deploy/mig.py):
  ``--mig`` and ``--mig-gpus``, and in the DaemonSet NVML with the MIG capabilities and the host's ``/proc``
  read-only. Off (the default), nothing of it.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ansible_collections.aligned.dra.plugins.module_utils.controller.deploy import mig as deploy_mig
from ansible_collections.aligned.dra.plugins.module_utils.controller.deploy import reclaim
from ansible_collections.aligned.dra.plugins.module_utils.dra import gates as dra_gates
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra

DEFAULT_NAMESPACE = "aligned-dra"
DEFAULT_NAME = "aligned-dra-driver"
DEFAULT_NODE_PREFIX = "aligned-dra-node-"
NODE_NAME_EXTRA = "authentication.kubernetes.io/node-name"
MODES = ("host", "daemonset")
# SIGTERM to SIGKILL: above the driver's own stop bound (aligned_dra_driver.cli.STOP_BOUND, 10 s); the
# systemd unit's TimeoutStopSec is the same 30 s (templates/aligned-dra-driver.service.j2)
TERMINATION_GRACE_SECONDS = 30
LABELS = {"app.kubernetes.io/name": "aligned-dra-driver", "app.kubernetes.io/part-of": "aligned.dra"}

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_ARCHES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}
# plugins/module_utils/controller/deploy/driver.py -> the collection's root -> the bundled driver's package
DRIVER_PYPROJECT = Path(__file__).resolve().parents[4] / "driver" / "pyproject.toml"


class DeployError(ValueError):
    """Settings that cannot be turned into objects; the message names the setting."""


def _label(value: Any, what: str) -> str:
    if not isinstance(value, str) or len(value) > 63 or not _DNS_LABEL.match(value):
        raise DeployError(f"{what}: {value!r} is not a DNS label (lowercase letters, digits, '-', at most 63)")
    return value


def _subdomain(value: Any, what: str, limit: int = 253) -> str:
    if not isinstance(value, str) or len(value) > limit or not _DNS_SUBDOMAIN.match(value):
        raise DeployError(f"{what}: {value!r} is not a DNS subdomain of at most {limit} characters")
    return value


def node_account(node: str, prefix: str = DEFAULT_NODE_PREFIX) -> str:
    """The ServiceAccount of one node in host mode."""
    _subdomain(node, "node name")
    return _subdomain(prefix + node, f"ServiceAccount name for node {node!r}")


def _meta(name: str, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": dict(LABELS)}
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


def cluster_role(name: str, reclaims: bool = False) -> dict[str, Any]:
    """The driver's ClusterRole; ``reclaims``: with the reclaim watcher's rules (:data:`reclaim.RULES`)."""
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": _meta(name),
        "rules": [
            {
                "apiGroups": ["resource.k8s.io"],
                "resources": ["resourceslices"],
                "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
            },
            {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get"]},
            {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims/status"], "verbs": ["patch"]},
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},
        ],
    }
    if reclaims:
        role["rules"] += [dict(rule, apiGroups=list(rule["apiGroups"])) for rule in reclaim.RULES]
    return role


def _node_name_expression(namespace: str, node_prefix: str) -> str:
    """CEL: the node a driver credential belongs to, '' when it is bound to none."""
    host_prefix = f"system:serviceaccount:{namespace}:{node_prefix}"
    return (
        f"has(request.userInfo.extra) && '{NODE_NAME_EXTRA}' in request.userInfo.extra"
        f" && size(request.userInfo.extra['{NODE_NAME_EXTRA}']) == 1"
        f" ? request.userInfo.extra['{NODE_NAME_EXTRA}'][0]"
        f" : (request.userInfo.username.startsWith('{host_prefix}')"
        f" ? request.userInfo.username.substring({len(host_prefix)}) : '')"
    )


def _policy(name: str, namespace: str, node_prefix: str, resource: str, operations: list[str], validations: list):
    """A ValidatingAdmissionPolicy for the driver namespace's credentials, and its Deny binding."""
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": _meta(name),
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": ["resource.k8s.io"],
                        "apiVersions": ["*"],
                        "operations": operations,
                        "resources": [resource],
                    }
                ]
            },
            "matchConditions": [
                {
                    "name": "driver-credentials",
                    "expression": f"request.userInfo.username.startsWith('system:serviceaccount:{namespace}:')",
                }
            ],
            "variables": [{"name": "nodeName", "expression": _node_name_expression(namespace, node_prefix)}],
            "validations": [
                {
                    "expression": "variables.nodeName != ''",
                    "message": "this credential is not bound to a node",
                    "reason": "Forbidden",
                },
                *validations,
            ],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": _meta(name),
        "spec": {"policyName": name, "validationActions": ["Deny"]},
    }
    return [policy, binding]


def admission_policy(
    name: str, namespace: str, node_prefix: str, driver_name: str | Sequence[str] = "dra.aligned.dev"
) -> list[dict[str, Any]]:
    """Admission policies (and bindings) that tie every driver credential to its node and its driver.

    ``<name>-node-slices``: a driver credential creates, changes and deletes
    only ResourceSlices of ``driver_name`` whose ``spec.nodeName`` is its own
    node, before and after the change. ``<name>-node-claims``: it changes a
    ResourceClaim's status only when the claim is allocated a device of its
    node's pool, and then only the ``status.devices`` entries of that driver
    and pool; the allocation and ``reservedFor`` stay as they are.
    ``driver_name`` may list several names (a site split by kind,
    controller/deploy/driver_instances.py): the same credential writes the
    slices and statuses of each.
    """
    names = [driver_name] if isinstance(driver_name, str) else list(driver_name)
    if not names:
        raise DeployError("driver_name: no driver name")
    for each in names:
        _subdomain(each, "driver_name", 63)
    if len(names) == 1:
        shown = f"driver {names[0]}"

        def is_ours(field: str) -> str:
            return f"{field} == '{names[0]}'"
    else:
        shown = "drivers " + ", ".join(names)
        listed = "[" + ", ".join(f"'{each}'" for each in names) + "]"

        def is_ours(field: str) -> str:
            return f"{field} in {listed}"

    slices = [
        {
            "expression": "request.operation == 'DELETE'"
            " || (has(object.spec.nodeName) && object.spec.nodeName == variables.nodeName)",
            "messageExpression": "'node ' + variables.nodeName + ' may only write ResourceSlices"
            " whose spec.nodeName is ' + variables.nodeName",
            "reason": "Forbidden",
        },
        {
            "expression": "request.operation == 'CREATE'"
            " || (has(oldObject.spec.nodeName) && oldObject.spec.nodeName == variables.nodeName)",
            "messageExpression": "'node ' + variables.nodeName + ' may not change ResourceSlices of another node'",
            "reason": "Forbidden",
        },
        {
            "expression": f"(request.operation == 'DELETE' || {is_ours('object.spec.driver')})"
            f" && (request.operation == 'CREATE' || {is_ours('oldObject.spec.driver')})",
            "message": f"driver credentials may only write ResourceSlices of {shown}",
            "reason": "Forbidden",
        },
    ]
    mine = f"{is_ours('d.driver')} && d.pool == variables.nodeName"
    claims = [
        {
            "expression": "has(oldObject.status) && has(oldObject.status.allocation)"
            " && has(oldObject.status.allocation.devices) && has(oldObject.status.allocation.devices.results)"
            f" && oldObject.status.allocation.devices.results.exists(d, {mine})",
            "messageExpression": "'node ' + variables.nodeName + ' may only write the status of claims"
            " allocated devices of its own pool'",
            "reason": "Forbidden",
        },
        {
            "expression": "has(object.status) && has(object.status.allocation)"
            " && object.status.allocation == oldObject.status.allocation"
            " && has(object.status.reservedFor) == has(oldObject.status.reservedFor)"
            " && (!has(object.status.reservedFor) || object.status.reservedFor == oldObject.status.reservedFor)",
            "message": "driver credentials may not change a claim's allocation or reservedFor",
            "reason": "Forbidden",
        },
        {
            "expression": f"(has(object.status.devices) ? object.status.devices : []).filter(d, !({mine}))"
            f" == (has(oldObject.status.devices) ? oldObject.status.devices : []).filter(d, !({mine}))",
            "messageExpression": "'node ' + variables.nodeName + ' may only change status.devices entries"
            f" of {shown} in its own pool'",
            "reason": "Forbidden",
        },
    ]
    return _policy(
        f"{name}-node-slices", namespace, node_prefix, "resourceslices", ["CREATE", "UPDATE", "DELETE"], slices
    ) + _policy(f"{name}-node-claims", namespace, node_prefix, "resourceclaims/status", ["UPDATE"], claims)


def _check(settings: dict[str, Any]) -> dict[str, Any]:
    mode = settings.get("mode", "host")
    if mode not in MODES:
        raise DeployError(f"mode: {mode!r} is not one of {', '.join(MODES)}")
    out = {
        "mode": mode,
        "namespace": _label(settings.get("namespace", DEFAULT_NAMESPACE), "namespace"),
        "name": _label(settings.get("name", DEFAULT_NAME), "name"),
        "node_prefix": settings.get("node_prefix", DEFAULT_NODE_PREFIX),
        "driver_name": _subdomain(settings.get("driver_name", "dra.aligned.dev"), "driver_name", 63),
        "nodes": list(settings.get("nodes") or []),
    }
    if not isinstance(out["node_prefix"], str) or not re.match(r"^[a-z0-9][-a-z0-9.]*-$", out["node_prefix"]):
        raise DeployError(
            f"node_prefix: {out['node_prefix']!r} must be lowercase letters, digits, '.', '-' ending in '-'"
        )
    for node in out["nodes"]:
        node_account(node, out["node_prefix"])
    if len(set(out["nodes"])) != len(out["nodes"]):
        raise DeployError("nodes: a node is listed twice")
    return out


def credential_objects(settings: dict[str, Any], driver_names: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Namespace, ServiceAccount(s), token Secrets (host mode), ClusterRole, binding, admission policy.

    ``driver_names``: every name the credentials publish under (default: ``driver_name``).
    """
    s = _check(settings)
    ns, name = s["namespace"], s["name"]
    objects: list[dict[str, Any]] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(ns)}]
    subjects = []
    if s["mode"] == "daemonset":
        objects.append({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(name, ns)})
        subjects.append({"kind": "ServiceAccount", "name": name, "namespace": ns})
    else:
        for node in sorted(s["nodes"]):
            account = node_account(node, s["node_prefix"])
            sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(account, ns)}
            sa["metadata"]["annotations"] = {"dra.aligned.dev/node": node}
            secret = {
                "apiVersion": "v1",
                "kind": "Secret",
                "type": "kubernetes.io/service-account-token",
                "metadata": _meta(token_secret(node, s["node_prefix"]), ns),
            }
            secret["metadata"]["annotations"] = {"kubernetes.io/service-account.name": account}
            objects += [sa, secret]
            subjects.append({"kind": "ServiceAccount", "name": account, "namespace": ns})
    objects.append(cluster_role(name, reclaims=bool(reclaim_args(settings))))
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": _meta(name),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
    }
    if subjects:
        binding["subjects"] = subjects
    objects.append(binding)
    objects += admission_policy(name, ns, s["node_prefix"], driver_names or s["driver_name"])
    return objects


def token_secret(node: str, prefix: str = DEFAULT_NODE_PREFIX) -> str:
    account = node_account(node, prefix)
    return _subdomain(account + "-token", f"token Secret name for node {node!r}")


def _paths(settings: dict[str, Any]) -> dict[str, str]:
    paths = {
        "kubelet_dir": settings.get("kubelet_dir", "/var/lib/kubelet"),
        "cdi_dir": settings.get("cdi_dir", "/var/run/cdi"),
        "state_dir": settings.get("state_dir", "/var/lib/aligned-dra"),
        "mps_root": settings.get("mps_root", "/run/aligned-dra/mps"),
    }
    for key, value in paths.items():
        if not isinstance(value, str) or not value.startswith("/") or value.rstrip("/") == "":
            raise DeployError(f"{key}: {value!r} must be an absolute path below /")
    return paths


def driver_args(settings: dict[str, Any]) -> list[str]:
    """Command-line options shared by the systemd unit and the DaemonSet (not --node-name, --kubeconfig)."""
    paths = _paths(settings)
    args = [
        f"--driver-name={settings.get('driver_name', 'dra.aligned.dev')}",
        f"--kubelet-dir={paths['kubelet_dir']}",
        f"--cdi-dir={paths['cdi_dir']}",
        f"--state-dir={paths['state_dir']}",
        f"--mps-root={paths['mps_root']}",
    ]
    for pattern in settings.get("exclude") or []:
        args.append(f"--exclude={pattern}")
    for rule in settings.get("match") or []:
        args.append(f"--match={rule}")
    if settings.get("plain_nics"):
        args.append("--plain-nics")
    if settings.get("vfs") is False:
        args.append("--no-vfs")
    if settings.get("list_attributes"):
        if settings.get("kubernetes_version"):
            _gates(settings.get("feature_gates"))
            try:
                problem = dra_gates.list_attributes_problem(
                    str(settings["kubernetes_version"]), settings.get("feature_gates")
                )
            except dra.DeviceModelError as exc:
                raise DeployError(str(exc)) from exc
            if problem:
                raise DeployError(problem)
        args.append("--list-attributes")
    if settings.get("fractional_gpus"):
        args.append("--fractional-gpus=on")
    if settings.get("health_service"):
        args.append("--health-service")
    if settings.get("kubernetes_version"):
        on = device_taints(settings["kubernetes_version"], settings.get("feature_gates"))
        args.append(f"--device-taints={'on' if on else 'off'}")
    args += reclaim_args(settings)
    args += mig_args(settings)
    args.append(f"--log-level={settings.get('log_level', 'INFO')}")
    return args


def mig_args(settings: dict[str, Any]) -> list[str]:
    """The driver's MIG options for ``settings['mig']`` (controller/deploy/mig.py): none where it is off (or
    unset); ``dynamic`` on a minor whose partitionable devices are off is refused, where the minor is known."""
    value = settings.get("mig")
    found = deploy_mig.problems(value, settings.get("kubernetes_version"), settings.get("feature_gates"))
    if found:
        raise DeployError("; ".join(deploy_mig.problem_lines(found)))
    return deploy_mig.args(value)


# -- the reclaim watcher (aligned_dra_driver_reclaim; controller/deploy/reclaim.py) ----------------
RECLAIM_VARIABLE = reclaim.VARIABLE


def problem_lines(problems: list[tuple[str, Any, str]]) -> list[str]:
    """``<variable> = <value as JSON>: <reason>``, the words the role's preflight and the validation stage say."""
    return [f"{variable} = {json.dumps(value, default=str)}: {reason}" for variable, value, reason in problems]


def reclaim_args(settings: dict[str, Any]) -> list[str]:
    """The driver's reclaim options for ``settings['reclaim']``: none where it is off (or unset)."""
    value = settings.get("reclaim")
    problems = reclaim.problems(value)
    if problems:
        raise DeployError("; ".join(problem_lines(problems)))
    return reclaim.args(value)


def device_taints(kubernetes_version: Any, feature_gates: Any = None) -> bool:
    """Whether the driver may publish device taints: the cluster serves ``DRADeviceTaints``.

    Beta and on from 1.36, alpha before (on only where the site turns the gate on). Where the
    gate is off the API server drops ``spec.devices[].taints`` without an error, so the driver
    is told instead of finding out.
    """
    try:
        return dra_gates.gate_enabled("DRADeviceTaints", str(kubernetes_version), _gates(feature_gates))
    except dra.DeviceModelError as exc:
        raise DeployError(str(exc)) from exc


def _gates(feature_gates: Any) -> dict[str, bool]:
    gates = feature_gates or {}
    if not isinstance(gates, dict) or not all(isinstance(v, bool) for v in gates.values()):
        raise DeployError(f"feature_gates: {gates!r} must map gate names to true or false")
    return gates


def daemonset(settings: dict[str, Any]) -> dict[str, Any]:
    """The driver's DaemonSet: one pod per selected node, rolled one node at a time."""
    s = _check(dict(settings, mode="daemonset"))
    image = settings.get("image")
    if not isinstance(image, str) or not image or any(c.isspace() for c in image):
        raise DeployError(f"image: {image!r} must be an image reference (registry/name:tag or @digest)")
    paths = _paths(settings)
    port = settings.get("metrics_port", 8089)
    if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
        raise DeployError(f"metrics_port: {port!r} must be 0 (off) or a TCP port")
    kubelet = paths["kubelet_dir"].rstrip("/")
    mounts = [
        ("plugins", f"{kubelet}/plugins", "DirectoryOrCreate"),
        ("plugins-registry", f"{kubelet}/plugins_registry", "DirectoryOrCreate"),
        ("cdi", paths["cdi_dir"], "DirectoryOrCreate"),
        ("state", paths["state_dir"], "DirectoryOrCreate"),
        ("mps", paths["mps_root"], "DirectoryOrCreate"),
        ("dev", "/dev", "Directory"),
    ]
    args = ["--node-name=$(NODE_NAME)", "--dev-root=/dev", *driver_args(settings)]
    args += deploy_mig.daemonset_args(settings.get("mig"))
    container: dict[str, Any] = {
        "name": "driver",
        "image": image,
        "imagePullPolicy": settings.get("image_pull_policy", "IfNotPresent"),
        "args": args,
        "env": [
            {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        ],
        "securityContext": {
            "privileged": False,
            "runAsUser": 0,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"], "add": ["NET_ADMIN"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "resources": settings.get("resources") or {"requests": {"cpu": "50m", "memory": "96Mi"}},
        "volumeMounts": [{"name": n, "mountPath": p} for n, p, _t in mounts if n != "dev"]
        + [{"name": "dev", "mountPath": "/dev", "readOnly": True}],
    }
    if port:
        container["args"].append(f"--metrics-address=$(POD_IP):{port}")
        container["ports"] = [{"name": "metrics", "containerPort": port, "protocol": "TCP"}]
        # liveness asks only whether the gRPC services run: an API outage makes /healthz 503
        # (degraded), and restarting the driver for it would only add a crash loop to the outage
        container["livenessProbe"] = {
            "httpGet": {"path": "/livez", "port": "metrics"},
            "initialDelaySeconds": 10,
            "periodSeconds": 20,
            "failureThreshold": 3,
        }
        container["readinessProbe"] = {
            "httpGet": {"path": "/readyz", "port": "metrics"},
            "periodSeconds": 10,
            "failureThreshold": 3,
        }
    pod_labels = dict(LABELS, **{"app.kubernetes.io/component": "kubelet-plugin"})
    pod_spec: dict[str, Any] = {
        "serviceAccountName": s["name"],
        "priorityClassName": "system-node-critical",
        "hostNetwork": True,
        "dnsPolicy": "ClusterFirstWithHostNet",
        # above the driver's stop bound (10 s after SIGTERM, docs/driver.md)
        "terminationGracePeriodSeconds": TERMINATION_GRACE_SECONDS,
        "containers": [container],
        "volumes": [{"name": n, "hostPath": {"path": p, "type": t}} for n, p, t in mounts],
    }
    if settings.get("node_selector"):
        pod_spec["nodeSelector"] = dict(settings["node_selector"])
    if settings.get("tolerations"):
        pod_spec["tolerations"] = list(settings["tolerations"])
    if settings.get("image_pull_secrets"):
        pod_spec["imagePullSecrets"] = [{"name": n} for n in settings["image_pull_secrets"]]
    if reclaim_args(settings):
        reclaim.pod_spec(settings["reclaim"], pod_spec, container)
    deploy_mig.pod_spec(settings.get("mig"), settings, pod_spec, container)
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": _meta(s["name"], s["namespace"]),
        "spec": {
            "selector": {"matchLabels": pod_labels},
            # One node at a time and never two drivers on a node: both would
            # serve the same sockets. The new pod restores the checkpoint from
            # the state directory and rewrites the CDI specs before serving.
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}},
            "template": {"metadata": {"labels": pod_labels}, "spec": pod_spec},
        },
    }


def objects(settings: dict[str, Any]) -> list[dict[str, Any]]:
    """Every cluster object of the install of one driver, in apply order (a site split by kind:
    driver_instances.objects)."""
    result = credential_objects(settings)
    if settings.get("mode", "host") == "daemonset":
        result.append(daemonset(settings))
    return result


def node_kubeconfig(server: str, ca_data: str, token: str, node: str, name: str = DEFAULT_NAME) -> dict[str, Any]:
    """The kubeconfig a node's driver uses in host mode (token auth)."""
    # The node's token is a bearer credential: it never travels in clear text.
    if not isinstance(server, str) or not server.startswith("https://") or len(server) <= len("https://"):
        raise DeployError(f"server: {server!r} must be an https:// URL (the node's token is sent with every request)")
    if not token:
        raise DeployError(f"token for node {node!r} is empty (has the token controller filled the Secret yet?)")
    cluster: dict[str, Any] = {"server": server}
    if ca_data:
        cluster["certificate-authority-data"] = ca_data
    user = f"{name}-{node}"
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "cluster", "cluster": cluster}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "driver", "context": {"cluster": "cluster", "user": user}}],
        "current-context": "driver",
    }


def wheel_platforms(machine: str, libc: str, libc_version: str) -> list[str]:
    """``pip download --platform`` values that a node with this machine and glibc can install."""
    arch = _ARCHES.get(str(machine).lower())
    if arch is None:
        raise DeployError(f"machine {machine!r}: wheels are built for x86_64 and aarch64 only")
    if str(libc).lower() != "glibc":
        raise DeployError(f"libc {libc!r}: the wheelhouse needs a glibc node (manylinux wheels)")
    match = re.match(r"^2\.(\d+)", str(libc_version))
    if not match or int(match.group(1)) < 17:
        raise DeployError(f"glibc {libc_version!r}: manylinux wheels need glibc 2.17 or newer")
    minor = int(match.group(1))
    return [f"manylinux_2_{m}_{arch}" for m in range(minor, 16, -1)] + [f"manylinux2014_{arch}", "any"]


# -- the driver image's platform (DaemonSet mode) --------------------------------------------------
# The image's build context carries wheels for one Python, machine and glibc: a wrong setting would
# only show in `podman build`. The validation stage (validate_driver.image_problems) and the driver
# role's preflight (the aligned.dra.driver_image_problems filter) both ask image_platform_problems,
# so the rule is written once; each broken rule is named, the ones that hold are not.

# The settings the rule reads, as the inventory names them; the caller gives every one.
IMAGE_SETTINGS = (
    "aligned_dra_driver_mode",
    "aligned_dra_driver_state",
    "aligned_dra_driver_image_context",
    "aligned_dra_driver_base_image",
    "aligned_dra_driver_image_python",
    "aligned_dra_driver_image_glibc",
)
_TRUE = ("true", "yes", "on", "1", "y", "t")


@functools.cache
def _requires_python_minor(path: str) -> int:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise DeployError(f"{path}: cannot read the driver's requires-python: {exc}") from None
    match = re.search(r'requires-python\s*=\s*">=3\.([0-9]+)"', text)
    if not match:
        raise DeployError(f'{path}: no requires-python = ">=3.N"')
    return int(match.group(1))


def requires_python_minor(pyproject: str | Path = DRIVER_PYPROJECT) -> int:
    """The oldest CPython 3 minor the bundled driver supports (its ``requires-python``)."""
    return _requires_python_minor(str(pyproject))


def image_platform_problems(
    settings: dict[str, Any], pyproject: str | Path = DRIVER_PYPROJECT
) -> list[tuple[str, str]]:
    """``(variable, reason)`` for every rule of the driver image's platform that ``settings`` break.

    ``settings`` maps each name of :data:`IMAGE_SETTINGS` to its value. Empty
    when every rule holds, or when this run builds no image context
    (host mode, ``state: absent``, ``image_context: false``).
    """
    missing = [name for name in IMAGE_SETTINGS if name not in settings]
    if missing:
        raise DeployError(f"the driver image's platform needs {', '.join(missing)}")
    context = settings["aligned_dra_driver_image_context"]
    if (
        str(settings["aligned_dra_driver_mode"]) != "daemonset"
        or str(settings["aligned_dra_driver_state"]) != "present"
        or not (context is True or str(context).lower() in _TRUE)
    ):
        return []
    # a YAML number (3.10) is a float: it reads as 3.1, as Ansible's `| string` does
    python = str(settings["aligned_dra_driver_image_python"])
    glibc = str(settings["aligned_dra_driver_image_glibc"])
    base_image = str(settings["aligned_dra_driver_base_image"])
    minimum = requires_python_minor(pyproject)
    problems = []
    match = re.match(r"^3\.([0-9]+)$", python)
    if not match or int(match.group(1)) < minimum:
        problems.append(
            (
                "aligned_dra_driver_image_python",
                f"must be a CPython version 3.{minimum} or newer written as a string such as '3.12' (got '{python}')",
            )
        )
    match = re.match(r"^2\.([0-9]+)$", glibc)
    if not match or int(match.group(1)) < 17:
        problems.append(("aligned_dra_driver_image_glibc", f"must be 2.17 or newer, e.g. '2.36' (got '{glibc}')"))
    base = re.search(r"(?:^|/)python:(3\.[0-9]+)", base_image)
    if base and base.group(1) != python:
        problems.append(
            (
                "aligned_dra_driver_image_python",
                f"the base image {base_image} (aligned_dra_driver_base_image) is Python {base.group(1)}: "
                f"set '{base.group(1)}', or a python:{python} base image",
            )
        )
    return problems
