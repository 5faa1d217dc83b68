# SPDX-License-Identifier: Apache-2.0
"""TEST FIXTURE: objects and raw requests for the fake API server's tests (tests/unit/support/fakes/apiserver/) and
the driver's Kube tests. Never shipped."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from ansible_collections.aligned.dra.tests.support.fakes.apiserver import FakeApiServer

NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"}}


def slice_obj(name: str = "node-a-slice", devices: int = 1, **spec: object) -> dict:
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": "dra.aligned.dev",
            "pool": {"name": "node-a", "generation": 1, "resourceSliceCount": 1},
            "nodeName": "node-a",
            "devices": [
                {"name": f"gpu-{i}", "attributes": {"resource.kubernetes.io/pciBusID": {"string": "0000:17:00.0"}}}
                for i in range(devices)
            ],
        },
    }
    body["spec"].update(spec)
    return body


def claim_obj(uid_results: list[dict] | None = None) -> dict:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "claim", "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.aligned.dev"}}]}},
        "status": {
            "allocation": {
                "devices": {
                    "results": uid_results
                    or [{"request": "gpu", "driver": "dra.aligned.dev", "pool": "node-a", "device": "gpu-0"}]
                }
            }
        },
    }


def post(api: FakeApiServer, path: str, body: dict) -> tuple[int, dict]:
    """Raw POST: the kubernetes client itself refuses unknown fields before sending."""
    request = urllib.request.Request(
        api.url + path, data=json.dumps(body).encode(), method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request) as answer:
            return answer.status, json.load(answer)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)


def owner(api: FakeApiServer, kind: str, name: str, app: str) -> dict:
    """A stored ReplicaSet or DaemonSet (nothing runs it: it only owns pods)."""
    spec = {
        "selector": {"matchLabels": {"app": app}},
        "template": {"metadata": {"labels": {"app": app}}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}},
    }
    return api.create(
        {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name, "namespace": "default"}, "spec": spec}
    )


def pod_obj(name: str, node: str, controller: dict | None, app: str, ready: bool = True) -> dict:
    meta = {"name": name, "namespace": "default", "labels": {"app": app}}
    if controller is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": controller["kind"],
                "name": controller["metadata"]["name"],
                "uid": controller["metadata"]["uid"],
                "controller": True,
            }
        ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def pdb_obj(name: str, app: str, **spec: object) -> dict:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": app}}, **spec},
    }
