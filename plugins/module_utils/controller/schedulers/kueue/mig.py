# SPDX-License-Identifier: Apache-2.0
"""GPU-memory quotas on MIG devices with Kueue: a counter source on the MIG DeviceClasses' mapping.

Kueue (KEP-2941 "Partitionable Devices", gate ``KueueDRAIntegrationPartitionableDevices``: alpha and off in
v0.18, beta and on from v0.19) can charge a workload what its devices consume of a counter the driver
publishes, instead of one unit per device. This collection's driver publishes each dynamic MIG GPU as a
counter set whose ``memory`` counter is the GPU's MIG memory, and each partition consumes its profile's
memory from it (``dra/mig.py``), so a team's quota on MIG devices can be GPU memory: a ``1g.10gb`` charges
10Gi and a ``3g.40gb`` 40Gi of the same quota.

A team gives it as an amount of memory on the class of every MIG device (``quotas: {mig: 80Gi}``, class
key ``mig`` or ``mig.aligned.dev``); :func:`counter_entry` then maps every MIG DeviceClass of the site (that
class and the one per profile) to one logical resource, ``aligned.dev/mig-memory`` by default, with one
``counter`` source (counter ``memory``, the driver that publishes the MIG devices, a selector for MIG
devices of that driver), and the Configuration fragment turns the gate on. The cohort's nominal quotas are
then checked against what Kueue can charge on the site's MIG GPUs at once (:func:`capacity_row`, from the
controller's MIG model through ``controller/schedulers/mig.site``), and :func:`charges` says what each claim
costs: the memory the driver publishes for its profile (NVML's size where the probe read it).

Refused, naming the setting and the reason:

- a memory amount on a per-profile MIG class: every MIG class is in the one mapping (Kueue lets a class
  count toward one resource per counter), so the quota goes on the class of every MIG device;
- hosts in mode ``static``: their instances are published without ``consumesCounters`` and Kueue marks
  every workload that matches such a device inadmissible ("Device has no consumesCounters"); give device
  counts, or run those hosts dynamic;
- a site on Kubernetes 1.34: Kueue's DRA setup guide asks 1.35 or later for counter quotas;
- a minor whose ``DRAPartitionableDevices`` gate is off (no counters published), Kueue v0.18 with a site
  that also counts capacity, a class with an extended resource name (Kueue refuses extended-resource
  requests on classes with sources), more than 8 MIG classes (one mapping lists at most 8).

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

from fractions import Fraction

from ansible_collections.aligned.dra.plugins.module_utils.controller.deploy import mig as deploy_mig
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers import mig as schedulers_mig
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kueue.api import (
    GATE_PARTITIONABLE,
    MAX_CLASSES_PER_MAPPING,
    RESOURCE_PREFIX,
    UNIT_COUNTER,
    KueueError,
    amount,
    amount_out,
    gate_default,
)
from ansible_collections.aligned.dra.plugins.module_utils.dra import mig as dra_mig
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

COUNTER = dra_mig.MEMORY
DEFAULT_RESOURCE = RESOURCE_PREFIX + "mig-memory"
# Kueue v0.19's DRA setup guide ("Set up counter-based quota"): "Kubernetes 1.35+ with the DRAPartitionableDevices
# feature gate enabled"
KUBERNETES_MINIMUM = "1.35"


def _minor_key(minor: str) -> tuple[int, ...]:
    return tuple(int(part) for part in str(minor).split(".")[:2] if part.isdigit())


def counter_entry(
    cls: str,
    where: str,
    claim_objects: list[dict[str, Any]],
    extended: dict[str, str],
    mig: dict[str, Any] | None,
    minor: str | None,
    feature_gates: dict[str, bool] | None,
    used: set[str] | frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """The mapping entry of a MIG class counted in GPU memory: ``{"unit", "capacity", "driver", "counter",
    "classes", "selector", "default_resource"}``; :class:`KueueError` where Kueue could not count it.

    ``classes`` lists every MIG class of the site where one mapping holds them (at most 8), so the
    Configuration does not change as teams take other templates; else the class of every MIG device and those
    the teams' templates ask for (``used``), refused when even those are more than 8.
    """
    classes = schedulers_mig.mig_classes(claim_objects)
    pool = schedulers_mig.pool_class(classes)
    if cls != pool:
        raise KueueError(
            f"{where}: {cls} selects the MIG profile {classes[cls]}; Kueue charges GPU memory of every MIG profile "
            f"to one quota, given on the class of every MIG device ({pool}), and each claim is charged its "
            "profile's memory; give a device count here, or move the amount to that class"
        )
    hosts = (mig or {}).get("hosts") or {}
    if hosts.get("static"):
        raise KueueError(
            f"{where}: {', '.join(hosts['static'])} run MIG in mode static, whose instances are published "
            "without consumesCounters, and Kueue marks every workload matching such a device inadmissible; "
            "give a device count on the MIG classes, or run those hosts in mode dynamic"
        )
    if minor and _minor_key(minor) < _minor_key(KUBERNETES_MINIMUM):
        raise KueueError(
            f"{where}: Kueue counts GPU memory from the counters of partitionable devices only on Kubernetes "
            f"{KUBERNETES_MINIMUM} or later (Kueue's DRA setup guide, 'Set up counter-based quota'), and the site runs "
            f"{minor}; give device counts on the MIG classes, or upgrade the cluster"
        )
    if minor:
        for host in hosts.get("dynamic") or []:
            problems = deploy_mig.partitionable_problems(mig["settings"][host], minor, feature_gates)
            if problems:
                raise KueueError(
                    f"{where}: Kueue counts MIG memory from the counters of partitionable devices, and on "
                    f"{host}: {problems[0]}"
                )
    for name in classes:
        if name in extended:
            raise KueueError(
                f"{where}: DeviceClass {name} has the extended resource name {extended[name]!r}, and Kueue marks "
                "extended-resource requests of a class counted by counters inadmissible; drop the name or give "
                "a device count"
            )
    listed = list(classes)
    if len(listed) > MAX_CLASSES_PER_MAPPING:
        listed = [name for name in classes if name == pool or name in used]
    if len(listed) > MAX_CLASSES_PER_MAPPING:
        raise KueueError(
            f"{where}: the teams' templates ask for {len(listed)} MIG DeviceClasses ({', '.join(listed)}) and one "
            f"Kueue mapping lists at most {MAX_CLASSES_PER_MAPPING}; give the teams templates of fewer profiles"
        )
    by_name = {o["metadata"]["name"]: o for o in claim_objects if o.get("kind") == "DeviceClass"}
    driver = schedulers_mig.class_driver(by_name[cls])
    if not driver:
        raise KueueError(f"{where}: the driver of DeviceClass {cls} cannot be read from its selectors")
    selector = f'device.driver == "{driver}" && device.attributes["{dra.DRIVER_NAME}"].kind == "{dra_mig.KIND}"'
    return {
        "unit": UNIT_COUNTER,
        "capacity": None,
        "driver": driver,
        "counter": COUNTER,
        "classes": listed,
        "selector": selector,
        "default_resource": DEFAULT_RESOURCE,
    }


def source(entry: dict[str, Any]) -> dict[str, Any]:
    """The mapping's ``sources`` entry: the counter, the driver and the selector of MIG devices."""
    return {
        "counter": {
            "name": entry["counter"],
            "driver": entry["driver"],
            "deviceSelector": {"cel": {"expression": entry["selector"]}},
        }
    }


