# SPDX-License-Identifier: Apache-2.0
"""The driver run split by kind (``aligned_dra_device_options.split_gpu_driver``) plans exactly as one driver.

The proof the split asks for, on the planner library (no playbook): every site of the demo
(``inventories/demo``: lab-east's real sysfs snapshots, ai-west's built trees, each host's rail rule)
and the job planner's 16-node acceptance site (``tests/support/sites/site16.py``) are planned with
their own device options without ``split_gpu_driver``, and again with it (``gpu.aligned.dev``, or the
site's own name), each with the claim catalogue rendered for those options. Both plans agree on everything (every template on every node:
fits, levels, allocations, rails, reasons; the classes' members) once the split driver's name is
taken off its devices' labels, and but for ``gpu_counts``: with one driver KAI Scheduler counts no
GPU, split it counts every GPU the node publishes. The same site planned from the ResourceSlices the
two drivers publish (the ``cluster`` plan source) gives the same plan as from the topologies.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import render as claims
from ansible_collections.aligned.dra.plugins.module_utils.controller.jobs import place as jobs
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import inputs as planner_inputs
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import plan as planner
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra
from ansible_collections.aligned.dra.plugins.module_utils.dra import slices as dra_slices
from ansible_collections.aligned.dra.tests.support.sites import site16
from ansible_collections.aligned.dra.tests.support.sites.plan_inputs import NIC_NAME_RULE, site_placement
from ansible_collections.aligned.dra.tests.support.sites.report_sites import REPO, topology_of

DEMO = REPO / "inventories" / "demo"
SPLIT = "gpu.aligned.dev"
DEMO_SITES = sorted(yaml.safe_load((DEMO / "hosts.yml").read_text(encoding="utf-8"))["aligned_dra_nodes"]["children"])


def demo_site(group: str) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """``(the site group's variables, {host: its variables})`` of a site of the demo, group_vars merged."""
    inventory = yaml.safe_load((DEMO / "hosts.yml").read_text(encoding="utf-8"))
    hosts = inventory["aligned_dra_nodes"]["children"][group]["hosts"]
    shared = yaml.safe_load((DEMO / "group_vars" / "all.yml").read_text(encoding="utf-8"))
    shared.update(yaml.safe_load((DEMO / "group_vars" / f"{group}.yml").read_text(encoding="utf-8")))
    return shared, {host: {**shared, **(own or {})} for host, own in hosts.items()}


def site_plan(
    site: str,
    topologies: dict[str, Any],
    settings: dict[str, Any],
    version: str,
    options: dict[str, Any],
    rules: dict[str, Any],
    slices: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The site's plan as the claims role makes it: the catalogue rendered for ``options``, then planned."""
    rendered = claims.render(settings, site, version, rail_rules=rules, device_options=options)
    assert claims.validate_all(rendered["objects"], rendered["minor"]) == []
    params = {"objects": rendered["objects"], "topologies": topologies, "device_options": options, "rail_rules": rules}
    if slices is not None:
        params["slices"] = slices
    loaded = planner_inputs.load_site(params, required=rendered["required"])
    return planner.plan(
        site, loaded.nodes, loaded.classes, loaded.templates, rendered["required"], version, warnings=loaded.warnings
    )


def without_split_names(value: Any, name: str = SPLIT) -> Any:
    """``value`` with the split driver's name taken off its devices' labels (``gpu.aligned.dev/gpu-...``)."""
    if isinstance(value, dict):
        return {without_split_names(k, name): without_split_names(v, name) for k, v in value.items()}
    if isinstance(value, list):
        return [without_split_names(v, name) for v in value]
    return value.replace(name + "/", "") if isinstance(value, str) else value


def compare(one: dict[str, Any], split: dict[str, Any], name: str = SPLIT) -> int:
    """Asserts the two plans agree but for the labels and ``gpu_counts``; the (template, node) entries compared."""
    assert split["templates"] and [t["name"] for t in split["templates"]] == [t["name"] for t in one["templates"]]
    split_names = without_split_names(split, name)
    compared = 0
    for mine, theirs in zip(one["templates"], split_names["templates"], strict=True):
        assert sorted(mine["nodes"]) == sorted(theirs["nodes"]) == one["nodes"]
        for node, entry in mine["nodes"].items():
            # fits and levels first, so that a difference says where
            keys = ("fits", "worst_level", "worst_level_exact", "aligned_level", "aligned_level_exact")
            assert {k: theirs["nodes"][node][k] for k in keys} == {k: entry[k] for k in keys}, (mine["name"], node)
            assert theirs["nodes"][node] == entry, (mine["name"], node)
            compared += 1
        assert theirs == mine
    assert {k: v for k, v in split_names.items() if k != "gpu_counts"} == {
        k: v for k, v in one.items() if k != "gpu_counts"
    }
    # KAI counts no GPU of one driver named dra.aligned.dev, and every GPU of the split one
    for node, counts in one["gpu_counts"].items():
        assert counts["counted_by_kai"] == 0
        assert split["gpu_counts"][node] == {"published": counts["published"], "counted_by_kai": counts["published"]}
    return compared


def split_slices(topologies: dict[str, Any], options: dict[str, Any], rails: dict[str, Any]) -> list[dict]:
    """The ResourceSlices the driver publishes split by kind: per node, one pool per driver name."""
    found = []
    for node, topology in topologies.items():
        by_driver: dict[str, list] = {}
        for device in dra.devices_from_topology(topology, options, rails.get(node)):
            by_driver.setdefault(dra.driver_of_kind(dra.kind_of_name(device["name"]), options), []).append(device)
        for driver, devices in sorted(by_driver.items()):
            found += dra_slices.resource_slices(node, devices, driver=driver)
    return found


@pytest.mark.parametrize("group", DEMO_SITES)
def test_a_demo_site_plans_the_same_split_by_kind_and_kai_counts_its_gpus(group):
    shared, hostvars = demo_site(group)
    site = shared["aligned_dra_site"]
    topologies = {host: topology_of(variables["aligned_dra_fixture"]) for host, variables in hostvars.items()}
    rules = {host: v["aligned_dra_rails"] for host, v in hostvars.items() if v.get("aligned_dra_rails")}
    options = dict(shared.get("aligned_dra_device_options") or {})
    name = options.pop("split_gpu_driver", None) or SPLIT  # a site of the demo may run split already
    settings = shared.get("aligned_dra_claims") or {}
    version = shared["aligned_dra_kubernetes_version"]
    one = site_plan(site, topologies, settings, version, options, rules)
    split = site_plan(site, topologies, settings, version, {**options, "split_gpu_driver": name}, rules)
    compared = compare(one, split, name)
    assert compared == len(one["templates"]) * len(topologies)
    # every site of the demo has GPUs to count
    assert sum(c["published"] for c in split["gpu_counts"].values()) > 0


def test_the_acceptance_site_plans_and_places_the_same_split_by_kind():
    topologies, rules = site16.TOPOLOGIES, site16.RULES
    settings = {"templates": {"pairs": {"counts": [1, 2]}, "pairs_fallback": {"enabled": False}}}
    catalogue_rule = {"n01": dict(NIC_NAME_RULE, count=4)}
    split_options = {"split_gpu_driver": SPLIT}

    def plan_of(options: dict[str, Any], slices: list[dict] | None = None) -> dict[str, Any]:
        rendered = claims.render(settings, "acceptance", "1.36", rail_rules=catalogue_rule, device_options=options)
        params = {
            "objects": rendered["objects"],
            "topologies": topologies,
            "device_options": options,
            "rail_rules": rules,
        }
        if slices is not None:
            params["slices"] = slices
        loaded = planner_inputs.load_site(params)
        return planner.plan("acceptance", loaded.nodes, loaded.classes, loaded.templates, [], "1.36")

    one, split = plan_of({}), plan_of(split_options)
    assert compare(one, split) == len(one["templates"]) * 16
    assert all(c == {"published": 4, "counted_by_kai": 4} for c in split["gpu_counts"].values())
    # the cluster's view: the slices of the two drivers, planned with the levels of the probe
    nodes = planner_inputs.load_site(
        {"objects": [], "topologies": topologies, "device_options": split_options, "rail_rules": rules}
    ).nodes
    rails = {node: data["rails"] for node, data in nodes.items()}
    from_slices = plan_of(split_options, split_slices(topologies, split_options, rails))
    assert from_slices == split

    def placed(options: dict[str, Any]) -> dict[str, Any]:
        rendered = claims.render(settings, "acceptance", "1.36", rail_rules=catalogue_rule, device_options=options)
        loaded = planner_inputs.load_site(
            {"objects": rendered["objects"], "topologies": topologies, "device_options": options, "rail_rules": rules}
        )
        domains = {h: {"block": b, "rack": r} for h, (r, b) in site16.HOSTS.items()}
        # the devices a pod holds already, as the planner labels them (the split driver's GPUs with its name)
        held = {"n01": {(f"{SPLIT}/{x}" if options and x.startswith("gpu-") else x) for x in site16.HELD["n01"]}}
        result = jobs.place_jobs(
            "acceptance",
            site16.JOBS,
            loaded.nodes,
            loaded.classes,
            loaded.templates,
            site_placement(["block", "rack"], domains),
            held=held,
            kubernetes_version="1.36",
        )
        return without_split_names(result)

    assert placed(split_options) == placed({})
