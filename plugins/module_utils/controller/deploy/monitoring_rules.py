# SPDX-License-Identifier: Apache-2.0
"""The driver's alerting rules (``aligned_dra_monitoring.rules``): what a GPU platform team needs paged or told.

:func:`groups` is the rule groups in Prometheus's rule-file shape: the
PrometheusRule's ``spec`` with the operator, the ``rules.yml`` beside the
scrape configuration without it (docs/monitoring.md#alerts). Every alert is
unit-tested with ``promtool test rules`` (firing and not firing), and the
queries are asked of a real Prometheus in the tests.

The series are the driver's (``driver/aligned_dra_driver/usage/metrics.py``; its
counters end in ``_total`` as the Prometheus client writes them) under the
job :data:`JOB` that every way of scraping it sets; ``node`` is the target's
node, which the scrape configurations add.

Controller-side; no Ansible imports.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

JOB = "aligned-dra-driver"
GROUP = "aligned-dra-driver"
RUNBOOK = "docs/monitoring.md#alerts"
# a claim's memory above this share of its limit is near it: MPS refuses allocations past the limit
NEAR_LIMIT_RATIO = 0.9
# SM use below this (0-1) counts as idle; memory 0 is idle whatever NVML says of SM use
IDLE_SM_RATIO = 0.01
# how old the last ResourceSlice publication may be: the driver republishes at least every rescan
PUBLISH_AGE_SECONDS = 900
API_ERRORS_IN_A_ROW = 3
# one claim's device on one node: its pods' series folded (each repeats the claim's request and limit)
_CLAIM_KEY = "job, instance, node, namespace, claim, device, gpu_uuid"


def _alert(name: str, expr: str, duration: str, severity: str, summary: str, description: str) -> dict[str, Any]:
    rule: dict[str, Any] = {"alert": name, "expr": expr}
    if duration:
        rule["for"] = duration
    rule["labels"] = {"severity": severity}
    rule["annotations"] = {"summary": summary, "description": description, "runbook_url": f"{RUNBOOK}-{name.lower()}"}
    return rule


def alerts() -> list[dict[str, Any]]:
    """The alerting rules, each with ``for``, a severity and what to do (docs/monitoring.md#alerts)."""
    job = f'job="{JOB}"'
    return [
        _alert(
            "AlignedDraDriverDown",
            f"up{{{job}}} == 0",
            "5m",
            "critical",
            "The DRA driver on {{ $labels.node }} does not answer its scrape",
            "Prometheus cannot scrape {{ $labels.instance }} for 5 minutes: the driver is not running, or its "
            "metrics port is not reachable. Its devices are neither prepared nor republished while it is down.",
        ),
        _alert(
            "AlignedDraDriverDegraded",
            f"aligned_dra_degraded{{{job}}} == 1",
            "10m",
            "warning",
            "The DRA driver on {{ $labels.node }} reports itself degraded",
            "/healthz of {{ $labels.instance }} has said degraded for 10 minutes (API errors in a row, an old "
            "publication, or CDI specs not restored); its log says which.",
        ),
        _alert(
            "AlignedDraDriverNotPublishing",
            f"aligned_dra_last_publish_age_seconds{{{job}}} > {PUBLISH_AGE_SECONDS}"
            f" or aligned_dra_last_publish_age_seconds{{{job}}} < 0",
            "15m",
            "critical",
            "The DRA driver on {{ $labels.node }} has not published its devices",
            "The last successful ResourceSlice publication of {{ $labels.instance }} is older than "
            f"{PUBLISH_AGE_SECONDS // 60} minutes, or there has been none since it started: the scheduler "
            "allocates from what it last published.",
        ),
        _alert(
            "AlignedDraDriverApiErrors",
            f"aligned_dra_api_consecutive_errors{{{job}}} >= {API_ERRORS_IN_A_ROW}",
            "5m",
            "warning",
            "The DRA driver on {{ $labels.node }} cannot reach the API server",
            "{{ $value }} API requests of {{ $labels.instance }} have failed in a row for 5 minutes "
            "(credentials, admission policy, or the API server itself).",
        ),
        _alert(
            "AlignedDraDriverErrors",
            f"sum by (job, instance, node, operation) (increase(aligned_dra_errors_total{{{job}}}[15m])) > 0",
            "15m",
            "warning",
            "The DRA driver on {{ $labels.node }} keeps failing to {{ $labels.operation }}",
            "{{ $labels.instance }} has counted {{ $labels.operation }} errors in every 15 minutes for 15 minutes.",
        ),
        _alert(
            "AlignedDraDeviceUnhealthy",
            f"aligned_dra_device_unhealthy{{{job}}} == 1",
            "5m",
            "warning",
            "Device {{ $labels.device }} on {{ $labels.node }} is unhealthy ({{ $labels.cause }})",
            "The driver's health check of {{ $labels.device }} has failed for 5 minutes (cause "
            "{{ $labels.cause }}, taint effect {{ $labels.effect }}); new claims avoid it where the taint is "
            "published, running pods may be affected.",
        ),
        _alert(
            "AlignedDraClaimsReclaimed",
            f"sum by (job, instance, node, gpu) (increase(aligned_dra_reclaims_total{{{job}}}[1h])) > 0",
            "",
            "info",
            "Pods were evicted to take back memory of GPU {{ $labels.gpu }} on {{ $labels.node }}",
            "The reclaim watcher evicted claims above their request on {{ $labels.gpu }} in the last hour: the "
            "GPU ran short of memory. Raise those claims' requests, or place fewer of them on a GPU.",
        ),
        _alert(
            "AlignedDraClaimNearMemoryLimit",
            f"aligned_dra_claim_gpu_memory_used_bytes{{{job}}} / aligned_dra_claim_gpu_memory_limit_bytes{{{job}}}"
            f" > {NEAR_LIMIT_RATIO} and aligned_dra_claim_gpu_memory_limit_bytes{{{job}}} > 0",
            "10m",
            "warning",
            "Claim {{ $labels.namespace }}/{{ $labels.claim }} is near its GPU memory limit",
            "Pod {{ $labels.pod }} has used more than "
            f"{round(NEAR_LIMIT_RATIO * 100)}% of the GPU memory limit of its claim on {{{{ $labels.device }}}} "
            "for 10 minutes: allocations past the limit fail.",
        ),
        _alert(
            "AlignedDraGpuAllocatedIdle",
            # per claim: a claim several pods share is idle only when all of them are
            f"max by ({_CLAIM_KEY}) (aligned_dra_claim_gpu_memory_used_bytes{{{job}}}) == 0"
            f" or max by ({_CLAIM_KEY}) (aligned_dra_claim_gpu_sm_utilization_ratio{{{job}}}) < {IDLE_SM_RATIO}",
            "1h",
            "info",
            "Claim {{ $labels.namespace }}/{{ $labels.claim }} holds GPU {{ $labels.device }} idle",
            "The GPU (or share of it) allocated to claim {{ $labels.claim }} on {{ $labels.node }} has had no memory "
            f"used or under {round(IDLE_SM_RATIO * 100)}% SM use for an hour: it could serve another workload.",
        ),
        _alert(
            "AlignedDraUsageUnavailable",
            f"aligned_dra_usage_available{{{job}}} == 0",
            "15m",
            "warning",
            "The DRA driver on {{ $labels.node }} cannot measure GPU use",
            "NVML is missing or failing for {{ $labels.instance }}: no per-claim use is measured, and the idle "
            "and near-limit alerts are blind on that node.",
        ),
    ]


def groups() -> list[dict[str, Any]]:
    """The rule groups (Prometheus's rule-file ``groups``)."""
    return [{"name": GROUP, "rules": alerts()}]


def rule_file() -> dict[str, Any]:
    """A rule file for a Prometheus without the operator (``rule_files``)."""
    return {"groups": groups()}
