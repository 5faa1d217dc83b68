# SPDX-License-Identifier: Apache-2.0
"""Label ownership under server-side apply in the fake API server (tests/support/fakes/apiserver/apply.py)."""

from __future__ import annotations

import kubernetes.client
import pytest
from kubernetes.client.exceptions import ApiException

from ansible_collections.aligned.dra.tests.support.fakes.apiserver import FakeApiServer
from ansible_collections.aligned.dra.tests.support.fakes.apiserver.apply import (
    ApplyConflict,
    LabelOwnership,
    manager_of,
)

KEY = ("nodes", "", "n1")
APPLY = "application/apply-patch+yaml"


def node(**labels: str) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": dict(labels)}}


# -- the model, without a server ------------------------------------------------------------------


def test_an_apply_owns_exactly_the_keys_it_applies_and_gives_up_the_others():
    owners = LabelOwnership()
    labels, state = owners.apply(KEY, None, node(rack="r1", block="b1"), "placement", False)
    assert labels == {"rack": "r1", "block": "b1"}
    owners.store(KEY, state)
    # the next apply leaves block out: block goes, rack stays
    labels, state = owners.apply(KEY, node(rack="r1", block="b1"), node(rack="r1"), "placement", False)
    assert labels == {"rack": "r1"}
    owners.store(KEY, state)
    assert owners.of(KEY) == {"placement (Apply)": ["rack"]}


def test_a_key_another_manager_owns_too_stays_when_one_gives_it_up():
    owners = LabelOwnership()
    owners.store(KEY, owners.updated(KEY, None, node(rack="r1", team="a"), "kubectl-label"))
    labels, state = owners.apply(KEY, node(rack="r1", team="a"), node(rack="r1"), "placement", False)
    owners.store(KEY, state)
    assert labels == {"rack": "r1", "team": "a"}  # same value: shared, no conflict
    labels, state = owners.apply(KEY, node(rack="r1", team="a"), node(), "placement", False)
    assert labels == {"rack": "r1", "team": "a"}  # kubectl-label still owns rack
    assert state == {("kubectl-label", "Update"): {"rack", "team"}, ("placement", "Apply"): set()}


def test_a_changed_value_of_a_key_another_manager_owns_is_a_conflict_unless_forced():
    owners = LabelOwnership()
    owners.store(KEY, owners.updated(KEY, None, node(rack="r1"), "kubectl-label"))
    with pytest.raises(
        ApplyConflict, match=r'1 conflict: conflict with "kubectl-label" using v1: \.metadata\.labels\.rack'
    ):
        owners.apply(KEY, node(rack="r1"), node(rack="r2"), "placement", False)
    labels, state = owners.apply(KEY, node(rack="r1"), node(rack="r2"), "placement", True)
    assert labels == {"rack": "r2"}
    assert state == {("kubectl-label", "Update"): set(), ("placement", "Apply"): {"rack"}}


def test_an_update_takes_the_keys_it_changes_and_drops_the_keys_it_removes():
    owners = LabelOwnership()
    _labels, state = owners.apply(KEY, None, node(rack="r1", block="b1"), "placement", False)
    owners.store(KEY, state)
    state = owners.updated(KEY, node(rack="r1", block="b1"), node(rack="r9", other="x"), "kubectl")
    assert state == {("placement", "Apply"): set(), ("kubectl", "Update"): {"rack", "other"}}
    owners.store(KEY, state)
    # placement applies again without rack: rack is kubectl's now and stays
    labels, _state = owners.apply(KEY, node(rack="r9", other="x"), node(), "placement", False)
    assert labels == {"rack": "r9", "other": "x"}


def test_the_manager_of_a_request():
    assert manager_of({"fieldManager": "aligned.dra"}, {"User-Agent": "kubectl/v1.35"}) == "aligned.dra"
    assert manager_of({}, {"User-Agent": "OpenAPI-Generator/33.1.0/python"}) == "OpenAPI-Generator"
    assert manager_of({}, {}) == "unknown"


# -- through the server ---------------------------------------------------------------------------


@pytest.fixture
def api():
    with FakeApiServer(minor="1.35") as server:
        yield server


@pytest.fixture
def core(api):
    client = api.api_client()
    yield kubernetes.client.CoreV1Api(client)
    client.close()


