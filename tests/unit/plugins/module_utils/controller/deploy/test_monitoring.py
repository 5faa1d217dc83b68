# SPDX-License-Identifier: Apache-2.0
"""aligned_dra_monitoring as the driver role renders it: objects valid for prometheus-operator v0.93's CRDs and
Kubernetes, the scrape configuration, NVML for the GPU plugin, and every refusal naming its setting."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from ansible_collections.aligned.dra.plugins.filter import driver as driver_filter
from ansible_collections.aligned.dra.plugins.module_utils.controller.deploy import (
    driver_instances,
    monitoring,
    monitoring_dashboard,
    monitoring_rules,
)
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers import crd_checks

REPO = Path(__file__).resolve().parents[6]
# The CRDs are read where the shared folder keeps them (its README: not copied into the project)
CRDS = (
    Path(os.environ.get("ALIGNED_DRA_SHARED", str(REPO.parent / "shared")))
    / "schemas"
    / "prometheus-operator-v0.93.0"
    / "crds"
)
MINORS = ("1.34", "1.35", "1.36", "1.37")
IMAGE = "registry.example.com/aligned-dra-driver:0.1.0"
DS = {"mode": "daemonset", "namespace": "aligned-dra", "image": IMAGE, "nodes": [], "metrics_port": 8089}
HOST = {"mode": "host", "namespace": "aligned-dra", "nodes": ["n1", "n2"], "metrics_port": 8089}
ADDRESSES = {"n1": "10.0.0.1", "n2": "fd00::2"}
ALL = {"prometheus_operator": True, "rules": True, "grafana": True}


class OperatorSchemas:
    """crd_checks' schema interface over the CRD files of prometheus-operator v0.93.0."""

    def __init__(self, folder: Path) -> None:
        self.SCOPES: dict[str, str] = {}
        self._schemas: dict[str, dict] = {}
        for path in sorted(folder.glob("monitoring.coreos.com_*.yaml")):
            crd = yaml.safe_load(path.read_text(encoding="utf-8"))
            kind = crd["spec"]["names"]["kind"]
            (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1" and v.get("served")]
            self.SCOPES[kind] = crd["spec"]["scope"]
            schema = dict(version["schema"]["openAPIV3Schema"])
            # metadata is the API server's ObjectMeta: crd_checks.metadata_problems checks it
            schema["properties"] = dict(schema["properties"], metadata={"type": "object"})
            self._schemas[kind] = schema

    def schema(self, kind: str) -> dict:
        return self._schemas[kind]


@pytest.fixture(scope="module")
def operator_schemas() -> OperatorSchemas:
    if not CRDS.is_dir():
        pytest.skip(f"{CRDS}: the shared folder's prometheus-operator CRDs are not here (ALIGNED_DRA_SHARED)")
    return OperatorSchemas(CRDS)


def render(settings: dict, value: dict, addresses: dict | None = None) -> list[dict]:
    settings = dict(settings, monitoring=value)
    return monitoring.objects(value, settings, driver_instances.instances(settings), addresses or {})


def validate(objects: list[dict], schemas: OperatorSchemas) -> None:
    for obj in objects:
        if obj["apiVersion"] == monitoring.MONITOR_API:
            assert crd_checks.object_problems(schemas, obj) == [], obj
        else:
            for minor in MINORS:
                kubernetes_validate.validate(obj, f"{minor}.0", strict=True)


@pytest.mark.parametrize("split", ["", "gpu.aligned.dev"], ids=["one-plugin", "split"])
def test_daemonset_mode_renders_a_pod_monitor_rules_and_a_dashboard_valid_for_the_crds(operator_schemas, split):
    settings = dict(DS, split_gpu_driver=split)
    objects = render(settings, ALL)
    validate(objects, operator_schemas)
    assert [o["kind"] for o in objects] == ["PodMonitor", "PrometheusRule", "ConfigMap"]
    pod_monitor = objects[0]["spec"]
    assert pod_monitor["selector"]["matchLabels"] == monitoring.POD_LABELS
    ports = ["metrics", "metrics-gpu"] if split else ["metrics"]
    assert [e["port"] for e in pod_monitor["podMetricsEndpoints"]] == ports
    assert all(e["honorLabels"] is True for e in pod_monitor["podMetricsEndpoints"])
    assert objects[1]["spec"]["groups"] == monitoring_rules.groups()
    dashboard = objects[2]
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboard["data"][monitoring.DASHBOARD_KEY]) == monitoring_dashboard.dashboard()
    # the pod the PodMonitor selects is the DaemonSet's
    (daemonset,) = [o for o in driver_instances.objects(settings) if o["kind"] == "DaemonSet"]
    assert daemonset["spec"]["template"]["metadata"]["labels"] == monitoring.POD_LABELS
    containers = daemonset["spec"]["template"]["spec"]["containers"]
    assert sorted(p["name"] for c in containers for p in c.get("ports", [])) == ports


