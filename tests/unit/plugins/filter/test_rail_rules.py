# SPDX-License-Identifier: Apache-2.0
"""The rail_rules filter: the rules and node names of every inventory host of a site, for the driver, claims and teams roles."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.aligned.dra.plugins.filter.driver import driver_rails_files
from ansible_collections.aligned.dra.plugins.filter.rails import FilterModule, rail_rules

PCI = {"by": "pci_order", "count": 8}
NAMES = {"by": "netdev_name", "pattern": r"^nic(\d+)$"}
HOSTVARS = {
    "gpu-01": {"aligned_dra_site": "lab", "aligned_dra_rails": PCI},
    "gpu-02": {"aligned_dra_site": "lab", "aligned_dra_rails": PCI, "aligned_dra_driver_node_name": "gpu-02.k8s"},
    "gpu-03": {"aligned_dra_site": "lab", "aligned_dra_rails": NAMES, "aligned_dra_driver_node_name": ""},
    "cpu-01": {"aligned_dra_site": "lab", "aligned_dra_rails": None},
    "cpu-02": {"aligned_dra_site": "lab", "aligned_dra_rails": {}},
    "w-01": {"aligned_dra_site": "west"},
    "d-01": {"aligned_dra_rails": NAMES},  # no site: the roles' default
}


def test_the_filter_is_registered():
    assert FilterModule().filters()["rail_rules"] is rail_rules


def test_every_host_with_a_rule_by_site_with_its_kubernetes_node_name():
    assert rail_rules(HOSTVARS, list(HOSTVARS)) == {
        "default": {"rules": {"d-01": NAMES}, "node_names": {"d-01": "d-01"}},
        "lab": {
            "rules": {"gpu-01": PCI, "gpu-02": PCI, "gpu-03": NAMES},
            "node_names": {"gpu-01": "gpu-01", "gpu-02": "gpu-02.k8s", "gpu-03": "gpu-03"},
        },
    }


def test_one_site_and_a_site_without_a_rule():
    lab = rail_rules(HOSTVARS, list(HOSTVARS), "lab")
    assert sorted(lab["rules"]) == ["gpu-01", "gpu-02", "gpu-03"]
    assert rail_rules(HOSTVARS, list(HOSTVARS), "west") == {"rules": {}, "node_names": {}}


def test_a_limited_play_still_reads_the_whole_site():
    # what the roles pass: groups['aligned_dra_nodes'] | union(ansible_play_hosts_all), with --limit gpu-01
    limited = ["gpu-01"]
    whole = rail_rules(HOSTVARS, [*HOSTVARS, *limited])
    assert sorted(whole["lab"]["rules"]) == ["gpu-01", "gpu-02", "gpu-03"]
    document = driver_rails_files(whole)["lab"]
    assert document["nodes"] == {"gpu-01": 0, "gpu-02.k8s": 0, "gpu-03": 1}


def test_a_name_that_is_not_an_inventory_host_or_not_a_list_is_refused():
    with pytest.raises(AnsibleFilterError, match="'gpu-99' is not an inventory host"):
        rail_rules(HOSTVARS, ["gpu-99"])
    with pytest.raises(AnsibleFilterError, match="hosts must be a list"):
        rail_rules(HOSTVARS, "gpu-01")
