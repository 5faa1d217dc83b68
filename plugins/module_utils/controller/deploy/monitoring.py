# SPDX-License-Identifier: Apache-2.0
"""How the driver role makes the driver's metrics visible (``aligned_dra_monitoring``, docs/monitoring.md).

Off (the default: unset, ``{}`` or false), the install is exactly what it is
without the setting. On (a dict):

- ``prometheus_operator: true``: a PodMonitor (DaemonSet mode), or for host mode a
  selector-less Service, its Endpoints (one address per node, from each host's
  ``aligned_dra_driver_metrics_address``, which the host-mode driver then binds)
  and a ServiceMonitor; false: a scrape configuration for a Prometheus without
  the operator, written to the output directory (:func:`files`).
- ``rules: true``: the alerts of :mod:`monitoring_rules`, as a PrometheusRule or
  a rule file.
- ``grafana: true``: the dashboard of :mod:`monitoring_dashboard` in a ConfigMap
  labelled ``grafana_dashboard: "1"``, which kube-prometheus-stack's Grafana
  sidecar loads.
- ``usage: true`` (the default once on): the plugin that publishes GPUs gets
  NVML the way the reclaim watcher's does (controller/deploy/reclaim.py): the
  NVIDIA Container Toolkit's variables on its container, the host's PID
  namespace and the RuntimeClass ``runtime_class`` in DaemonSet mode, and
  ``nvidia-ml-py`` in the venv or the image: the driver measures use wherever
  NVML loads, and without the package it cannot load it.

Every scrape keeps the driver's own ``namespace`` and ``pod`` labels (those of
the claim, ``honor_labels``), names the job ``aligned-dra-driver`` and adds the
target's ``node``. :func:`problems` names the key of every setting that makes no
sense; :func:`site_problems` the hosts of one site that disagree.

Controller-side; no Ansible imports.
"""

from __future__ import annotations

import ipaddress
import json
import re

from ansible_collections.aligned.dra.plugins.module_utils.controller.deploy import (
    monitoring_dashboard,
    monitoring_rules,
    reclaim,
)
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