def test_host_mode_renders_a_service_endpoints_per_node_and_a_service_monitor(operator_schemas):
    settings = dict(HOST, split_gpu_driver="gpu.aligned.dev")
    objects = render(settings, dict(ALL, labels={"release": "kube-prometheus-stack"}), ADDRESSES)
    validate(objects, operator_schemas)
    assert [o["kind"] for o in objects] == ["Service", "Endpoints", "ServiceMonitor", "PrometheusRule", "ConfigMap"]
    service, endpoints, monitor = objects[:3]
    assert service["spec"] == {
        "clusterIP": "None",
        "ports": [
            {"name": "metrics", "port": 8089, "targetPort": 8089, "protocol": "TCP"},
            {"name": "metrics-gpu", "port": 8090, "targetPort": 8090, "protocol": "TCP"},
        ],
    }
    assert endpoints["metadata"]["name"] == service["metadata"]["name"]
    assert endpoints["subsets"][0]["addresses"] == [
        {"ip": "10.0.0.1", "nodeName": "n1"},
        {"ip": "fd00::2", "nodeName": "n2"},
    ]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert [e["relabelings"][0]["sourceLabels"] for e in monitor["spec"]["endpoints"]] == [
        ["__meta_kubernetes_endpoint_node_name"]
    ] * 2
    assert all(o["metadata"]["labels"]["release"] == "kube-prometheus-stack" for o in objects)


@pytest.mark.parametrize("value", [None, {}, False])
def test_off_renders_nothing_writes_nothing_and_leaves_the_daemonset_as_it_was(value):
    settings = dict(DS, monitoring=value)
    assert monitoring.objects(value, settings, driver_instances.instances(settings), {}) == []
    assert monitoring.files(value, settings, driver_instances.instances(settings), {}) == {}
    plain = driver_instances.objects(DS)
    assert driver_filter.driver_monitoring_objects(plain, settings, {}) == plain


def test_without_the_operator_a_scrape_configuration_and_a_rule_file_are_written():
    settings = dict(HOST, monitoring={"rules": True, "interval": "15s"})
    files = driver_filter.driver_monitoring_files(settings, ADDRESSES)
    assert sorted(files) == [monitoring.RULES_FILE, monitoring.SCRAPE_FILE]
    (entry,) = yaml.safe_load(files[monitoring.SCRAPE_FILE])["scrape_configs"]
    assert entry == {
        "job_name": "aligned-dra-driver",
        "scrape_interval": "15s",
        "honor_labels": True,
        "static_configs": [
            {"targets": ["10.0.0.1:8089"], "labels": {"node": "n1"}},
            {"targets": ["[fd00::2]:8089"], "labels": {"node": "n2"}},
        ],
    }
    assert yaml.safe_load(files[monitoring.RULES_FILE]) == monitoring_rules.rule_file()
    # no PrometheusRule without the operator; the dashboard's ConfigMap needs none
    assert render(HOST, {"rules": True, "grafana": True}, ADDRESSES)[0]["kind"] == "ConfigMap"
    ds = driver_filter.driver_monitoring_files(dict(DS, monitoring={"grafana": True}), {})
    (entry,) = yaml.safe_load(ds[monitoring.SCRAPE_FILE])["scrape_configs"]
    assert entry["kubernetes_sd_configs"] == [{"role": "pod", "namespaces": {"names": ["aligned-dra"]}}]
    assert entry["relabel_configs"][0]["regex"] == "aligned-dra-driver;kubelet-plugin"
    assert driver_filter.driver_monitoring_files(dict(DS, monitoring=ALL), {}) == {}


