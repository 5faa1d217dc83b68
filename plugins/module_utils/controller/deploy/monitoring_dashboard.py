# SPDX-License-Identifier: Apache-2.0
"""The driver's Grafana dashboard (``aligned_dra_monitoring.grafana``): GPU shares and use against allocation.

:func:`dashboard` is the dashboard's JSON model: per GPU its shares (each
claim's memory request, limit and use, its SM use where NVML measures it, the
GPU's total and memory no claim accounts for) and per namespace the memory used
against the memory allocated, as GPUs' worth too, and DCGM's GPU utilisation
joined to the pods (:data:`DCGM_JOIN`; empty where no DCGM exporter is
scraped). :data:`QUERIES` holds every panel's query by name, so the tests ask
a real Prometheus the very queries the panels show.

Variables: ``datasource`` (a Prometheus), ``node`` and ``namespace`` (regular
expressions, all by default). Controller-side; no Ansible imports.
"""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.deploy.monitoring_rules import JOB

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

UID = "aligned-dra-gpu-shares"
TITLE = "aligned.dra - GPU shares and use"
_CLAIM = f'job="{JOB}", node=~"$node", namespace=~"$namespace"'
_GPU = f'job="{JOB}", node=~"$node"'
# Per-GPU series of DCGM's exporter carry the GPU's UUID as UUID, the driver's info series as gpu_uuid: the
# info series (one per claim and device, several on a shared GPU) on the left, so that each pod keeps its
# own labels and a GPU shared by several claims is no many-to-many match; max by (UUID) folds the copies a
# second exporter or a rollout gives. On a shared GPU each pod is shown the whole GPU's utilisation (DCGM
# measures GPUs, not processes): the per-share figures are the driver's own.
DCGM_JOIN = (
    'label_replace(aligned_dra_claim_device_info{job="' + JOB + '"}, "UUID", "$1", "gpu_uuid", "(.*)")'
    " * on(UUID) group_left() max by (UUID) (DCGM_FI_DEV_GPU_UTIL)"
)
# The GPU's fraction each claim is allocated (its memory request over the GPU's memory), and uses
_SHARE_OF_GPU = "on(instance, gpu_uuid) group_left() aligned_dra_gpu_memory_total_bytes{" + _GPU + "}"
# A claim several pods share repeats its request and limit on each pod's series: folded per claim and device
# before a sum (its use is each pod's own processes', summed as it is)
_ALLOCATED = (
    "max by (instance, node, namespace, claim, device, gpu_uuid) (aligned_dra_claim_gpu_memory_request_bytes{"
    + _CLAIM
    + "})"
)
QUERIES = {
    "gpu_total": f"aligned_dra_gpu_memory_total_bytes{{{_GPU}}}",
    "gpu_used": f"aligned_dra_gpu_memory_used_bytes{{{_GPU}}}",
    "gpu_unattributed": f"aligned_dra_gpu_memory_unattributed_bytes{{{_GPU}}}",
    "share_request": f"aligned_dra_claim_gpu_memory_request_bytes{{{_CLAIM}}}",
    "share_limit": f"aligned_dra_claim_gpu_memory_limit_bytes{{{_CLAIM}}}",
    "share_used": f"aligned_dra_claim_gpu_memory_used_bytes{{{_CLAIM}}}",
    "share_sm": f"aligned_dra_claim_gpu_sm_utilization_ratio{{{_CLAIM}}}",
    "namespace_used": f"sum by (namespace) (aligned_dra_claim_gpu_memory_used_bytes{{{_CLAIM}}})",
    "namespace_allocated": f"sum by (namespace) ({_ALLOCATED})",
    "namespace_used_ratio": f"sum by (namespace) (aligned_dra_claim_gpu_memory_used_bytes{{{_CLAIM}}})"
    f" / sum by (namespace) ({_ALLOCATED})",
    "namespace_gpus_allocated": f"sum by (namespace) ({_ALLOCATED} / {_SHARE_OF_GPU})",
    "namespace_gpus_used": f"sum by (namespace) (aligned_dra_claim_gpu_memory_used_bytes{{{_CLAIM}}} / {_SHARE_OF_GPU})",
    "pod_gpu_utilization_dcgm": DCGM_JOIN.replace(f'{{job="{JOB}"}}', f"{{{_CLAIM}}}"),
}
# what each panel shows: (title, kind, unit, [(query name, legend)], grid position x, y, w, h)
_PANELS: tuple[tuple[str, str, str, list[tuple[str, str]], tuple[int, int, int, int]], ...] = (
    (
        "GPU memory: total, used, used by no claim",
        "timeseries",
        "bytes",
        [
            ("gpu_total", "{{node}} {{device}} total"),
            ("gpu_used", "{{node}} {{device}} used"),
            ("gpu_unattributed", "{{node}} {{device}} used by no claim"),
        ],
        (0, 0, 24, 8),
    ),
    (
        "Shares per GPU: memory request, limit and use",
        "table",
        "bytes",
        [
            ("share_request", "request"),
            ("share_limit", "limit"),
            ("share_used", "used"),
        ],
        (0, 8, 24, 9),
    ),
    (
        "Memory used per share",
        "timeseries",
        "bytes",
        [("share_used", "{{node}} {{device}} {{namespace}}/{{claim}}")],
        (0, 17, 12, 8),
    ),
    (
        "SM use per share (where NVML measures it)",
        "timeseries",
        "percentunit",
        [("share_sm", "{{node}} {{device}} {{namespace}}/{{claim}}")],
        (12, 17, 12, 8),
    ),
    (
        "Per namespace: GPU memory used and allocated",
        "timeseries",
        "bytes",
        [("namespace_used", "{{namespace}} used"), ("namespace_allocated", "{{namespace}} allocated")],
        (0, 25, 12, 8),
    ),
    (
        "Per namespace: used / allocated",
        "bargauge",
        "percentunit",
        [("namespace_used_ratio", "{{namespace}}")],
        (12, 25, 12, 8),
    ),
    (
        "Per namespace: GPUs allocated and used (memory, in GPUs' worth)",
        "timeseries",
        "short",
        [("namespace_gpus_allocated", "{{namespace}} allocated"), ("namespace_gpus_used", "{{namespace}} used")],
        (0, 33, 12, 8),
    ),
    (
        "GPU utilisation per pod (DCGM exporter, whole GPU)",
        "timeseries",
        "percent",
        [("pod_gpu_utilization_dcgm", "{{namespace}}/{{pod}} {{device}}")],
        (12, 33, 12, 8),
    ),
)
_DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def _panel(index: int, title: str, kind: str, unit: str, targets: list[tuple[str, str]], grid: tuple) -> dict:
    table = kind == "table"
    panel: dict[str, Any] = {
        "id": index + 1,
        "type": kind,
        "title": title,
        "datasource": dict(_DATASOURCE),
        "gridPos": dict(zip(("x", "y", "w", "h"), grid, strict=True)),
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "targets": [
            {
                "refId": chr(ord("A") + number),
                "datasource": dict(_DATASOURCE),
                "expr": QUERIES[name],
                "legendFormat": legend,
                **({"format": "table", "instant": True} if table else {}),
            }
            for number, (name, legend) in enumerate(targets)
        ],
    }
    if table:
        # one row per claim and device: the three instant queries joined on their labels
        panel["transformations"] = [
            {"id": "merge", "options": {}},
            {
                "id": "organize",
                "options": {
                    "excludeByName": {"Time": True, "__name__": True, "job": True, "instance": True, "pod": False},
                    "renameByName": {"Value #A": "request", "Value #B": "limit", "Value #C": "used"},
                },
            },
        ]
    return panel


def _variable(name: str, label: str, query: str) -> dict[str, Any]:
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": dict(_DATASOURCE),
        "query": {"query": query, "refId": name},
        "definition": query,
        "refresh": 2,
        "includeAll": True,
        "multi": True,
        "allValue": ".*",
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "sort": 1,
    }


def dashboard() -> dict[str, Any]:
    """The dashboard's JSON model (Grafana 10 and newer; schemaVersion 39)."""
    return {
        "uid": UID,
        "title": TITLE,
        "tags": ["aligned.dra", "gpu", "dra"],
        "timezone": "browser",
        "schemaVersion": 39,
        "editable": True,
        "refresh": "1m",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "label": "Prometheus",
                    "type": "datasource",
                    "query": "prometheus",
                    "current": {},
                },
                _variable("node", "Node", f'label_values(aligned_dra_gpu_memory_total_bytes{{job="{JOB}"}}, node)'),
                _variable(
                    "namespace",
                    "Namespace",
                    f'label_values(aligned_dra_claim_device_info{{job="{JOB}"}}, namespace)',
                ),
            ]
        },
        "panels": [_panel(index, *spec) for index, spec in enumerate(_PANELS)],
    }
