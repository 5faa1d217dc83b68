# SPDX-License-Identifier: Apache-2.0
"""The teams_render stage with MIG (``mig``, the MIG hosts' topologies): nothing changes without MIG, byte for
byte; with it, teams.json's ``mig`` section, the topologies read from the nodes directory, and the example of
docs/teams.md's MIG section rendered as it says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ansible_collections.aligned.dra.plugins.module_utils.controller.stages import teams_render as teams
from ansible_collections.aligned.dra.tests.support.sites.report_sites import topology_of

DYNAMIC = {"mode": "dynamic"}
NEW_OPTIONS = ("mig", "topologies", "topology_files", "topology_dir")
# teams.json's keys before MIG (schema_version 1): a site without MIG keeps exactly these
SUMMARY_KEYS = {
    "schema_version",
    "site",
    "kubernetes_version",
    "capacity_source",
    "tiers",
    "teams",
    "capacity",
    "engine",
    "kueue",
    "kai",
}
RESULT_KEYS = {"changed", "objects", "files", "capacity", "teams", "minor", "engine", "kueue", "kai"}


@pytest.fixture(scope="module")
def dgx():
    return topology_of("dgx-h100")


def params(tmp_path: Path, name: str, settings: dict, **extra) -> dict:
    found = {k: v.get("default") for k, v in teams.MODULE_SPEC["argument_spec"].items()}
    found.update(site="s", kubernetes_version="1.36", settings=settings, dest=str(tmp_path / f"{name}.json"), **extra)
    return found


@pytest.mark.parametrize("engine", ["resourcequota", "kueue", "both", "kai"])
def test_without_mig_the_output_is_what_it_was_byte_for_byte(tmp_path, dgx, engine):
    settings = {"engine": engine, "teams": [{"name": "llm", "tier": "production", "quotas": {"gpu": 2}}]}
    extra = {}
    if engine == "kai":
        extra = {
            "device_options": {"split_gpu_driver": "gpu.aligned.dev"},
            "claims_settings": {"gpu_driver": "dra.aligned.dev"},
        }
    # a caller that knows nothing of MIG (the options absent), and sites whose hosts run none
    before = params(tmp_path, "before", settings, **extra)
    for option in NEW_OPTIONS:
        del before[option]
    old = teams.run(before, False, False)
    expected = (tmp_path / "before.json").read_bytes()
    assert set(json.loads(expected)) == SUMMARY_KEYS and set(old) == RESULT_KEYS
    for name, mig in (("empty", {}), ("off", {"h1": {"mode": "off"}}), ("none", {"h1": None})):
        result = teams.run(params(tmp_path, name, settings, mig=mig, topologies={"h1": dgx}, **extra), False, False)
        assert (tmp_path / f"{name}.json").read_bytes() == expected
        assert result == old
    if old["kueue"] is not None:
        assert "KueueDRAIntegrationPartitionableDevices" not in old["kueue"]["configuration"]["featureGates"]


def test_the_mig_hosts_topologies_come_from_the_nodes_directory(tmp_path, dgx):
    nodes = tmp_path / "nodes"
    nodes.mkdir()
    (nodes / "h1.json").write_text(json.dumps(dgx), encoding="utf-8")
    settings = {"engine": "kueue", "teams": [{"name": "llm", "tier": "production", "quotas": {"mig": "160Gi"}}]}
    result = teams.run(params(tmp_path, "t", settings, mig={"h1": DYNAMIC}, topology_dir=str(nodes)), False, False)
    summary = json.loads((tmp_path / "t.json").read_text(encoding="utf-8"))
    assert summary["mig"] == result["mig"]
    assert (
        summary["mig"]["hosts"] == {"static": [], "dynamic": ["h1"]} and summary["mig"]["capacity"]["memory"] == "640Gi"
    )
    assert summary["mig"]["classes"]["mig.aligned.dev"] is None and "settings" not in summary["mig"]
    (row,) = summary["kueue"]["capacity"]
    assert (row["class"], row["unit"], row["nominal"], row["capacity"], row["status"]) == (
        "mig.aligned.dev",
        "counter",
        "160Gi",
        "640Gi",
        "ok",
    )
    # no topology there: the capacity is unknown, nothing compared, and said
    (nodes / "h1.json").unlink()
    unknown = teams.run(params(tmp_path, "u", settings, mig={"h1": DYNAMIC}, topology_dir=str(nodes)), False, False)
    assert unknown["kueue"]["capacity"][0]["status"] == "unknown" and unknown["mig"]["unprobed"] == ["h1"]


def test_an_unreadable_topology_file_is_refused_naming_the_option(tmp_path):
    settings = {"engine": "kueue", "teams": [{"name": "llm", "quotas": {"mig": "80Gi"}}]}
    missing = str(tmp_path / "missing.json")
    with pytest.raises(teams.StageError, match=r"^topology_files\.h1: cannot read .*missing\.json \(h1\)"):
        teams.run(params(tmp_path, "x", settings, mig={"h1": DYNAMIC}, topology_files={"h1": missing}), False, False)


def test_the_mig_example_of_the_docs_renders_as_it_says(tmp_path, dgx):
    text = (Path(__file__).resolve().parents[6] / "docs" / "teams.md").read_text(encoding="utf-8")
    block = text.split("### MIG: quotas in GPU memory", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    raw = yaml.safe_load(block)["aligned_dra_teams"]
    result = teams.run(params(tmp_path, "d", raw, mig={"h1": DYNAMIC}, topologies={"h1": dgx}), False, False)
    queues = {o["metadata"]["name"]: o for o in result["objects"] if o["kind"] == "ClusterQueue"}
    nominal = {
        name: q["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] for name, q in queues.items()
    }
    assert nominal == {"llm-training": "320Gi", "inference": "160Gi", "notebooks": "0"}
    (row,) = result["kueue"]["capacity"]
    assert (row["nominal"], row["capacity"], row["status"]) == ("480Gi", "640Gi", "ok")
    (mapping,) = result["kueue"]["configuration"]["resources"]["deviceClassMappings"]
    assert mapping["name"] == "aligned.dev/mig-memory" and mapping["sources"][0]["counter"]["name"] == "memory"


@pytest.mark.parametrize("engine", ["resourcequota", "kueue"])
def test_device_counts_on_mig_classes_are_checked_against_what_exists_at_once(tmp_path, dgx, engine):
    settings = {"engine": engine, "teams": [{"name": "llm", "tier": "production", "quotas": {"mig": 56}}]}
    ok = teams.run(params(tmp_path, "ok", settings, mig={"h1": DYNAMIC}, topologies={"h1": dgx}), False, False)
    (row,) = ok["capacity"]
    assert (row["capacity"], row["status"], row["bound"]) == (56, "ok", True)
    settings["teams"][0]["quotas"] = {"mig": 57}
    with pytest.raises(teams.StageError, match=r"DeviceClass mig\.aligned\.dev: .*57.* 56 \(the most MIG devices"):
        teams.run(params(tmp_path, "over", settings, mig={"h1": DYNAMIC}, topologies={"h1": dgx}), False, False)