def gate_notes(mappings: dict[str, dict[str, Any]], kueue_minor: str) -> list[str]:
    """The counter gate named where the site's Kueue has it off by default (v0.18: alpha)."""
    counted = sorted(e["resource"] for e in mappings.values() if e["unit"] == UNIT_COUNTER)
    if not counted or gate_default(GATE_PARTITIONABLE, kueue_minor):
        return []
    return [
        f"{schedulers_mig.WARNING_PREFIX}Kueue {kueue_minor}: {GATE_PARTITIONABLE} is alpha and off by default, and Kueue refuses to start with "
        f"the counter source of {', '.join(counted)} without it: kueue-configuration.yaml turns it on, merge its "
        "featureGates into Kueue's configuration (or use Kueue v0.19, where it is beta and on)"
    ]


def engine_notes(engine: str, mappings: dict[str, dict[str, Any]]) -> list[str]:
    """Engine ``both``: the namespaces' ResourceQuotas leave the MIG memory quota to Kueue."""
    counted = sorted(cls for cls, e in mappings.items() if e["unit"] == UNIT_COUNTER)
    if engine != "both" or not counted:
        return []
    return [
        f"{', '.join(counted)}: the quota is GPU memory, which Kueue alone counts; the namespaces' ResourceQuotas "
        "count devices and leave the MIG classes out, so pods that bypass Kueue are not capped on MIG devices"
    ]


