# SPDX-License-Identifier: Apache-2.0
"""The fake API server's routing, fault injection and discovery, driven through the official kubernetes client."""

from __future__ import annotations

import kubernetes.client
import pytest
from kubernetes.client.exceptions import ApiException


def test_fault_injection_and_not_found(api, resource_api):
    api.fail_next("GET", r"/resourceslices$", code=500)
    with pytest.raises(ApiException) as caught:
        resource_api.list_resource_slice()
    assert caught.value.status == 500
    assert resource_api.list_resource_slice().items == []
    with pytest.raises(ApiException) as caught:
        resource_api.read_namespaced_resource_claim("nope", "default")
    assert caught.value.status == 404


def test_discovery_for_dynamic_clients(api):
    client = api.api_client()
    try:
        groups = kubernetes.client.ApisApi(client).get_api_versions()
        assert groups.groups[0].name == "resource.k8s.io"
        version = kubernetes.client.VersionApi(client).get_code()
        assert version.minor == "35"
    finally:
        client.close()


def test_discovery_lists_the_rollout_groups(api):
    client = api.api_client()
    try:
        groups = {g.name for g in kubernetes.client.ApisApi(client).get_api_versions().groups}
        assert {"resource.k8s.io", "apps", "policy"} <= groups
        core = kubernetes.client.CoreV1Api(client).get_api_resources()
        eviction = next(r for r in core.resources if r.name == "pods/eviction")
        assert (eviction.group, eviction.version, eviction.kind, eviction.verbs) == (
            "policy",
            "v1",
            "Eviction",
            ["create"],
        )
        assert "poddisruptionbudgets" in {
            r.name for r in kubernetes.client.PolicyV1Api(client).get_api_resources().resources
        }
    finally:
        client.close()