VARIABLE = "aligned_dra_monitoring"
ADDRESS_VARIABLE = "aligned_dra_driver_metrics_address"
DEFAULTS: dict[str, Any] = {
    "prometheus_operator": False,
    "rules": False,
    "grafana": False,
    "usage": True,
    "interval": "30s",
    "labels": {},
    "grafana_namespace": "",
    "runtime_class": "",
}
_FLAGS = ("prometheus_operator", "rules", "grafana", "usage")
JOB = monitoring_rules.JOB
MONITOR_API = "monitoring.coreos.com/v1"
LABELS = {"app.kubernetes.io/name": JOB, "app.kubernetes.io/part-of": "aligned.dra"}
POD_LABELS = dict(LABELS, **{"app.kubernetes.io/component": "kubelet-plugin"})
DASHBOARD_LABEL = {"grafana_dashboard": "1"}
DASHBOARD_KEY = "aligned-dra-gpu-shares.json"
SCRAPE_FILE = "prometheus/scrape-config.yml"
RULES_FILE = "prometheus/rules.yml"
# Prometheus's duration (model.ParseDuration), as the CRDs' pattern has it
_DURATION = re.compile(r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


def is_on(value: Any) -> bool:
    """Whether the setting turns monitoring on: a non-empty dict."""
    return isinstance(value, dict) and bool(value)


def setting(value: Any) -> dict[str, Any]:
    """The checked setting with every default filled in (off: ``{}``)."""
    return dict(DEFAULTS, **value) if is_on(value) else {}


def problems(value: Any, settings: dict[str, Any]) -> list[tuple[str, Any, str]]:
    """``(variable, value, reason)`` for every part of the setting that is wrong or makes no sense; empty when
    it holds. ``settings`` are the role's (``mode``, ``metrics_port``, ``reclaim``)."""
    if value is None or value is False or value == {}:
        return []
    if not isinstance(value, dict):
        return [(VARIABLE, value, f"must be a dict ({', '.join(DEFAULTS)}), or {{}} for off")]
    found = [
        (f"{VARIABLE}.{key}", value[key], f"is no key of it ({', '.join(DEFAULTS)})")
        for key in value
        if key not in DEFAULTS
    ]
    s = dict(DEFAULTS, **value)
    for key in _FLAGS:
        if not isinstance(s[key], bool):
            found.append((f"{VARIABLE}.{key}", s[key], "must be true or false"))
    if (
        not isinstance(s["interval"], str)
        or not s["interval"]
        or not _DURATION.match(s["interval"])
        or s["interval"] == "0"
    ):
        found.append((f"{VARIABLE}.interval", s["interval"], "must be a Prometheus duration such as 30s or 1m"))
    labels = s["labels"]
    if not isinstance(labels, dict):
        found.append((f"{VARIABLE}.labels", labels, "must map label names to values"))
    else:
        for key, item in labels.items():
            if not _qualified(key) or not isinstance(item, str) or not _LABEL_VALUE.match(item):
                found.append((f"{VARIABLE}.labels", {key: item}, "is not a Kubernetes label (name: value)"))
            elif key in LABELS or key in DASHBOARD_LABEL:
                found.append((f"{VARIABLE}.labels", {key: item}, "is a label the role sets itself"))
    for key, check, what in (
        ("grafana_namespace", dra.is_dns_label, "a namespace name"),
        ("runtime_class", dra.is_dns_subdomain, "a RuntimeClass name (a DNS subdomain)"),
    ):
        if s[key] != "" and not check(s[key]):
            found.append((f"{VARIABLE}.{key}", s[key], f"must be {what}, or empty"))
    if found:
        return found
    port = settings.get("metrics_port", 8089)
    if str(port) == "0":
        # nothing serves /metrics: scraping, rules and a dashboard would all be of nothing
        for key, what in (("rules", "alerts on metrics"), ("grafana", "a dashboard of metrics")):
            if s[key]:
                found.append(
                    (f"{VARIABLE}.{key}", True, f"{what} that nothing serves: aligned_dra_driver_metrics_port is 0")
                )
        found.append(
            (VARIABLE, value, "scrapes the driver's /metrics, which aligned_dra_driver_metrics_port 0 turns off")
        )
    runtime_class = _reclaim_runtime_class(settings)
    if s["usage"] and s["runtime_class"] and runtime_class and s["runtime_class"] != runtime_class:
        found.append(
            (
                f"{VARIABLE}.runtime_class",
                s["runtime_class"],
                f"the pod has one RuntimeClass, and {reclaim.VARIABLE}.runtime_class says {runtime_class}",
            )
        )
    if s["grafana_namespace"] and not s["grafana"]:
        found.append(
            (f"{VARIABLE}.grafana_namespace", s["grafana_namespace"], "is for the dashboard: set grafana true")
        )
    return found


def _qualified(key: Any) -> bool:
    if not isinstance(key, str):
        return False
    prefix, sep, name = key.rpartition("/")
    return (not sep or dra.is_dns_subdomain(prefix)) and bool(
        re.match(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$", name)
    )


def _reclaim_runtime_class(settings: dict[str, Any]) -> str:
    value = settings.get("reclaim")
    return str(value.get("runtime_class") or "") if reclaim.is_on(value) else ""


def site_problems(values: dict[str, Any]) -> list[tuple[str, Any, str]]:
    """The hosts of one site whose settings differ (host -> its ``aligned_dra_monitoring``): the objects are the
    site's, built once."""
    seen = {
        host: json.dumps(setting(value) if isinstance(value, dict) or not value else value, sort_keys=True)
        for host, value in values.items()
    }
    if len(set(seen.values())) <= 1:
        return []
    shown = ", ".join(f"{host}: {text}" for host, text in sorted(seen.items()))
    return [(VARIABLE, None, f"must be the same on every host of a site (its objects are the site's), got {shown}")]


def address_problems(value: Any, mode: str, addresses: dict[str, Any]) -> list[tuple[str, Any, str]]:
    """Host mode with monitoring on: each node's ``aligned_dra_driver_metrics_address`` (node -> address) must
    be an IP address Prometheus reaches (not loopback, not unspecified); it goes into the Endpoints or the
    scrape configuration, and the driver binds it."""
    if not is_on(value) or mode != "host":
        return []
    found = []
    for node, address in sorted(addresses.items()):
        try:
            ip = ipaddress.ip_address(str(address))
        except ValueError:
            ip = None
        if ip is None or ip.is_loopback or ip.is_unspecified:
            found.append(
                (
                    f"{ADDRESS_VARIABLE} of {node}",
                    address,
                    f"must be the node's IP address that Prometheus reaches: host mode with {VARIABLE} binds the "
                    "driver's /metrics there (127.0.0.1, the default, is not reachable from Prometheus)",
                )
            )
    return found


def problem_lines(found: list[tuple[str, Any, str]]) -> list[str]:
    """``<variable> = <value as JSON>: <reason>`` (a site-wide one without its value)."""
    return [
        f"{variable}: {reason}"
        if variable == VARIABLE and item is None
        else f"{variable} = {json.dumps(item, default=str)}: {reason}"
        for variable, item, reason in found
    ]


def _meta(name: str, namespace: str, extra: dict[str, str], component: str) -> dict[str, Any]:
    labels = dict(LABELS, **{"app.kubernetes.io/component": component}, **extra)
    return {"name": name, "namespace": namespace, "labels": labels}


def _ports(instances: list[dict[str, Any]]) -> list[tuple[str, int]]:
    return [(item["port_name"], int(item["metrics_port"])) for item in instances if int(item["metrics_port"])]


def _endpoint(s: dict[str, Any], port: str, node_label: str) -> dict[str, Any]:
    return {
        "port": port,
        "path": "/metrics",
        "interval": s["interval"],
        # the driver's namespace and pod labels are the claim's: the target's must not rename them
        "honorLabels": True,
        "relabelings": [{"sourceLabels": [node_label], "targetLabel": "node", "action": "replace"}],
    }


def objects(
    value: Any, settings: dict[str, Any], instances: list[dict[str, Any]], addresses: dict[str, str]
) -> list[dict[str, Any]]:
    """The monitoring objects of a site, in apply order: none where the setting is off.

    ``instances``: the driver's plugins on each node (driver_instances.instances); ``addresses``: host mode's
    node -> metrics address.
    """
    s = setting(value)
    if not s:
        return []
    namespace = settings.get("namespace", "aligned-dra")
    extra = dict(s["labels"])
    ports = _ports(instances)
    out: list[dict[str, Any]] = []
    if s["prometheus_operator"] and settings.get("mode", "host") == "daemonset":
        out.append(
            {
                "apiVersion": MONITOR_API,
                "kind": "PodMonitor",
                "metadata": _meta(JOB, namespace, extra, "metrics"),
                "spec": {
                    "jobLabel": "app.kubernetes.io/name",
                    "selector": {"matchLabels": dict(POD_LABELS)},
                    "podMetricsEndpoints": [
                        _endpoint(s, name, "__meta_kubernetes_pod_node_name") for name, _number in ports
                    ],
                },
            }
        )
    elif s["prometheus_operator"]:
        name = f"{JOB}-metrics"
        meta = _meta(name, namespace, extra, "metrics")
        service_ports = [
            {"name": port, "port": number, "targetPort": number, "protocol": "TCP"} for port, number in ports
        ]
        out += [
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": meta,
                "spec": {"clusterIP": "None", "ports": service_ports},
            },
            {
                "apiVersion": "v1",
                "kind": "Endpoints",
                "metadata": _meta(name, namespace, extra, "metrics"),
                "subsets": [
                    {
                        "addresses": [{"ip": str(addresses[node]), "nodeName": node} for node in sorted(addresses)],
                        "ports": [{"name": port, "port": number, "protocol": "TCP"} for port, number in ports],
                    }
                ],
            },
            {
                "apiVersion": MONITOR_API,
                "kind": "ServiceMonitor",
                "metadata": _meta(JOB, namespace, extra, "metrics"),
                "spec": {
                    "jobLabel": "app.kubernetes.io/name",
                    "selector": {"matchLabels": dict(LABELS, **{"app.kubernetes.io/component": "metrics"})},
                    "endpoints": [
                        _endpoint(s, port, "__meta_kubernetes_endpoint_node_name") for port, _number in ports
                    ],
                },
            },
        ]
    if s["prometheus_operator"] and s["rules"]:
        out.append(
            {
                "apiVersion": MONITOR_API,
                "kind": "PrometheusRule",
                "metadata": _meta(JOB, namespace, extra, "alerts"),
                "spec": {"groups": monitoring_rules.groups()},
            }
        )
    if s["grafana"]:
        meta = _meta(
            f"{JOB}-dashboard", s["grafana_namespace"] or namespace, dict(extra, **DASHBOARD_LABEL), "dashboard"
        )
        text = json.dumps(monitoring_dashboard.dashboard(), indent=1, sort_keys=True) + "\n"
        out.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {DASHBOARD_KEY: text}})
    return out


