# SPDX-License-Identifier: Apache-2.0
"""The metrics the bundled driver exports (``/metrics``), as a site's report lists them.

A site with the driver (``<output_dir>/<site>/driver/``, written by the driver
role) shows this table, so that whoever reads the report knows what Prometheus
can ask (docs/monitoring.md). A test holds it to the driver's own registry
(driver/aligned_dra_driver/usage/metrics.py) and to the use metrics' contract.

Controller-side; no Ansible imports.
"""

from __future__ import annotations

_CLAIM = "namespace, claim, pod, device, gpu_uuid"
# (name as Prometheus stores it, labels, what it says)
METRICS: tuple[tuple[str, str, str], ...] = (
    ("aligned_dra_claim_operations_total", "operation, result", "claims prepared and unprepared"),
    ("aligned_dra_claim_operation_seconds", "operation", "time to prepare or unprepare a claim (histogram)"),
    ("aligned_dra_published_devices", "", "devices in the node's ResourceSlices"),
    ("aligned_dra_published_slices", "", "ResourceSlices of the node's pool"),
    ("aligned_dra_prepared_claims", "", "claims in the checkpoint"),
    ("aligned_dra_errors_total", "operation", "errors by operation"),
    ("aligned_dra_unhealthy_devices", "", "devices whose last health check failed"),
    ("aligned_dra_device_unhealthy", "device, cause, effect", "1 per unhealthy device"),
    ("aligned_dra_api_consecutive_errors", "", "API requests failed in a row"),
    ("aligned_dra_last_publish_timestamp_seconds", "", "time of the last publication"),
    ("aligned_dra_last_publish_age_seconds", "", "seconds since the last publication (-1: none)"),
    ("aligned_dra_degraded", "", "1 while /healthz says degraded"),
    ("aligned_dra_cdi_restore_pending_claims", "", "CDI specs not restored yet"),
    ("aligned_dra_claim_status_queue", "", "claim status writes waiting"),
    ("aligned_dra_claim_status_dropped_total", "", "claim status writes given up"),
    ("aligned_dra_mig_kept_instances", "", "MIG instances no claim holds, kept: a process runs on them"),
    ("aligned_dra_mig_unreadable_gpus", "cause", "MIG GPUs NVML could not read: last publication kept, or withdrawn"),
    ("aligned_dra_published_device_taints", "cause, effect", "device taints published"),
    ("aligned_dra_rails_file_error", "", "1 while --rails-file cannot be used"),
    ("aligned_dra_rail_problems", "", "problems of the rail rule at the last scan"),
    ("aligned_dra_rail_nics", "", "RDMA NICs on a rail"),
    ("aligned_dra_reclaims_total", "gpu", "claims evicted to take GPU memory back"),
    ("aligned_dra_gpu_bytes_above_request", "gpu", "memory fractions use above their requests"),
    ("aligned_dra_claim_gpu_memory_used_bytes", _CLAIM, "GPU memory a claim's processes use"),
    ("aligned_dra_claim_gpu_memory_request_bytes", _CLAIM, "GPU memory a claim requested"),
    ("aligned_dra_claim_gpu_memory_limit_bytes", _CLAIM, "GPU memory a claim may use"),
    (
        "aligned_dra_claim_gpu_sm_utilization_ratio",
        _CLAIM,
        "share of time a claim's kernels ran, 0-1 (absent where unknown)",
    ),
    (
        "aligned_dra_claim_gpu_sms_busy_ratio",
        _CLAIM,
        "share of the SMs busy on a claim's whole GPU or MIG device, 0-1 (NVML GPM, Hopper and newer; absent where unknown)",
    ),
    ("aligned_dra_gpu_memory_used_bytes", "device, gpu_uuid", "GPU memory used"),
    ("aligned_dra_gpu_memory_total_bytes", "device, gpu_uuid", "GPU memory"),
    ("aligned_dra_gpu_memory_unattributed_bytes", "device, gpu_uuid", "GPU memory used by no claim"),
    (
        "aligned_dra_claim_device_info",
        "namespace, claim, pod, device, pool, gpu_uuid, pci_bus_id",
        "1 per prepared device: joins per-GPU series (DCGM's UUID) to pods",
    ),
    ("aligned_dra_usage_available", "", "1 while NVML measures use"),
)


def rows() -> list[dict[str, str]]:
    """The table's rows: ``{"name", "labels", "meaning"}``."""
    return [{"name": name, "labels": labels, "meaning": meaning} for name, labels, meaning in METRICS]
