# SPDX-License-Identifier: Apache-2.0
"""The fake API server's jobs resources: Services, batch/v1 Jobs and the minor's Workload API.

The objects are the jobs renderer's golden output per minor (tests/unit/.../controller/jobs/golden),
so what the placement role creates is what the fake is checked with.
"""

from __future__ import annotations

import copy
import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from ansible_collections.aligned.dra.tests.fake_apiserver import WORKLOAD_API, FakeApiServer

GOLDEN = Path(__file__).resolve().parent / "plugins" / "module_utils" / "controller" / "jobs" / "golden"
PLURALS = {"Service": "services", "Job": "jobs", "Workload": "workloads", "PodGroup": "podgroups"}


def rendered(minor: str) -> list[dict]:
    """Every object of the golden file of ``minor`` (its render headers left out), renamed so none collide."""
    found = []
    for number, doc in enumerate(yaml.safe_load_all(GOLDEN.joinpath(f"jobs-{minor}.golden").read_text())):
        if isinstance(doc, dict) and doc.get("kind") in PLURALS:
            obj = copy.deepcopy(doc)
            obj["metadata"]["name"] = f"{obj['metadata']['name']}-{number}"
            found.append(obj)
    return found


def path_of(obj: dict) -> str:
    group_version = obj["apiVersion"]
    prefix = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
    return f"{prefix}/namespaces/{obj['metadata']['namespace']}/{PLURALS[obj['kind']]}"


def request(api: FakeApiServer, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
    data = json.dumps(body).encode() if body is not None else None
    sent = urllib.request.Request(
        api.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(sent) as answer:
            return answer.status, json.load(answer)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)


@pytest.mark.parametrize("minor", sorted(WORKLOAD_API))
def test_every_rendered_job_object_is_served_for_its_minor(minor):
    objects = rendered(minor)
    kinds = {obj["kind"] for obj in objects}
    assert {"Service", "Job", "Workload"} <= kinds
    with FakeApiServer(minor=minor) as api:
        for obj in objects:
            code, answer = request(api, "POST", path_of(obj), obj)
            assert code == 201, (obj["kind"], obj["metadata"]["name"], answer.get("message"))
        for obj in objects:
            code, answer = request(api, "GET", f"{path_of(obj)}/{obj['metadata']['name']}")
            assert code == 200 and answer["kind"] == obj["kind"]


def test_the_workload_api_is_the_minors_own():
    workload = next(obj for obj in rendered("1.36") if obj["kind"] == "Workload")
    pod_group = next(obj for obj in rendered("1.36") if obj["kind"] == "PodGroup")
    with FakeApiServer(minor="1.35") as api:
        # 1.35 serves v1alpha1 and has no PodGroup resource
        code, answer = request(api, "POST", path_of(workload), workload)
        assert code == 404, answer
        code, answer = request(api, "GET", "/apis/scheduling.k8s.io/v1alpha1/namespaces/default/podgroups")
        assert code == 404, answer
        code, answer = request(api, "GET", "/apis/scheduling.k8s.io/v1alpha1/namespaces/default/workloads")
        assert code == 200 and answer["items"] == []
    with FakeApiServer(minor="1.34") as api:
        code, _answer = request(api, "GET", "/apis/scheduling.k8s.io/v1alpha1/namespaces/default/workloads")
        assert code == 404
    with FakeApiServer(minor="1.36") as api:
        assert request(api, "POST", path_of(pod_group), pod_group)[0] == 201
        # the priority classes of scheduling.k8s.io v1 stay served next to the Workload version
        assert request(api, "GET", "/apis/scheduling.k8s.io/v1/priorityclasses")[0] == 200


def test_job_objects_are_checked_against_the_schema():
    with FakeApiServer(minor="1.37") as api:
        for obj in rendered("1.37"):
            wrong = copy.deepcopy(obj)
            wrong["spec"]["noSuchField"] = 1
            code, answer = request(api, "POST", path_of(wrong), wrong)
            assert code in (400, 422) and "noSuchField" in answer["message"], (obj["kind"], answer)