def counting_notes(cls: str, entry: dict[str, Any], mig: dict[str, Any] | None) -> list[str]:
    """What Kueue charges for the MIG classes, counted in memory or in devices."""
    if entry["unit"] == UNIT_COUNTER:
        return [
            f"{entry['resource']}: Kueue charges each MIG claim of {', '.join(entry['classes'])} the memory its "
            "device consumes of its GPU's counter set (a broad selector that matches several profiles: the "
            "largest), so each partition costs its profile's memory, not a whole device"
        ]
    if mig is not None and cls in (mig.get("classes") or {}) and (mig["classes"][cls] is None):
        return [
            f"{cls}: counted in devices, so Kueue charges a 1g MIG device as much as a 7g one; give the quotas "
            "as GPU memory (80Gi) to charge each partition its memory"
        ]
    return []


def charges(mig: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """What Kueue charges one claim of each MIG profile: the largest ``memory`` its matching devices consume
    (``pkg/dra/counters.go`` ``computeCounterCharges``, Kueue v0.19.2: the largest counter value of the matching
    devices, times the request's count), as the driver publishes it for the site's GPUs: NVML's size where the
    probe read it, the documented one (the size in the profile's name) where nothing was probed.

    ``{profile: {"charge" (a quantity), "charge_bytes", "source" (nvml, documented, or both where GPUs differ)}}``.
    """
    found: dict[str, dict[str, Any]] = {}
    for entry in (mig or {}).get("sets") or []:
        if entry["kind"] == schedulers_mig.PARTITIONS and entry["per_gpu"]["memory_counter_bytes"] is None:
            continue  # static: no counters published, never charged by counter
        for profile, memory in entry["profiles"].items():
            value = int(Fraction(amount(memory)))
            row = found.setdefault(profile, {"charge_bytes": 0, "sources": set()})
            row["charge_bytes"] = max(row["charge_bytes"], value)
            row["sources"].add(entry["source"])
    return {
        profile: {
            "charge": dra_mig.quantity(row["charge_bytes"]),
            "charge_bytes": row["charge_bytes"],
            "source": ", ".join(sorted(row["sources"])),
        }
        for profile, row in sorted(found.items())
    }


def capacity_row(row: dict[str, Any], nominal: Fraction, mig: dict[str, Any] | None) -> list[str]:
    """The cohort's nominal GPU memory against the most Kueue can charge on the site's MIG GPUs at once (per GPU
    ``schedulers/mig.most_charged``: the largest sum of the profiles' memory, as published, over partitions that
    exist together); fills ``row`` (also ``memory_counters``, the driver's ``memory`` counters, and ``charges``
    per profile), returns the problems."""
    capacity = (mig or {}).get("capacity") or {}
    sets = (mig or {}).get("sets")
    row["bound"] = capacity.get("bound")
    row["sources"] = capacity.get("sources")
    if capacity.get("memory_bytes") is None or sets is None:
        row["reason"] = capacity.get("reason") or "the site's MIG memory is unknown"
        return []
    total = sum(s["gpus"] * s["per_gpu"]["charge_bytes"] for s in sets)
    row["capacity"] = amount_out(Fraction(total), UNIT_COUNTER)
    row["memory_counters"] = capacity.get("memory")
    row["charges"] = charges(mig)
    factor = Fraction(row["factor"])
    documented = "documented" in (row["sources"] or {})
    how = (
        "the most Kueue charges on the site's MIG GPUs at once (each partition its profile's memory as the driver "
        "publishes it, "
        + ("from the geometry NVIDIA documents (no NVML reading)" if documented else "NVML's sizes")
        + "); an upper bound: the partitions the teams' templates ask for may hold less"
    )
    row["capacity_is"] = how
    if nominal <= total:
        row["status"] = "ok"
        return []
    if nominal <= total * factor:
        row["status"] = "oversubscribed"
        return []
    row["status"] = "over_limit"
    allowed = "no oversubscription is allowed" if row["factor"] == 1.0 else f"the factor is {row['factor']:g}"
    return [
        f"DeviceClass {row['class']}: the ClusterQueues' nominal GPU-memory quotas in cohort add up to "
        f"{amount_out(nominal, UNIT_COUNTER)}, the site's MIG GPUs hold {row['capacity']} ({how}) and "
        f"{allowed} (aligned_dra_teams.oversubscription)"
    ]
