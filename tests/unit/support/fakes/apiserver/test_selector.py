# SPDX-License-Identifier: Apache-2.0
"""Label and field selectors of the fake API server's lists."""

from __future__ import annotations

import pytest
from kubernetes.client.exceptions import ApiException

from ansible_collections.aligned.dra.tests.support.sites.apiserver_objects import (
    slice_obj,
)


def test_create_list_and_field_selector(api, resource_api):
    resource_api.create_resource_slice(slice_obj())
    resource_api.create_resource_slice(slice_obj("other", nodeName=None, allNodes=True))
    found = resource_api.list_resource_slice(field_selector="spec.nodeName=node-a,spec.driver=dra.aligned.dev")
    assert [item.metadata.name for item in found.items] == ["node-a-slice"]
    assert len(api.list("resourceslices")) == 2


def test_pods_listed_by_node_and_labels(workload, core_api):
    on_a = core_api.list_pod_for_all_namespaces(field_selector="spec.nodeName=node-a")
    assert sorted(p.metadata.name for p in on_a.items) == ["agent-node-a", "web-1"]
    web_on_a = core_api.list_namespaced_pod("default", field_selector="spec.nodeName=node-a", label_selector="app=web")
    assert [p.metadata.name for p in web_on_a.items] == ["web-1"]
    assert web_on_a.items[0].metadata.owner_references[0].kind == "ReplicaSet"
    assert web_on_a.items[0].status.phase == "Running"
    with pytest.raises(ApiException) as caught:
        core_api.list_pod_for_all_namespaces(field_selector="spec.bogus=x")
    assert caught.value.status == 400 and "field label not supported: spec.bogus" in caught.value.body