@pytest.mark.parametrize("split", ["", "gpu.aligned.dev"], ids=["one-plugin", "split"])
def test_usage_gives_the_gpu_plugin_nvml_as_reclaim_does_and_usage_false_gives_nothing(split):
    settings = dict(DS, split_gpu_driver=split, monitoring={"grafana": True, "runtime_class": "nvidia"})
    given = driver_instances.objects(settings)
    before = copy.deepcopy(given)
    objects = driver_filter.driver_monitoring_objects(given, settings, {})
    assert given == before  # the DaemonSet changed is the filter's own copy
    (daemonset,) = [o for o in objects if o["kind"] == "DaemonSet"]
    pod = daemonset["spec"]["template"]["spec"]
    assert pod["hostPID"] is True and pod["runtimeClassName"] == "nvidia"
    nvml = {e["name"]: e.get("value") for c in pod["containers"] for e in c["env"] if "value" in e}
    assert nvml == {"NVIDIA_VISIBLE_DEVICES": "all", "NVIDIA_DRIVER_CAPABILITIES": "utility"}
    gpu = "driver-gpu" if split else "driver"
    for container in pod["containers"]:
        names = [e["name"] for e in container["env"]]
        assert ("NVIDIA_VISIBLE_DEVICES" in names) == (container["name"] == gpu)
    kubernetes_validate.validate(daemonset, "1.36.0", strict=True)
    # with reclaim's already there, nothing twice
    both = dict(settings, reclaim={"mode": "evict"}, fractional_gpus=True)
    objects = driver_filter.driver_monitoring_objects(driver_instances.objects(both), both, {})
    (daemonset,) = [o for o in objects if o["kind"] == "DaemonSet"]
    env = [e["name"] for c in daemonset["spec"]["template"]["spec"]["containers"] for e in c["env"]]
    assert env.count("NVIDIA_VISIBLE_DEVICES") == 1
    off = dict(settings, monitoring={"grafana": True, "usage": False})
    plain = driver_instances.objects(off)
    assert [o for o in driver_filter.driver_monitoring_objects(plain, off, {}) if o["kind"] == "DaemonSet"] == [
        o for o in plain if o["kind"] == "DaemonSet"
    ]


@pytest.mark.parametrize(
    ("value", "settings", "expected"),
    [
        ("yes", {}, 'aligned_dra_monitoring = "yes": must be a dict'),
        ({"grafana": True, "graphana": True}, {}, "aligned_dra_monitoring.graphana = true: is no key of it"),
        ({"rules": "yes"}, {}, 'aligned_dra_monitoring.rules = "yes": must be true or false'),
        ({"interval": "30"}, {}, 'aligned_dra_monitoring.interval = "30": must be a Prometheus duration'),
        ({"labels": {"release": "a b"}}, {}, "is not a Kubernetes label"),
        ({"labels": {"grafana_dashboard": "0"}}, {}, "is a label the role sets itself"),
        ({"grafana": True, "grafana_namespace": "Mon"}, {}, 'aligned_dra_monitoring.grafana_namespace = "Mon"'),
        ({"grafana_namespace": "monitoring"}, {}, "is for the dashboard: set grafana true"),
        ({"rules": True}, {"metrics_port": 0}, "aligned_dra_monitoring.rules = true: alerts on metrics that nothing"),
        ({"grafana": True}, {"metrics_port": 0}, "aligned_dra_monitoring.grafana = true: a dashboard of metrics"),
        (
            {"runtime_class": "nvidia"},
            {"reclaim": {"mode": "evict", "runtime_class": "nvidia-cdi"}},
            "the pod has one RuntimeClass, and aligned_dra_driver_reclaim.runtime_class says nvidia-cdi",
        ),
    ],
)
def test_settings_that_make_no_sense_are_refused_naming_the_setting(value, settings, expected):
    lines = driver_filter.driver_monitoring_problems(dict(DS, **settings, monitoring=value))
    assert any(expected in line for line in lines), lines


def test_hosts_of_a_site_that_disagree_and_host_mode_without_a_reachable_address_are_refused():
    site = {"node-a": {"grafana": True}, "node-b": {"grafana": True, "interval": "30s"}, "node-c": {}}
    lines = driver_filter.driver_monitoring_problems(dict(HOST, monitoring={"grafana": True}), site)
    assert len(lines) == 1 and "must be the same on every host of a site" in lines[0] and "node-c: {}" in lines[0]
    # the same setting spelled with its defaults agrees
    same = {"node-a": {"grafana": True}, "node-b": {"grafana": True, "interval": "30s"}}
    assert driver_filter.driver_monitoring_problems(dict(HOST, monitoring={"grafana": True}), same) == []
    addresses = {"n1": "127.0.0.1", "n2": "0.0.0.0", "n3": "node3.example", "n4": "10.0.0.4"}
    lines = driver_filter.driver_monitoring_problems(dict(HOST, monitoring={"grafana": True}), {}, addresses)
    assert [line.split(" = ")[0] for line in lines] == [
        f"aligned_dra_driver_metrics_address of {node}" for node in ("n1", "n2", "n3")
    ]
    # DaemonSet mode scrapes the pods: no address needed
    assert driver_filter.driver_monitoring_problems(dict(DS, monitoring={"grafana": True}), {}, addresses) == []


def test_every_dashboard_panel_query_is_one_of_the_tested_queries():
    board = monitoring_dashboard.dashboard()
    used = {t["expr"] for panel in board["panels"] for t in panel["targets"]}
    assert used == set(monitoring_dashboard.QUERIES.values())
    assert [v["name"] for v in board["templating"]["list"]] == ["datasource", "node", "namespace"]
