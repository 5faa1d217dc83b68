# SPDX-License-Identifier: Apache-2.0
"""The demo's usage of kai-north: six hours of its four teams' GPU use, as the driver exports it.

Made up to show each case of docs/utilization.md on the demo's two DGX H100
nodes (80 GB GPUs, as NVML counts them: 81,559 MiB), one sample every half
hour:

- ``pretrain/pretrain-2x8-0`` (``gpu-nic-pair-8``, eight GPUs of kai-dgx-01):
  trains for four hours (60-70 GiB, SM 0.8-0.9), then no process for two;
- ``finetune/finetune-a`` and ``-b`` (``gpu-nic-pair-1``): bursts, an hour
  busy (SM 0.6), an hour at SM 0.02 (below the threshold: idle);
- ``vision/vision-eval`` (``gpu-nic-pair-1``): allocated, never measured
  (its node was not scraped): unknown, never idle;
- ``vision/vision-small`` (``gpu-nic-pair-1``): 12 GiB of a whole GPU, no SM
  of its own, DCGM's utilization of the GPU 20 %: a candidate for a fraction;
- ``batch/batch-0`` to ``-2`` (``fractional-gpu-burst``, 20 GiB request,
  40 GiB limit): three shares of one GPU (a fourth 20 GiB request would not
  fit its 81,559 MiB), two of them bursting above their request.

:func:`openmetrics` writes ``inventories/demo/files/usage-kai-north.om`` and
:func:`claims_yaml` ``usage-kai-north-claims.yaml``; a test regenerates both
and compares them with the shipped files, so the demo cannot drift from this
description.
"""

from __future__ import annotations

import yaml

MIB = 2**20
GIB = 2**30
GPU_MEMORY = 81559 * MIB
STEP = 1800
POINTS = 12  # six hours: each sample stands for the half hour that ends at it
END = 1_794_996_000  # 2026-11-18T10:00:00Z, a whole step
START = END - (POINTS - 1) * STEP
JOB = {"job": "aligned-dra-driver"}
TEMPLATE_LABEL = "aligned.dev/template"


def _gpu(node: str, index: int) -> dict[str, str]:
    bus = ("18", "2a", "3a", "5d", "9a", "ab", "ba", "db")[index]
    return {
        "node": node,
        "device": f"gpu-0000-{bus}-00-0",
        "gpu_uuid": f"GPU-{node[-2:]}{index:02d}c0de",
        "pci_bus_id": f"0000:{bus}:00.0",
    }


