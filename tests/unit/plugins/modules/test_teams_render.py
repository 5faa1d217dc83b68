# SPDX-License-Identifier: Apache-2.0
"""aligned.dra.teams_render: result shape, teams.json written once, check mode, refused input."""

from __future__ import annotations

import json

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.aligned.dra.plugins.modules import teams_render

SETTINGS = {"teams": [{"name": "a", "tier": "production", "templates": ["gpu-only"], "quotas": {"gpu": 3}}]}


def run(capsys, args: dict) -> dict:
    with patch_module_args(args), pytest.raises(SystemExit):
        teams_render.main()
    return json.loads(capsys.readouterr().out)


def write_plan(tmp_path, gpus: int):
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({"schema_version": 1, "classes": {"aligned-gpu": {"devices": gpus, "nodes": {}}}}))
    return str(path)


def test_writes_teams_json_once_and_returns_files(capsys, tmp_path):
    dest = tmp_path / "out" / "teams.json"
    args = {"site": "s", "kubernetes_version": "1.35", "settings": SETTINGS,
            "plan_file": write_plan(tmp_path, 4), "dest": str(dest), "_ansible_diff": True}  # fmt: skip
    result = run(capsys, dict(args, _ansible_check_mode=True))
    assert result["changed"] is True and not dest.exists() and "diff" in result
    result = run(capsys, args)
    assert result["changed"] is True
    summary = json.loads(dest.read_text())
    assert summary["capacity"][0]["capacity"] == 4 and summary["capacity"][0]["status"] == "ok"
    assert summary["capacity_source"] == "plan.json" and summary["teams"][0]["priority_class"] == "aligned-production"
    assert "namespace-a.yaml" in [f["name"] for f in result["files"]]
    assert run(capsys, args)["changed"] is False


def test_quota_above_capacity_fails(capsys, tmp_path):
    result = run(capsys, {"site": "s", "kubernetes_version": "1.36", "settings": SETTINGS,
                          "plan_file": write_plan(tmp_path, 2)})  # fmt: skip
    assert result["failed"] and "guaranteed quotas add up to 3 devices, the site has 2" in result["msg"]


def test_unknown_class_fails_naming_it(capsys):
    settings = {"teams": [{"name": "a", "quotas": {"tpu": 1}}]}
    result = run(capsys, {"site": "s", "kubernetes_version": "1.36", "settings": settings})
    assert result["failed"] and "'tpu' is not a DeviceClass" in result["msg"]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"oversubscription": 3}, "aligned_dra_teams.oversubscription must map DeviceClasses to factors"),
        ({"extended_resources": "x"}, "aligned_dra_teams.extended_resources must map DeviceClasses"),
    ],
)
def test_settings_of_the_wrong_shape_fail_naming_them(capsys, settings, message):
    result = run(capsys, {"site": "s", "kubernetes_version": "1.36", "settings": settings})
    assert result["failed"] and message in result["msg"]


def test_plan_file_and_dest_errors_name_the_option(capsys, tmp_path):
    (tmp_path / "plan.json").write_text('{"classes": {"aligned-gpu": 5}}')
    result = run(capsys, {"site": "s", "kubernetes_version": "1.36", "plan_file": str(tmp_path / "plan.json")})
    assert result["failed"] and result["msg"] == "plan_file.classes.aligned-gpu: must be a mapping (got int)"
    (tmp_path / "dest").mkdir()
    result = run(capsys, {"site": "s", "kubernetes_version": "1.36", "dest": str(tmp_path / "dest")})
    assert result["failed"] and not result.get("changed")
    assert result["msg"] == f"dest: cannot write {tmp_path / 'dest'}: Is a directory"


def test_a_bad_kubernetes_version_names_the_option(capsys):
    result = run(capsys, {"site": "s", "kubernetes_version": "latest"})
    assert result["failed"] and result["msg"] == "kubernetes_version: 'latest' is not of the form 1.N"


