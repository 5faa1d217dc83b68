# SPDX-License-Identifier: Apache-2.0
"""GPU use measured by the driver, read back over a window: the vocabulary of the package.

``settings`` checks ``aligned_dra_usage`` before anything is read,
``series`` holds what was read (one :class:`~.series.Series` per label set,
on the window's grid of steps), ``source`` reads it from Prometheus's HTTP API
or from exported files, ``claims`` folds each claim's series onto the grid,
``summary`` turns it into used versus allocated per claim, team and template,
and ``advice`` into right-sized fractions, ``mig_advice`` into MIG layouts; ``pods`` writes the pods' series as
the replay reads them.
docs/utilization.md says where every figure comes from.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

# The driver's per-claim series (docs/monitoring.md) and DCGM's per-GPU ones, as the stage reads them.
CLAIM_USED = "aligned_dra_claim_gpu_memory_used_bytes"
CLAIM_REQUEST = "aligned_dra_claim_gpu_memory_request_bytes"
CLAIM_LIMIT = "aligned_dra_claim_gpu_memory_limit_bytes"
# NVML's per-process SM figure: a share of time (a kernel ran), not of the SMs.
CLAIM_SM = "aligned_dra_claim_gpu_sm_utilization_ratio"
# NVML GPM's share of the SMs busy (Hopper and newer), of a whole GPU or a MIG device.
CLAIM_SMS_BUSY = "aligned_dra_claim_gpu_sms_busy_ratio"
CLAIM_INFO = "aligned_dra_claim_device_info"
GPU_TOTAL = "aligned_dra_gpu_memory_total_bytes"
DCGM_UTIL = "DCGM_FI_DEV_GPU_UTIL"
# 1 while the driver's NVML answers, 0 when missing or failing (it exports no claim series then).
USAGE_AVAILABLE = "aligned_dra_usage_available"
# Without these the window says nothing of use: a source that has none of them fails, naming them.
REQUIRED = (CLAIM_INFO, CLAIM_USED, CLAIM_REQUEST, CLAIM_LIMIT, GPU_TOTAL)
# Absent where nothing was sampled (SM, GPM) or nothing is deployed (DCGM): noted, not an error.
OPTIONAL = (CLAIM_SM, CLAIM_SMS_BUSY, DCGM_UTIL, USAGE_AVAILABLE)
METRICS = REQUIRED + OPTIONAL


class UsageError(ValueError):
    """Usage that cannot be read or used; the message names the option, the series or the file."""
