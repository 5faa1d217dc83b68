# SPDX-License-Identifier: Apache-2.0
"""planner.model_store: the site model built once per run - a later stage with the same node files and options
takes it, anything else builds it again, and outside a run nothing is kept; on the planner's 16-node
acceptance site the plan and the jobs write the same files byte for byte with the model taken."""

from __future__ import annotations

import json
import os

import pytest
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import inputs as planner_inputs
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import model_store
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import plan as planner
from ansible_collections.aligned.dra.plugins.module_utils.controller.stages import jobs as jobs_stage
from ansible_collections.aligned.dra.plugins.module_utils.controller.stages import plan as plan_stage
from ansible_collections.aligned.dra.tests.support.sites import site16
from ansible_collections.aligned.dra.tests.support.sites.plan_inputs import (
    NIC_NAME_RULE,
    aligned_node,
    pair_objects,
    rail_objects,
    site_placement,
)


@pytest.fixture
def site(tmp_path, monkeypatch):
    """Two node files, the options the plan and the jobs give, and a count of the nodes built."""
    files = {}
    for node in ("a", "b"):
        files[node] = tmp_path / f"{node}.json"
        files[node].write_text(json.dumps(aligned_node(2)))
    built = []
    real = planner.nodes_from_topologies

    def counting(topologies, *args, **kwargs):
        built.extend(topologies)
        return real(topologies, *args, **kwargs)

    monkeypatch.setattr(planner, "nodes_from_topologies", counting)
    params = {
        "objects": pair_objects(),
        "topology_files": {node: str(path) for node, path in files.items()},
        # a rule that fits neither node: its problems are the site's warnings, taken with the nodes
        "rail_rules": {"a": dict(NIC_NAME_RULE, count=3)},
    }
    return params, files, built, tmp_path / "store"


def test_a_later_stage_of_the_run_takes_the_nodes_the_first_built(site):
    params, _files, built, store = site
    with model_store.using(str(store)):
        first = planner_inputs.load_site(params)
        assert built == ["a", "b"]
        second = planner_inputs.load_site(params)
        name = model_store.key(
            dict(params, nodes_failed={}, device_options={}, rail_node_names={}, rail_addresses={}, mig={}),
            params["topology_files"],
            ["a", "b"],
        )
    assert built == ["a", "b"], "built once"
    assert second.nodes == first.nodes and second.warnings == first.warnings and first.warnings
    assert second.nodes is not first.nodes  # a copy: a stage may change its own
    assert [p.name for p in store.iterdir()] == [f"site-model-{name}.pickle"]


def test_outside_a_run_nothing_is_kept(site):
    params, _files, built, store = site
    planner_inputs.load_site(params)
    planner_inputs.load_site(params)
    assert built == ["a", "b", "a", "b"] and not store.exists()
    assert model_store.key(params, params["topology_files"], ["a", "b"]) is None


def test_options_not_given_are_their_empty_defaults(site):
    """The jobs module has no rail_addresses nor mig: given empty by the plan, it is the same model."""
    params, _files, built, store = site
    with model_store.using(str(store)):
        planner_inputs.load_site(dict(params, rail_addresses={}, rail_rule=None, mig={}))
        planner_inputs.load_site(params)
    assert built == ["a", "b"]


@pytest.mark.parametrize(
    "change",
    [
        lambda params, files: files["b"].write_text(json.dumps(aligned_node(4))),  # the probe wrote it again
        lambda params, files: os.utime(files["a"], ns=(1, 1)),
        lambda params, files: params.update(device_options={"exclude": ["eno*"]}),
        lambda params, files: params.update(kubernetes_version="1.35"),
        lambda params, files: params.update(rail_rules={}),
        lambda params, files: params.update(nodes_failed={"b": {"state": "failed", "stage": "driver"}}),
        lambda params, files: params.update(mig={"a": {"mode": "dynamic"}}),  # its GPUs become partitions
    ],
)
def test_other_files_or_options_build_the_nodes_again(site, change):
    params, files, built, store = site
    with model_store.using(str(store)):
        planner_inputs.load_site(params)
        change(params, files)
        planner_inputs.load_site(params)
    assert len(built) > 2


def test_a_damaged_or_missing_store_builds_the_nodes(site):
    params, _files, built, store = site
    with model_store.using(str(store)):
        planner_inputs.load_site(params)
        for kept in store.iterdir():
            kept.write_bytes(b"not a pickle")
        planner_inputs.load_site(params)
    assert built == ["a", "b", "a", "b"]
    with model_store.using(str(store / "not" / "made" / "yet")):
        planner_inputs.load_site(params)
        planner_inputs.load_site(params)
    assert built[4:] == ["a", "b"]


def _validated(spec: dict, params: dict) -> dict:
    validated = ArgumentSpecValidator(**spec).validate(params)
    assert not validated.error_messages, validated.error_messages
    return validated.validated_parameters


def _plan_then_jobs(out, store: str | None) -> dict[str, bytes]:
    """The acceptance site's plan.json and jobs.json as the claims and the placement stages write them, with
    the run's store (the jobs take the model the plan built) or without (each stage builds its own)."""
    site = {
        "site": "acceptance",
        "kubernetes_version": "1.36",
        "objects": rail_objects({"n01": dict(NIC_NAME_RULE, count=4)}),
        "topology_files": {host: str(out / "nodes" / f"{host}.json") for host in site16.HOSTS},
        "rail_rules": site16.RULES,
    }
    plan = _validated(plan_stage.MODULE_SPEC, dict(site, dest=str(out / "plan.json")))
    placement = site_placement(["block", "rack"], {h: {"block": b, "rack": r} for h, (r, b) in site16.HOSTS.items()})
    jobs = _validated(
        jobs_stage.MODULE_SPEC, dict(site, jobs=site16.JOBS, placement=placement, dest=str(out / "jobs.json"))
    )
    with model_store.using(store):
        assert plan_stage.run(plan, False, False)["changed"]
        assert jobs_stage.run(jobs, False, False)["changed"]
    return {name: (out / name).read_bytes() for name in ("plan.json", "jobs.json")}


def test_the_acceptance_site_plans_and_places_byte_for_byte_the_same_with_the_model_taken(tmp_path, monkeypatch):
    built = []
    real = planner.nodes_from_topologies
    monkeypatch.setattr(
        planner,
        "nodes_from_topologies",
        lambda topologies, *a, **k: built.extend(topologies) or real(topologies, *a, **k),
    )
    outputs = {}
    for way, store in (("built", None), ("taken", str(tmp_path / "store"))):
        out = tmp_path / way
        (out / "nodes").mkdir(parents=True)
        for host, topology in site16.TOPOLOGIES.items():
            (out / "nodes" / f"{host}.json").write_text(json.dumps(topology))
        built.clear()
        outputs[way] = _plan_then_jobs(out, store)
        # each stage builds the 16 nodes, or the plan builds them and the jobs take them
        assert sorted(built) == sorted(list(site16.HOSTS) * (2 if way == "built" else 1)), way
    assert outputs["taken"] == outputs["built"]
    placed = {job["name"]: job for job in json.loads(outputs["taken"]["jobs.json"])["jobs"]}
    assert set(placed) == {job["name"] for job in site16.JOBS} and placed["train"]["fits"]