def scrape_config(
    value: Any, settings: dict[str, Any], instances: list[dict[str, Any]], addresses: dict[str, str]
) -> dict[str, Any]:
    """One ``scrape_configs`` entry for a Prometheus without the operator: the DaemonSet's pods found through
    the Kubernetes API (role pod), or host mode's nodes as static targets."""
    s = setting(value) or dict(DEFAULTS)
    ports = _ports(instances)
    entry: dict[str, Any] = {"job_name": JOB, "scrape_interval": s["interval"], "honor_labels": True}
    if settings.get("mode", "host") == "daemonset":
        entry["kubernetes_sd_configs"] = [
            {"role": "pod", "namespaces": {"names": [settings.get("namespace", "aligned-dra")]}}
        ]
        entry["relabel_configs"] = [
            {
                "source_labels": [
                    "__meta_kubernetes_pod_label_app_kubernetes_io_name",
                    "__meta_kubernetes_pod_label_app_kubernetes_io_component",
                ],
                "regex": f"{JOB};kubelet-plugin",
                "action": "keep",
            },
            {
                "source_labels": ["__meta_kubernetes_pod_container_port_name"],
                "regex": "|".join(name for name, _number in ports),
                "action": "keep",
            },
            {"source_labels": ["__meta_kubernetes_pod_node_name"], "target_label": "node"},
        ]
    else:
        entry["static_configs"] = [
            {"targets": [_target(addresses[node], number) for _name, number in ports], "labels": {"node": node}}
            for node in sorted(addresses)
        ]
    return entry


