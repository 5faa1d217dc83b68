# SPDX-License-Identifier: Apache-2.0
"""TEST FAKE: the DaemonSet controller, opt-in (``api.run_daemonsets()``; off by default, as the rest of the
fake runs no workload controller and tests place DaemonSet pods themselves).

Once on, after every write the controller does what the kube-controller-manager's does for a node that its
DaemonSet selects and that has no pod of it: it makes one, named ``<daemonset>-<5 random characters>``
(``generateName``), controlled by the DaemonSet (``ownerReferences``), bound to the node (``spec.nodeName``),
with the template's labels and spec, Running and Ready. A node is selected by the template's ``nodeSelector``
(every key equal; no selector: every node); a cordon does not matter (DaemonSet pods tolerate it). Node
affinity is not played: a DaemonSet given one is refused, so no test relies on a selection the fake does not
make. Pods on nodes the DaemonSet no longer selects are left (the real controller deletes them; the tests
here delete them as the rollout does).
"""

from __future__ import annotations

import copy
from typing import Any

from .resources import ApiError


class DaemonSets:
    """Mixed into FakeApiServer; ``_daemonset_controller`` is called after every stored write."""

    store: dict[tuple[str, str, str], dict[str, Any]]
    resources: dict[str, Any]
    _daemonsets_on: bool = False
    _daemonsets_busy: bool = False

    def run_daemonsets(self) -> None:
        """Play the DaemonSet controller from now on (and once now)."""
        with self.lock:  # type: ignore[attr-defined]
            self._daemonsets_on = True
            self._daemonset_controller()

    def _daemonset_controller(self) -> None:
        if not self._daemonsets_on or self._daemonsets_busy:
            return
        self._daemonsets_busy = True
        try:
            for (plural, namespace, _name), daemonset in list(self.store.items()):
                if plural == "daemonsets":
                    self._reconcile(namespace, daemonset)
        finally:
            self._daemonsets_busy = False

    def _reconcile(self, namespace: str, daemonset: dict[str, Any]) -> None:
        template = daemonset["spec"]["template"]
        spec = template.get("spec") or {}
        if (spec.get("affinity") or {}).get("nodeAffinity"):
            raise ApiError(500, "the fake's DaemonSet controller does not play node affinity")
        wanted = spec.get("nodeSelector") or {}
        uid = daemonset["metadata"]["uid"]
        served = {
            pod["spec"].get("nodeName")
            for (plural, ns, _name), pod in self.store.items()
            if plural == "pods"
            and ns == namespace
            and any(ref.get("uid") == uid for ref in pod["metadata"].get("ownerReferences") or [])
        }
        for (plural, _ns, name), node in list(self.store.items()):
            labels = node["metadata"].get("labels") or {}
            if plural != "nodes" or name in served or any(labels.get(k) != v for k, v in wanted.items()):
                continue
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "generateName": daemonset["metadata"]["name"] + "-",
                    "namespace": namespace,
                    "labels": copy.deepcopy((template.get("metadata") or {}).get("labels") or {}),
                    "ownerReferences": [
                        {
                            "apiVersion": "apps/v1",
                            "kind": "DaemonSet",
                            "name": daemonset["metadata"]["name"],
                            "uid": uid,
                            "controller": True,
                            "blockOwnerDeletion": True,
                        }
                    ],
                },
                "spec": {**copy.deepcopy(spec), "nodeName": name},
                "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
            }
            self._create(self.resources["pods"], namespace, pod, keep_status=True, dry_run=False)  # type: ignore[attr-defined]
