# SPDX-License-Identifier: Apache-2.0
"""controller/stages/site_state.py: a site keeps its outputs only when its inputs, facts and outputs are
those of its record; anything else it reads or writes changed makes it render again. A node is converged
only when its site's inputs and its own facts are those of the record, its network plan of this run changes
nothing and its driver reads nothing live."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.stages import site_state


@pytest.fixture
def site(tmp_path):
    """A site as the probe and the stages leave it: the inventory, node files, a summary and some outputs."""
    inventory = tmp_path / "inventory"
    (inventory / "files").mkdir(parents=True)
    (inventory / "hosts.yml").write_text("aligned_dra_nodes: {hosts: {gpu-01: {}}}\n")
    (inventory / "files" / "trace.csv").write_text("pod,start\n")
    output = tmp_path / "output"
    (output / "west" / "nodes").mkdir(parents=True)
    (output / "west" / "nodes" / "gpu-01.json").write_text('{"devices": []}')
    (output / "west" / "nodes" / "gpu-02.json").write_text('{"devices": [2]}')
    (output / "west" / "summary.json").write_text("{}")
    (output / "west" / "claims").mkdir()
    (output / "west" / "claims" / "classes.yaml").write_text("kind: DeviceClass\n")
    (output / "west" / "plan.json").write_text("{}")
    settings = site_state.settings_digest([("gpu-01", {"aligned_dra_site": "west"})], [str(inventory)])
    entry = {"settings": settings, "inventory_dirs": [str(inventory)], "files": [], "live": None}
    entry.update(hosts=["gpu-01", "gpu-02"], nodes_live={})
    return {"west": dict(entry, output_dir=str(output))}, tmp_path


def check(sites):
    return site_state.run({"state": "check", "sites": sites}, False)


def record(sites, checked, check_mode=False):
    return site_state.run({"state": "record", "sites": sites, "digests": checked["digests"]}, check_mode)


def converged(site):
    sites, _root = site
    first = check(sites)
    assert first["unchanged"] == [] and first["render"] == {"west": "no record of an earlier run"}
    assert record(sites, first) == {"changed": True, "recorded": ["west"]}
    return sites


def test_a_recorded_site_keeps_its_outputs_and_a_second_record_changes_nothing(site):
    sites = converged(site)
    again = check(sites)
    assert again["unchanged"] == ["west"] and again["render"] == {}
    assert record(sites, again) == {"changed": False, "recorded": []}


def test_check_mode_records_nothing(site):
    sites, root = site
    assert record(sites, check(sites), check_mode=True)["changed"] is True
    assert not (root / "output" / "west" / site_state.STATE_FILE).exists()


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda root: (root / "inventory" / "files" / "trace.csv").write_text("pod,start\na,1\n"), "inputs"),
        (lambda root: (root / "inventory" / "group_vars").mkdir(), None),  # an empty folder holds no input
        (lambda root: (root / "inventory" / "host_vars.yml").write_text("x: 1\n"), "inputs"),
        (lambda root: (root / "output" / "west" / "nodes" / "gpu-01.json").write_text('{"devices": [1]}'), "inputs"),
        (lambda root: (root / "output" / "west" / "summary.json").write_text('{"nodes_failed": 1}'), "inputs"),
        (lambda root: (root / "output" / "west" / "plan.json").write_text('{"edited": 1}'), "outputs"),
        (lambda root: (root / "output" / "west" / "claims" / "classes.yaml").unlink(), "outputs"),
        (lambda root: (root / "output" / "west" / "report.html").write_text("<html>"), "outputs"),
        (lambda root: (root / "output" / "west" / "summary.md").write_text("# written by the probe"), None),
        (lambda root: (root / "output" / "west" / site_state.STATE_FILE).write_text("{not json"), "record"),
    ],
)
def test_what_makes_a_site_render_again(site, change, reason):
    sites = converged(site)
    change(site[1])
    result = check(sites)
    if reason is None:
        assert result["unchanged"] == ["west"]
        return
    assert result["unchanged"] == []
    expected = {
        "inputs": "its inputs or facts changed since the last run",
        "outputs": "its outputs changed since the last run",
        "record": "no record of an earlier run",
    }[reason]
    assert result["render"] == {"west": expected}


def test_settings_and_named_files_are_inputs(site, tmp_path):
    sites = converged(site)
    other = site_state.settings_digest(
        [("gpu-01", {"aligned_dra_site": "west", "x": 1})], sites["west"]["inventory_dirs"]
    )
    assert check({"west": dict(sites["west"], settings=other)})["render"]["west"].startswith("its inputs")
    named = tmp_path / "kubeconfig"
    named.write_text("a")
    with_file = {"west": dict(sites["west"], files=[str(named)])}
    record(with_file, check(with_file))
    assert check(with_file)["unchanged"] == ["west"]
    named.write_text("b")
    assert check(with_file)["unchanged"] == []


def test_the_output_directory_inside_the_inventory_is_not_an_input(tmp_path):
    inventory = tmp_path / "inventory"
    (inventory / "output" / "west" / "nodes").mkdir(parents=True)
    (inventory / "hosts.yml").write_text("{}\n")
    entry = {"settings": "s", "inventory_dirs": [str(inventory)], "files": [], "live": None}
    sites = {"west": dict(entry, output_dir=str(inventory / "output"))}
    record(sites, check(sites))
    (inventory / "output" / "west" / "plan.json").write_text("{}")  # a stage wrote it
    (inventory / "output" / "index.html").write_text("<html>")
    assert check(sites)["render"] == {"west": "its outputs changed since the last run"}
    record(sites, check(sites))
    assert check(sites)["unchanged"] == ["west"]


def test_a_site_that_reads_the_cluster_always_renders(site):
    sites = converged(site)
    live = {"west": dict(sites["west"], live="aligned_dra_teams_apply applies to the cluster")}
    assert check(live)["render"] == {
        "west": "aligned_dra_teams_apply applies to the cluster: this run cannot tell whether that changed"
    }


def test_a_new_collection_renders_again(site, tmp_path):
    sites = converged(site)
    code = tmp_path / "collection"
    (code / "roles").mkdir(parents=True)
    checked = site_state.run({"state": "check", "sites": sites}, False, collection_root=str(code))
    assert checked["render"] == {"west": "its inputs or facts changed since the last run"}


@pytest.mark.parametrize(
    ("settings", "reason"),
    [
        ({"aligned_dra_site": "west", "aligned_dra_claims_apply": False}, None),
        ({"aligned_dra_teams_apply": True}, "aligned_dra_teams_apply applies to the cluster"),
        ({"aligned_dra_utilization_source": "files"}, None),
        ({"aligned_dra_utilization_source": "cluster"}, "aligned_dra_utilization_source reads the cluster"),
        ({"aligned_dra_placement_levels": {"source": "cluster"}}, "aligned_dra_placement_levels reads the cluster"),
        ({"aligned_dra_usage": {"prometheus": "http://prom:9090"}}, "aligned_dra_usage reads Prometheus"),
        ({"aligned_dra_usage": {"files": ["a.om"]}}, None),
    ],
)
def test_live_reason(settings, reason):
    assert site_state.live_reason(settings) == reason


def test_the_record_names_the_outputs_but_not_the_probes(site):
    sites = converged(site)
    kept = json.loads((Path(sites["west"]["output_dir"]) / "west" / site_state.STATE_FILE).read_text())
    assert sorted(kept["outputs"]) == ["claims/classes.yaml", "plan.json"]
    assert kept["format"] == site_state.FORMAT


def test_the_documentation_is_the_actions_argument_spec():
    import yaml

    from ansible_collections.aligned.dra.plugins.modules import site_state as module

    documented = yaml.safe_load(module.DOCUMENTATION)["options"]
    shape = {
        key: {k: entry.get(k) for k in ("type", "required", "default", "choices")} for key, entry in documented.items()
    }
    assert shape == {
        key: {k: entry.get(k) for k in ("type", "required", "default", "choices")}
        for key, entry in site_state.ARGUMENT_SPEC.items()
    }


def nodes(sites, unsettled=lambda _host: None, collection_root=site_state.COLLECTION_ROOT):
    return site_state.run({"state": "nodes", "sites": sites}, False, collection_root, unsettled=unsettled)


def test_no_node_is_converged_before_a_record_and_every_node_after_one(site):
    sites, _root = site
    assert nodes(sites) == {
        "changed": False,
        "converged": [],
        "sites": {"west": {"converged": 0, "hosts": 2, "reasons": {"no record of an earlier run": 2}}},
    }
    converged(site)
    assert nodes(sites) == {
        "changed": False,
        "converged": ["gpu-01", "gpu-02"],
        "sites": {"west": {"converged": 2, "hosts": 2, "reasons": {}}},
    }
    # a site's outputs edited by hand make the site render; its nodes' steps do not depend on them
    (Path(sites["west"]["output_dir"]) / "west" / "plan.json").write_text('{"edited": 1}')
    assert nodes(sites)["converged"] == ["gpu-01", "gpu-02"]


def test_a_node_whose_facts_changed_is_the_only_one_checked_again(site):
    sites = converged(site)
    (Path(sites["west"]["output_dir"]) / "west" / "nodes" / "gpu-02.json").write_text('{"devices": [3]}')
    result = nodes(sites)
    assert result["converged"] == ["gpu-01"]
    assert result["sites"]["west"]["reasons"] == {"its inputs or facts changed since the last run": 1}


@pytest.mark.parametrize(
    "change",
    [
        # any host's settings: a neighbour's rails reach this node's driver
        lambda sites, root: sites["west"].update(settings="other"),
        lambda sites, root: (root / "inventory" / "files" / "trace.csv").write_text("pod,start\na,1\n"),
        lambda sites, root: sites["west"].update(files=[str(root / "inventory" / "hosts.yml")]),
    ],
)
def test_what_the_site_shares_checks_every_node_again(site, change):
    sites = converged(site)
    change(sites, site[1])
    assert nodes(sites)["converged"] == []


def test_a_new_collection_checks_every_node_again(site, tmp_path):
    sites = converged(site)
    (tmp_path / "collection" / "roles").mkdir(parents=True)
    assert nodes(sites, collection_root=str(tmp_path / "collection"))["converged"] == []


def test_a_network_plan_with_something_to_change_or_a_live_driver_keeps_the_node_checked(site):
    sites = converged(site)
    result = nodes(
        sites, unsettled=lambda host: "its network plan has something to change" if host == "gpu-01" else None
    )
    assert result["converged"] == ["gpu-02"]
    assert result["sites"]["west"]["reasons"] == {"its network plan has something to change": 1}
    live = {"west": dict(sites["west"], nodes_live={"gpu-02": "the driver's token is read from the cluster"})}
    assert nodes(live)["converged"] == ["gpu-01"]
    # without a way to read this run's network plans no node is converged
    assert site_state.run({"state": "nodes", "sites": sites}, False)["converged"] == []


def test_the_record_holds_the_nodes_as_the_run_leaves_them(site):
    sites, root = site
    checked = check(sites)
    # the network stage changed the VFs and the node was probed again before the record
    (root / "output" / "west" / "nodes" / "gpu-01.json").write_text('{"devices": ["vf"]}')
    record(sites, checked)
    assert nodes(sites)["converged"] == ["gpu-01", "gpu-02"]
    # an earlier release's record, without nodes: every node is checked
    state = root / "output" / "west" / site_state.STATE_FILE
    kept = json.loads(state.read_text())
    del kept["nodes"]
    state.write_text(json.dumps(kept))
    assert nodes(sites)["sites"]["west"]["reasons"] == {"no record of an earlier run": 2}


@pytest.mark.parametrize(
    ("settings", "reason"),
    [
        ({}, None),
        (
            {"aligned_dra_driver_kubeconfig": "/etc/admin.conf"},
            "aligned_dra_driver_kubeconfig: the driver's token is read from the cluster",
        ),
        ({"aligned_dra_driver_kubeconfig": "/etc/admin.conf", "aligned_dra_driver_mode": "daemonset"}, None),
        ({"aligned_dra_driver_kubeconfig": "/etc/admin.conf", "aligned_dra_driver_state": "absent"}, None),
    ],
)
def test_node_live_reason(settings, reason):
    assert site_state.node_live_reason(settings.get) == reason
