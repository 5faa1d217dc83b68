# SPDX-License-Identifier: Apache-2.0
"""MIG on a KAI Scheduler site (engine ``kai``): what KAI v0.17 would count of MIG devices, and the quotas
refused because of it.

KAI v0.17.0 counts GPUs by name and has no counters (``api.counts_as_gpu``; its ``IsGPUDeviceClass`` and
``populateDRAGPUs``, in the shared folder's schemas): a node's GPUs are *every device* of the ResourceSlices
whose driver name contains ``gpu``, and a claim's GPUs are its ``exactly`` requests of a class whose name
contains ``gpu``, one per device. A MIG device is one device: where the MIG devices are published under a
driver whose name contains ``gpu`` (a ``kai`` site's split GPU driver), each of them counts as one whole GPU
of the node (a dynamic GPU publishes every placement of every profile and, Hopper and newer, the GPU whole: an
H100 then counts as some twenty GPUs; ``schedulers/mig.published_per_gpu`` counts them as the driver publishes),
and a claim on a MIG class whose name contains ``gpu`` counts one whole GPU per partition (a ``1g.10gb`` as much
as a ``7g.80gb``), whatever its memory.

So on a ``kai`` site:

- :func:`quota_refusal`: a GPU-memory amount on a MIG class is refused (KAI has no counters to charge it);
- :func:`counting_problems`: a quota on, or a team template asking for, a MIG class whose name contains
  ``gpu`` is refused (KAI would count each partition as a whole GPU against the queue);
- a device count on a MIG class whose name lacks ``gpu`` (the default ``mig.aligned.dev``) stays what it is
  elsewhere, a ``ResourceQuota`` on the namespace's MIG devices, which Kubernetes counts exactly; KAI counts
  those claims as no GPU at all against the team's queue (:func:`notes` says so);
- :func:`notes`: how many devices KAI would count as GPUs on the MIG hosts, against their GPUs.

The alternatives the messages name: engine ``kueue`` or ``both``, whose counter quotas charge each MIG claim
its GPU memory (``schedulers/kueue/mig.py``), or device counts on MIG classes named without ``gpu``, kept as
ResourceQuotas. KAI's own GPU sharing (``gpu-fraction``, ``gpu-memory`` pod annotations) works through its
device-plugin path, not through DRA claims, and does not apply to MIG devices.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kai.api import (
    KAI_VERSION,
    counts_as_gpu,
)
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.mig import WARNING_PREFIX

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

REASON = (
    f"KAI Scheduler {KAI_VERSION} has no counters: it counts every device of a driver whose name contains 'gpu' "
    "as one GPU, so a MIG partition counts as a whole GPU"
)
ALTERNATIVE = (
    "use engine kueue or both (Kueue charges each MIG claim its GPU memory from the driver's counters), or give "
    "a device count on a MIG class whose name lacks 'gpu' (mig.aligned.dev), which stays a ResourceQuota"
)


def quota_refusal(where: str, key: str, count: Any, cls: str) -> str:
    """Why a GPU-memory amount on MIG class ``cls`` is refused on a ``kai`` site (``where.key``: the setting)."""
    return f"{where}.{key}: {count!r} is GPU memory on the MIG class {cls}; {REASON}; {ALTERNATIVE}"


def _template_problems(where: str, template: str, claim: dict[str, Any], mig_classes: set[str]) -> list[str]:
    spec = claim.get("spec") or {}
    spec = (spec.get("spec") or {}) if claim.get("kind") == "ResourceClaimTemplate" else spec
    problems = []
    for request in (spec.get("devices") or {}).get("requests") or []:
        cls = (request.get("exactly") or {}).get("deviceClassName")
        if cls in mig_classes and counts_as_gpu(cls):
            problems.append(
                f"{where}.templates: template {template}: request {request.get('name')} asks for MIG devices of "
                f"class {cls}, whose name contains 'gpu': KAI would count each partition as a whole GPU against "
                f"the queue; {ALTERNATIVE}"
            )
    return problems


def counting_problems(
    conf: dict[str, Any], claim_objects: list[dict[str, Any]], mig_classes: dict[str, str | None]
) -> list[str]:
    """Quotas and team templates on MIG classes that KAI would count as whole GPUs (names containing ``gpu``)."""
    if not mig_classes:
        return []
    names = set(mig_classes)
    by_name = {
        o["metadata"]["name"]: o for o in claim_objects if o.get("kind") in ("ResourceClaimTemplate", "ResourceClaim")
    }
    problems = []
    for team in conf["teams"]:
        where = f"aligned_dra_teams.teams[{team['name']}]"
        for cls in sorted(set(team["quotas"]) & names):
            if counts_as_gpu(cls):
                problems.append(
                    f"{where}.quotas.{cls}: the class selects MIG devices and its name contains 'gpu': KAI would "
                    f"count each partition as a whole GPU against the queue; {ALTERNATIVE}"
                )
        for template in team["templates"]:
            if template in by_name:
                problems += _template_problems(where, template, by_name[template], names)
    return problems


def notes(
    mig: dict[str, Any] | None,
    published: dict[str, dict[str, int]],
    drivers: dict[str, str] | None,
    mig_classes: dict[str, str | None],
) -> list[str]:
    """What KAI counts of the site's MIG devices; empty without MIG."""
    if not mig:
        return []
    driver = (drivers or {}).get("gpu")
    out = []
    if published and driver and counts_as_gpu(driver):
        gpus = sum(row["gpus"] for row in published.values())
        devices = sum(row["devices"] for row in published.values())
        out.append(
            f"{WARNING_PREFIX}{', '.join(sorted(published))} publish {devices} MIG devices for {gpus} MIG GPUs under {driver}, "
            f"and {REASON}: KAI counts {devices} GPUs there, not {gpus}, and divides the site's GPUs among the "
            "queues by that count"
        )
    elif mig.get("unprobed"):
        out.append(
            f"{WARNING_PREFIX}{', '.join(mig['unprobed'])} have no probed topology: what KAI counts there is unknown"
        )
    plain = [cls for cls in mig_classes if not counts_as_gpu(cls)]
    if plain:
        out.append(
            f"{WARNING_PREFIX}claims on {', '.join(plain)} count as no GPU against a KAI queue (the class names lack 'gpu'); "
            "a team's quota on them is a ResourceQuota on the namespace's MIG devices"
        )
    return out