def _target(address: str, port: int) -> str:
    return f"[{address}]:{port}" if ":" in str(address) else f"{address}:{port}"


def _yaml(data: Any, **options: Any) -> str:
    # plain types first: the role's values are str subclasses (Ansible's tagged strings) YAML cannot represent
    import yaml  # here, not at the top: module_utils import without PyYAML (ansible-test sanity import)

    return yaml.safe_dump(json.loads(json.dumps(data)), **options)


def files(
    value: Any, settings: dict[str, Any], instances: list[dict[str, Any]], addresses: dict[str, str]
) -> dict[str, str]:
    """Without the operator, the files for a plain Prometheus (path below the site's driver directory -> text):
    the scrape configuration, and with ``rules`` the rule file. None with the operator, or off."""
    s = setting(value)
    if not s or s["prometheus_operator"]:
        return {}
    header = (
        "# aligned.dra driver: a scrape configuration for Prometheus (docs/monitoring.md).\n"
        "# Add the entry under scrape_configs of prometheus.yml"
        + (f", and {RULES_FILE.rsplit('/', 1)[1]} under rule_files.\n" if s["rules"] else ".\n")
    )
    out = {
        SCRAPE_FILE: header
        + _yaml({"scrape_configs": [scrape_config(value, settings, instances, addresses)]}, sort_keys=False)
    }
    if s["rules"]:
        out[RULES_FILE] = "# aligned.dra driver: alerting rules (docs/monitoring.md#alerts).\n" + _yaml(
            monitoring_rules.rule_file(), sort_keys=False, width=1000
        )
    return out


def nvml(value: Any) -> bool:
    """Whether monitoring gives the plugin that publishes GPUs NVML (``usage``, on by default once on)."""
    s = setting(value)
    return bool(s) and s["usage"] is True


def pod_spec(value: Any, settings: dict[str, Any], spec: dict[str, Any], container: dict[str, Any]) -> None:
    """With usage measured, the DaemonSet's pod ``spec`` and the GPU plugin's ``container`` as NVML needs them,
    as the reclaim watcher's (:func:`reclaim.pod_spec`); what reclaim already gave stays as it is."""
    if not nvml(value):
        return
    # NVML names a GPU's processes by their host PID; the driver finds each one's pod in /proc/<pid>/cgroup
    spec["hostPID"] = True
    names = {item.get("name") for item in container.get("env", [])}
    container["env"] = [
        *container.get("env", []),
        *(dict(item) for item in reclaim.NVML_ENV if item["name"] not in names),
    ]
    runtime_class = setting(value)["runtime_class"] or _reclaim_runtime_class(settings)
    if runtime_class:
        spec["runtimeClassName"] = runtime_class