def apply(core, body: dict, manager: str = "aligned.dra.placement", **kwargs: object) -> dict:
    return core.patch_node("n1", body, field_manager=manager, _content_type=APPLY, **kwargs).to_dict()


def labels(api) -> dict:
    return api.get("nodes", "n1")["metadata"].get("labels") or {}


def test_a_removed_level_label_goes_and_other_labels_stay(api, core):
    # the kubelet registers the node with its own labels (an Update)
    core.create_node(node(**{"kubernetes.io/hostname": "n1", "team": "a"}))
    apply(core, node(**{"aligned.dev/block": "b1", "aligned.dev/rack": "r1"}))
    assert labels(api) == {
        "kubernetes.io/hostname": "n1",
        "team": "a",
        "aligned.dev/block": "b1",
        "aligned.dev/rack": "r1",
    }
    # the block level is removed from the inventory
    apply(core, node(**{"aligned.dev/rack": "r2"}))
    assert labels(api) == {"kubernetes.io/hostname": "n1", "team": "a", "aligned.dev/rack": "r2"}
    # no level left: an empty configuration gives up every key
    apply(core, node())
    assert labels(api) == {"kubernetes.io/hostname": "n1", "team": "a"}
    assert api.label_owners.of(KEY) == {"OpenAPI-Generator (Update)": ["kubernetes.io/hostname", "team"]}


def test_a_label_another_manager_also_owns_is_not_removed(api, core):
    core.create_node(node())
    apply(core, node(**{"aligned.dev/rack": "r1"}))
    apply(core, node(**{"aligned.dev/rack": "r1"}), manager="gitops")
    apply(core, node())
    assert labels(api) == {"aligned.dev/rack": "r1"}
    apply(core, node(), manager="gitops")
    assert labels(api) == {}


def test_an_update_of_another_manager_keeps_the_label(api, core):
    core.create_node(node())
    apply(core, node(**{"aligned.dev/rack": "r1"}))
    # someone changes the value with a merge patch: the key is theirs now
    core.patch_node("n1", {"metadata": {"labels": {"aligned.dev/rack": "r5"}}}, field_manager="kubectl-label")
    apply(core, node())
    assert labels(api) == {"aligned.dev/rack": "r5"}


def test_a_conflict_is_refused_and_changes_nothing(api, core):
    core.create_node(node(**{"aligned.dev/rack": "r1"}))
    with pytest.raises(ApiException) as caught:
        apply(core, node(**{"aligned.dev/rack": "r2"}), force=False)
    assert caught.value.status == 409 and "conflict" in caught.value.body
    assert labels(api) == {"aligned.dev/rack": "r1"}
    apply(core, node(**{"aligned.dev/rack": "r2"}), force=True)
    assert labels(api) == {"aligned.dev/rack": "r2"}
    assert api.label_owners.of(KEY) == {"aligned.dra.placement (Apply)": ["aligned.dev/rack"]}


def test_a_dry_run_answers_the_result_and_stores_nothing(api, core):
    core.create_node(node())
    apply(core, node(**{"aligned.dev/rack": "r1", "aligned.dev/block": "b1"}))
    answer = apply(core, node(**{"aligned.dev/rack": "r1"}), dry_run="All")
    assert answer["metadata"]["labels"] == {"aligned.dev/rack": "r1"}
    assert labels(api) == {"aligned.dev/rack": "r1", "aligned.dev/block": "b1"}
    assert api.label_owners.of(KEY) == {"aligned.dra.placement (Apply)": ["aligned.dev/block", "aligned.dev/rack"]}
    # the next real apply still removes block: the dry run gave nothing up
    apply(core, node(**{"aligned.dev/rack": "r1"}))
    assert labels(api) == {"aligned.dev/rack": "r1"}


def test_an_apply_that_creates_the_object_owns_its_labels(api, core):
    apply(core, node(**{"aligned.dev/rack": "r1"}))
    assert labels(api) == {"aligned.dev/rack": "r1"}
    api.delete("nodes", "n1")
    core.create_node(node(**{"aligned.dev/rack": "r1"}), field_manager="kubelet")
    # a new object: the old apply's ownership is gone, so leaving the key out removes nothing
    apply(core, node())
    assert labels(api) == {"aligned.dev/rack": "r1"}