def _claims() -> list[dict]:
    """Each claim's GPU: namespace, claim, pod, template, the GPU, request, limit and its use per point."""
    out = []

    def add(namespace, claim, pod, template, gpu, request, limit, used, sm=None, measured=True, dcgm=None):
        out.append(locals())

    for index in range(8):
        used = [(60 + (p + index) % 11) * GIB if p < 8 else 0 for p in range(POINTS)]
        sm = [0.8 + 0.01 * ((p * 3 + index) % 10) if p < 8 else None for p in range(POINTS)]
        add(
            "pretrain",
            "pretrain-2x8-0",
            "pretrain-2x8-0-0",
            "gpu-nic-pair-8",
            _gpu("kai-dgx-01", index),
            GPU_MEMORY,
            GPU_MEMORY,
            used,
            sm,
        )
    for name, index in (("finetune-a", 0), ("finetune-b", 1)):
        busy = [(p // 2) % 2 == index for p in range(POINTS)]
        add(
            "finetune",
            name,
            f"{name}-pod",
            "gpu-nic-pair-1",
            _gpu("kai-dgx-02", index),
            GPU_MEMORY,
            GPU_MEMORY,
            [30 * GIB] * POINTS,
            [0.6 if b else 0.02 for b in busy],
        )
    add(
        "vision",
        "vision-eval",
        "vision-eval-pod",
        "gpu-nic-pair-1",
        _gpu("kai-dgx-02", 2),
        GPU_MEMORY,
        GPU_MEMORY,
        [],
        measured=False,
    )
    add(
        "vision",
        "vision-small",
        "vision-small-pod",
        "gpu-nic-pair-1",
        _gpu("kai-dgx-02", 3),
        GPU_MEMORY,
        GPU_MEMORY,
        [12 * GIB + (p % 5) * 256 * MIB for p in range(POINTS)],
        dcgm=[20.0] * POINTS,
    )
    for index in range(3):
        burst = index < 2
        used = [
            (8 + 2 * index + ((p * (index + 3)) % 7) + (12 if burst and 4 <= p < 7 else 0)) * GIB for p in range(POINTS)
        ]
        add(
            "batch",
            f"batch-{index}",
            f"batch-{index}-pod",
            "fractional-gpu-burst",
            _gpu("kai-dgx-02", 5),
            20 * GIB,
            40 * GIB,
            used,
            [0.3] * POINTS,
        )
    return out


def _line(name: str, labels: dict[str, str], value: float, point: int) -> str:
    shown = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    shown_value = str(value) if isinstance(value, int) else repr(round(value, 4))
    return f"{name}{{{shown}}} {shown_value} {START + point * STEP}"


def openmetrics() -> str:
    """The usage file: the driver's per-claim and per-GPU series and DCGM's, OpenMetrics with timestamps."""
    families: dict[str, list[str]] = {}
    gpus = {}
    for c in _claims():
        gpu = c["gpu"]
        gpus[gpu["gpu_uuid"]] = gpu
        base = {
            **JOB,
            "node": gpu["node"],
            "namespace": c["namespace"],
            "claim": c["claim"],
            "pod": c["pod"],
            "device": gpu["device"],
            "gpu_uuid": gpu["gpu_uuid"],
        }
        info = {**base, "pool": gpu["node"], "pci_bus_id": gpu["pci_bus_id"]}
        for point in range(POINTS):
            families.setdefault("aligned_dra_claim_device_info", []).append(
                _line("aligned_dra_claim_device_info", info, 1, point)
            )
            if not c["measured"]:
                continue
            for name, value in (
                ("aligned_dra_claim_gpu_memory_used_bytes", c["used"][point]),
                ("aligned_dra_claim_gpu_memory_request_bytes", c["request"]),
                ("aligned_dra_claim_gpu_memory_limit_bytes", c["limit"]),
                ("aligned_dra_claim_gpu_sm_utilization_ratio", (c["sm"] or [None] * POINTS)[point]),
            ):
                if value is not None:
                    families.setdefault(name, []).append(_line(name, base, value, point))
            if c["dcgm"]:
                dcgm = {"job": "dcgm-exporter", "Hostname": gpu["node"], "UUID": gpu["gpu_uuid"]}
                families.setdefault("DCGM_FI_DEV_GPU_UTIL", []).append(
                    _line("DCGM_FI_DEV_GPU_UTIL", dcgm, c["dcgm"][point], point)
                )
    for uuid, gpu in sorted(gpus.items()):
        labels = {**JOB, "device": gpu["device"], "gpu_uuid": uuid}
        families.setdefault("aligned_dra_gpu_memory_total_bytes", []).extend(
            _line("aligned_dra_gpu_memory_total_bytes", labels, GPU_MEMORY, p) for p in range(POINTS)
        )
    lines = []
    for name, members in families.items():
        lines.append(f"# TYPE {name} gauge")
        lines.extend(members)
    return "\n".join(lines) + "\n# EOF\n"


def claims_yaml() -> str:
    """The claims as Kubernetes made them from the templates: each carries its template's label."""
    items = []
    for c in _claims():
        if any(i["metadata"]["name"] == c["claim"] for i in items):
            continue
        items.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {
                    "name": c["claim"],
                    "namespace": c["namespace"],
                    "labels": {TEMPLATE_LABEL: c["template"]},
                },
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.aligned.dev"}}]}},
            }
        )
    header = "---\n# The demo's kai-north claims (tests/support/sites/usage_demo.py writes this file).\n"
    listed = {"apiVersion": "v1", "kind": "List", "items": items}
    return header + yaml.dump(listed, Dumper=_Indented, sort_keys=False)


class _Indented(yaml.SafeDumper):
    """Lists indented under their key, as the collection's YAML lint wants them."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)
