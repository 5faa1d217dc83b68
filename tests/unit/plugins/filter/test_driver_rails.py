# SPDX-License-Identifier: Apache-2.0
"""The driver role's rails filters: one file per site for the driver, and the DaemonSet's ConfigMap of it."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.aligned.dra.plugins.filter.driver import (
    RAILS_KEY,
    RAILS_MOUNT,
    FilterModule,
    driver_rails_files,
    driver_rails_objects,
)
from ansible_collections.aligned.dra.plugins.module_utils.controller.deploy import driver as dd
from ansible_collections.aligned.dra.plugins.module_utils.node.topology import rails as rail_rule

REPO = Path(__file__).resolve().parents[4]
DS = {"mode": "daemonset", "image": "registry.example/aligned-dra-driver:0.1.0"}
PCI = {"by": "pci_order", "count": 8}
NAMES = {"by": "netdev_name", "pattern": r"^nic(\d+)$"}
# as the rail_rules filter gives them
SITES = {
    "lab": {
        "rules": {"gpu-a": PCI, "gpu-b": PCI, "gpu-c": NAMES, "cpu-d": None},
        "node_names": {"gpu-a": "gpu-a", "gpu-b": "gpu-b.example.com"},
    },
    "west": {"rules": {"w1": {}}, "node_names": {"w1": "w1"}},
}


def test_the_filters_are_registered():
    filters = FilterModule().filters()
    assert filters["driver_rails_files"] is driver_rails_files
    assert filters["driver_rails_objects"] is driver_rails_objects


def test_one_file_per_site_with_a_rule_keyed_by_node_name():
    files = driver_rails_files(SITES)
    assert list(files) == ["lab"]  # no rule at west: no file
    document = files["lab"]
    assert document["nodes"] == {"gpu-a": 0, "gpu-b.example.com": 0, "gpu-c": 1}
    # the driver reads each node's rule back as the validation stage checked it
    assert rail_rule.rule_for_node(document, "gpu-b.example.com") == rail_rule.check_rule(PCI)
    assert rail_rule.rule_for_node(document, "gpu-c") == rail_rule.check_rule(NAMES)
    assert rail_rule.rule_for_node(document, "cpu-d") is None
    json.dumps(document)  # what the role writes


def test_a_bad_rule_names_site_host_and_field():
    sites = {"lab": {"rules": {"gpu-a": {"by": "pci_order", "count": 0}}, "node_names": {}}}
    with pytest.raises(AnsibleFilterError, match=r"site lab: gpu-a: aligned_dra_rails\.count"):
        driver_rails_files(sites)
    # the shape of the host -> {rule, node_name} mapping before the rail_rules filter is refused, not misread
    with pytest.raises(AnsibleFilterError, match=r"site 'lab': expected \{rules: host -> rule"):
        driver_rails_files({"lab": {"gpu-a": {"rule": PCI, "node_name": "gpu-a"}}})


def configmap_and_daemonset(objects):
    kinds = [o["kind"] for o in objects]
    return objects[kinds.index("ConfigMap")], objects[kinds.index("DaemonSet")], kinds


def test_the_daemonset_mounts_the_site_file_from_a_configmap_applied_before_it():
    document = driver_rails_files(SITES)["lab"]
    objects = dd.objects(DS)
    before = copy.deepcopy(objects)
    out = driver_rails_objects(objects, document)
    assert objects == before  # the input is not changed
    configmap, daemonset, kinds = configmap_and_daemonset(out)
    assert kinds.index("ConfigMap") == kinds.index("DaemonSet") - 1
    assert configmap["metadata"]["name"] == "aligned-dra-driver-rails"
    assert configmap["metadata"]["namespace"] == daemonset["metadata"]["namespace"]
    assert json.loads(configmap["data"][RAILS_KEY]) == document
    pod = daemonset["spec"]["template"]["spec"]
    assert {"name": "rails", "configMap": {"name": "aligned-dra-driver-rails"}} in pod["volumes"]
    mount = next(m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "rails")
    # the whole directory: the kubelet updates it in place (a subPath mount never is)
    assert mount == {"name": "rails", "mountPath": RAILS_MOUNT, "readOnly": True}
    assert f"--rails-file={RAILS_MOUNT}/{RAILS_KEY}" in pod["containers"][0]["args"]
    for minor in ("1.34.0", "1.37.0"):
        for obj in out:
            kubernetes_validate.validate(obj, minor, strict=True)


def test_a_changed_rule_changes_the_configmap_only_so_no_pod_rolls():
    first = driver_rails_objects(dd.objects(DS), driver_rails_files(SITES)["lab"])
    sites = copy.deepcopy(SITES)
    sites["lab"]["rules"]["gpu-c"] = {"by": "map", "map": {"0000:1d:00.0": 0}}
    second = driver_rails_objects(dd.objects(DS), driver_rails_files(sites)["lab"])
    assert configmap_and_daemonset(first)[0] != configmap_and_daemonset(second)[0]
    assert configmap_and_daemonset(first)[1] == configmap_and_daemonset(second)[1]


@pytest.mark.parametrize(
    ("settings", "document"),
    [(DS, {}), (DS, None), ({"mode": "host", "nodes": ["gpu-a"]}, {"version": 1, "rules": [PCI], "nodes": {"a": 0}})],
    ids=["no-rails", "none", "host-mode"],
)
def test_without_rails_or_a_daemonset_the_objects_are_unchanged(settings, document):
    objects = dd.objects(settings)
    assert driver_rails_objects(objects, document) == objects


def test_the_role_removes_the_configmap_the_filter_names():
    tasks = yaml.safe_load((REPO / "roles" / "driver" / "tasks" / "cluster.yml").read_text())
    task = next(t for t in tasks if t["name"] == "Cluster | Remove the rails ConfigMap of a site without rails")
    configmap = configmap_and_daemonset(driver_rails_objects(dd.objects(DS), {"version": 1, "nodes": {"a": 0}}))[0]
    assert task["kubernetes.core.k8s"]["name"] == configmap["metadata"]["name"]
    assert task["kubernetes.core.k8s"]["state"] == "absent"