def test_kueue_engine_reads_this_runs_utilization_for_idle_devices(capsys, tmp_path):
    settings = dict(SETTINGS, engine="kueue")
    used = tmp_path / "utilization.json"
    used.write_text(json.dumps({"teams": {"a": {"claims": 1, "devices": {"aligned-gpu": 1}}}}))
    dest = tmp_path / "teams.json"
    args = {"site": "s", "kubernetes_version": "1.36", "settings": settings, "utilization_file": str(used),
            "dest": str(dest)}  # fmt: skip
    result = run(capsys, args)
    assert result["engine"] == "kueue" and "ResourceQuota" not in {f["object"]["kind"] for f in result["files"]}
    # quota 3, 1 in use: 2 idle that the team could lend
    assert result["kueue"]["teams"][0]["idle"] == {"aligned-gpu": 2}
    summary = json.loads(dest.read_text())
    assert summary["engine"] == "kueue" and summary["kueue"]["teams"][0]["idle"] == {"aligned-gpu": 2}
    assert summary["kueue"]["configuration"]["kind"] == "Configuration"
    # no utilization file: idle unknown, nothing else changes
    result = run(capsys, dict(args, utilization_file=str(tmp_path / "none.json"), dest=None))
    assert "idle" not in result["kueue"]["teams"][0]
    used.write_text('{"teams": {"a": {"devices": 5}}}')
    result = run(capsys, args)
    assert (
        result["failed"]
        and result["msg"].startswith("utilization_file: ")
        and "device counts per class" in result["msg"]
    )
    used.write_text(json.dumps({"teams": {"a": {"devices": {"aligned-gpu": -5}}}}))
    result = run(capsys, args)
    assert result["failed"] and "device counts per class" in result["msg"]
    used.write_text("{not json")
    result = run(capsys, args)
    assert result["failed"] and result["msg"].startswith(f"utilization_file: cannot read {used}")


@pytest.mark.parametrize("option", ["plan_file", "utilization_file"])
def test_a_file_holding_null_is_refused_not_taken_for_absent(capsys, tmp_path, option):
    (tmp_path / "null.json").write_text("null")
    result = run(capsys, {"site": "s", "kubernetes_version": "1.36", option: str(tmp_path / "null.json")})
    assert result["failed"] and result["msg"].startswith(option)


def test_kai_engine_writes_its_queues_and_fair_share_and_refuses_what_kai_would_miscount(capsys, tmp_path):
    claims_settings = {"drivers": ["gpu.nvidia.com", "dra.net"], "gpu_driver": "gpu.nvidia.com",
                       "nic_driver": "dra.net"}  # fmt: skip
    settings = {"engine": "kai", "kai": {"what_if": {"a": {"gpu": 5}}},
                "teams": [{"name": "a", "tier": "production", "templates": ["gpu-only"], "quotas": {"nvidia-gpu": 3}}]}  # fmt: skip
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"schema_version": 1, "classes": {"nvidia-gpu": {"devices": 4, "nodes": {}}}}))
    dest = tmp_path / "teams.json"
    args = {"site": "s", "kubernetes_version": "1.36", "settings": settings, "claims_settings": claims_settings,
            "plan_file": str(plan), "dest": str(dest)}  # fmt: skip
    result = run(capsys, args)
    assert [q["queue"] for q in result["kai"]["queues"]] == ["aligned-s", "a"]
    assert "kai-queue-a.yaml" in [f["name"] for f in result["files"]]
    summary = json.loads(dest.read_text())
    # 4 GPUs on the site, a asks 5 with a quota of 3: 3 + 1 over quota
    assert summary["kai"]["what_if"]["fair_share"]["a"]["gpu"] == 4
    assert summary["kai"]["what_if"]["fair_share"]["a"]["beyond_quota"] == 1
    # the collection's own driver publishes GPUs under a name KAI does not count
    failed = run(capsys, dict(args, claims_settings={}, settings=dict(settings, teams=[{"name": "a"}])))
    assert failed["failed"] and "gpu_driver dra.aligned.dev: the name lacks 'gpu'" in failed["msg"]


def test_kai_engine_counts_the_gpus_of_the_collections_driver_run_split_by_kind(capsys, tmp_path):
    team = {"name": "a", "tier": "production", "templates": ["gpu-nic-pair-1"], "quotas": {"gpu": 3, "nic": 3}}
    settings = {"engine": "kai", "teams": [team]}
    args = {"site": "s", "kubernetes_version": "1.36", "settings": settings, "plan_file": write_plan(tmp_path, 4)}
    # one driver: refused as KAI would count no GPU
    failed = run(capsys, args)
    assert failed["failed"] and "gpu_driver dra.aligned.dev: the name lacks 'gpu'" in failed["msg"]
    # split by kind: the GPUs are gpu.aligned.dev's, which KAI counts
    result = run(capsys, dict(args, device_options={"split_gpu_driver": "gpu.aligned.dev"}))
    assert not result.get("failed"), result.get("msg")
    assert [q["queue"] for q in result["kai"]["queues"]] == ["aligned-s", "a"]
    bad = run(capsys, dict(args, device_options={"split_gpu_driver": "dra.aligned.dev"}))
    assert bad["failed"] and bad["msg"].startswith("device_options.split_gpu_driver 'dra.aligned.dev': ")
