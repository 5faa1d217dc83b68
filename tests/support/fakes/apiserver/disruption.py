# SPDX-License-Identifier: Apache-2.0
"""TEST FAKE: evictions and PodDisruptionBudgets, what ``kubernetes.core.k8s_drain`` meets.

The fake plays the disruption controller (budget statuses recomputed on every
write of a Pod or budget) and the eviction subresource (see the package
docstring for the rules).
"""

from __future__ import annotations

import copy
import itertools
from datetime import UTC, datetime
from typing import Any

from .resources import ApiError, Resource
from .selector import match_selector_object
from .validation import schema_error


def pod_is_ready(pod: dict[str, Any]) -> bool:
    """Running, Ready and not being deleted: what the disruption controller counts as healthy."""
    status = pod.get("status") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    return ready and status.get("phase") == "Running" and not pod["metadata"].get("deletionTimestamp")


def _scaled(value: Any, total: int, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        share = int(value[:-1]) * total
        return -(-share // 100) if round_up else share // 100
    return int(value)


def pdb_status(pdb: dict[str, Any], pods: list[dict[str, Any]], now: str) -> dict[str, Any]:
    """What the disruption controller writes into a PodDisruptionBudget's status.

    The expected pod count is the number of pods the selector matches (the real
    controller asks the pods' controllers for their scale; without controllers
    running here, the pods are the truth).
    """
    spec = pdb.get("spec") or {}
    matching = [p for p in pods if match_selector_object(p["metadata"].get("labels") or {}, spec.get("selector"))]
    expected = len(matching)
    healthy = sum(1 for p in matching if pod_is_ready(p))
    if spec.get("maxUnavailable") is not None:
        desired = max(0, expected - _scaled(spec["maxUnavailable"], expected, round_up=True))
    elif spec.get("minAvailable") is not None:
        desired = _scaled(spec["minAvailable"], expected, round_up=True)
    else:
        desired = 0
    allowed = max(0, healthy - desired) if expected > 0 else 0
    return {
        "observedGeneration": pdb["metadata"].get("generation", 1),
        "disruptionsAllowed": allowed,
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "expectedPods": expected,
        "conditions": [
            {
                "type": "DisruptionAllowed",
                "status": "True" if allowed > 0 else "False",
                "reason": "SufficientPods" if allowed > 0 else "InsufficientPods",
                "message": "",
                "observedGeneration": pdb["metadata"].get("generation", 1),
                "lastTransitionTime": now,
            }
        ],
    }


# ---------------------------------------------------------------------------
# Evictions and the disruption controller
# ---------------------------------------------------------------------------


class Disruption:
    """The eviction subresource and the disruption controller (mixed into FakeApiServer)."""

    minor: str
    resources: dict[str, Resource]
    store: dict[tuple[str, str, str], dict[str, Any]]
    _rv: itertools.count[int]

    def _disruption_controller(self, namespace: str) -> None:
        """Recompute the status of every PodDisruptionBudget of ``namespace`` (the disruption controller)."""
        pods = [obj for (plural, ns, _name), obj in self.store.items() if plural == "pods" and ns == namespace]
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        for key, pdb in list(self.store.items()):
            if key[0] != "poddisruptionbudgets" or key[1] != namespace:
                continue
            status = pdb_status(pdb, pods, now)
            old = pdb.get("status") or {}
            for new_cond in status["conditions"]:
                for old_cond in old.get("conditions") or []:
                    if old_cond.get("type") == new_cond["type"] and old_cond.get("status") == new_cond["status"]:
                        new_cond["lastTransitionTime"] = old_cond.get("lastTransitionTime", now)
            if old != status:
                updated = copy.deepcopy(pdb)
                updated["status"] = status
                updated["metadata"]["resourceVersion"] = str(next(self._rv))
                self.store[key] = updated

    def _evict(self, namespace: str, name: str, body: Any, dry_run: bool) -> tuple[int, Any]:
        """POST pods/NAME/eviction: delete the pod unless its PodDisruptionBudget forbids it (429)."""
        if not isinstance(body, dict):
            raise ApiError(400, "body must be a JSON object")
        eviction = copy.deepcopy(body)
        # The real server decodes the body with the subresource's kind as the default.
        eviction.setdefault("apiVersion", "policy/v1")
        eviction.setdefault("kind", "Eviction")
        if eviction["apiVersion"] != "policy/v1" or eviction["kind"] != "Eviction":
            raise ApiError(
                400, f"the body must be a policy/v1 Eviction, not {eviction['apiVersion']}/{eviction['kind']}"
            )
        error = schema_error(eviction, self.minor)
        if error is not None:
            where = ".".join(str(p) for p in error.path) or "(root)"
            raise ApiError(422, f"Eviction {where}: {error.message} (schema {self.minor}, strict)")
        meta = eviction.get("metadata") or {}
        if meta.get("name", name) != name:
            raise ApiError(400, "name in URL does not match name in Eviction object")
        if meta.get("namespace", namespace) != namespace:
            raise ApiError(400, "the namespace of the object does not match the namespace on the request")
        pod = self.store.get(("pods", namespace, name))
        if pod is None:
            raise ApiError(404, f'pods "{name}" not found', "NotFound")
        phase = (pod.get("status") or {}).get("phase")
        if phase not in ("Succeeded", "Failed", "Pending") and not pod["metadata"].get("deletionTimestamp"):
            labels = pod["metadata"].get("labels") or {}
            budgets = [
                obj
                for (plural, ns, _n), obj in sorted(self.store.items())
                if plural == "poddisruptionbudgets"
                and ns == namespace
                and match_selector_object(labels, (obj.get("spec") or {}).get("selector"))
            ]
            if len(budgets) > 1:
                raise ApiError(
                    500,
                    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
                )
            if budgets:
                self._check_budget(budgets[0], pod, dry_run)
        if not dry_run:
            self._delete(self.resources["pods"], namespace, name)
        return 201, {"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Success", "code": 201}

    def _check_budget(self, pdb: dict[str, Any], pod: dict[str, Any], dry_run: bool) -> None:
        status = pdb.get("status") or {}
        name = pdb["metadata"]["name"]
        if status.get("observedGeneration", 0) < pdb["metadata"].get("generation", 1):
            raise ApiError(
                429,
                "Cannot evict pod as it would violate the pod's disruption budget.",
                details={
                    "causes": [{"reason": "DisruptionBudget", "message": "observedGeneration is less than generation"}]
                },
            )
        allowed = status.get("disruptionsAllowed", 0)
        if not pod_is_ready(pod):
            # unhealthyPodEvictionPolicy: IfHealthyBudget (default) lets an unhealthy pod go only when the
            # budget is met without it; AlwaysAllow always does. Neither uses up a disruption.
            policy = (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy", "IfHealthyBudget")
            if policy == "AlwaysAllow" or status.get("currentHealthy", 0) >= status.get("desiredHealthy", 0):
                return
        elif allowed > 0:
            if not dry_run:
                updated = copy.deepcopy(pdb)
                updated["status"]["disruptionsAllowed"] = allowed - 1
                updated["metadata"]["resourceVersion"] = str(next(self._rv))
                self.store[("poddisruptionbudgets", pdb["metadata"]["namespace"], name)] = updated
            return
        elif allowed < 0:
            raise ApiError(403, "pdb disruptions allowed is negative")
        raise ApiError(
            429,
            "Cannot evict pod as it would violate the pod's disruption budget.",
            details={
                "causes": [
                    {
                        "reason": "DisruptionBudget",
                        "message": f"The disruption budget {name} needs {status.get('desiredHealthy', 0)} healthy "
                        f"pods and has {status.get('currentHealthy', 0)} currently",
                    }
                ]
            },
        )
