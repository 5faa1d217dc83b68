# SPDX-License-Identifier: Apache-2.0
"""The hosts that the controller-side actions read settings of."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleActionFail

from ansible_collections.aligned.dra.plugins.plugin_utils.inventory import node_hosts

TASK_VARS = {
    "groups": {"all": ["a", "b", "c"], "aligned_dra_nodes": ["a", "b"]},
    "hostvars": {"a": {}, "b": {}, "c": {}},
}


def test_the_node_group_when_no_hosts_are_requested():
    assert node_hosts(TASK_VARS, []) == ["a", "b"]


def test_requested_hosts_win_over_the_group():
    assert node_hosts(TASK_VARS, ["c"]) == ["c"]


def test_no_node_group_means_no_hosts():
    assert node_hosts({"groups": {"all": ["a"]}, "hostvars": {"a": {}}}, []) == []


def test_hosts_missing_from_the_inventory_are_named():
    with pytest.raises(AnsibleActionFail, match=r"^hosts: not in the inventory: x, y$"):
        node_hosts(TASK_VARS, ["a", "x", "y"])
