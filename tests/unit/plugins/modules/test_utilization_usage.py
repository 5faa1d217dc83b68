# SPDX-License-Identifier: Apache-2.0
"""aligned.dra.utilization with ``usage``: the demo's usage file end to end through the module.

The demo ships six hours of kai-north's GPU use (tests/support/sites/usage_demo.py says what each claim
does) and the claims that name their templates. Read through the module as the role passes them: the
usage alone (no ResourceSlices), with the teams, written once, check mode writing nothing, the pods' series
written for the replay (and read back by the replay's own reader), and bad settings refused naming them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from ansible.module_utils.testing import patch_module_args

from ansible_collections.aligned.dra.plugins.module_utils.controller.replay import trace as replay_trace
from ansible_collections.aligned.dra.plugins.module_utils.controller.replay import usage as replay_usage
from ansible_collections.aligned.dra.plugins.modules import utilization
from ansible_collections.aligned.dra.tests.support.sites import usage_demo

DEMO = Path(__file__).resolve().parents[4] / "inventories" / "demo"
FILES = DEMO / "files"
TEAMS = yaml.safe_load((DEMO / "group_vars" / "kai_north.yml").read_text())["aligned_dra_teams"]
USAGE = {"files": [str(FILES / "usage-kai-north.om")], "window": "6h", "step": "30m"}
GIB = 2**30


def run(capsys, args: dict) -> dict:
    with patch_module_args(args), pytest.raises(SystemExit):
        utilization.main()
    return json.loads(capsys.readouterr().out)


def args_for(tmp_path: Path, **extra) -> dict:
    return {
        "site": "kai-north",
        "claim_files": [str(FILES / "usage-kai-north-claims.yaml")],
        "teams": TEAMS,
        "usage": USAGE,
        "dest": str(tmp_path / "utilization.json"),
        **extra,
    }


def test_the_shipped_demo_files_are_what_the_generator_writes():
    assert (FILES / "usage-kai-north.om").read_text() == usage_demo.openmetrics()
    assert (FILES / "usage-kai-north-claims.yaml").read_text() == usage_demo.claims_yaml()


def test_the_demo_usage_alone_is_written_once_with_teams_templates_and_advice(capsys, tmp_path):
    args = args_for(tmp_path)
    checked = run(capsys, dict(args, _ansible_check_mode=True, _ansible_diff=True))
    assert checked["changed"] and "diff" in checked and not (tmp_path / "utilization.json").exists()
    result = run(capsys, args)
    used = result["utilization"]
    assert set(used) == {"schema_version", "site", "usage"}
    usage = used["usage"]
    assert usage["window"]["points"] == usage_demo.POINTS and usage["window"]["end"] == usage_demo.END
    teams = usage["teams"]
    # pretrain: eight GPUs, four hours of training and then two of no process; the first half hour after the
    # training still holds its last sample (each step's peak), so 3 of 12 points are idle
    assert teams["pretrain"]["gpu_hours"] == {"allocated": 48.0, "active": 36.0, "idle": 12.0, "unknown": 0.0}
    # vision-eval is never measured: unknown, and of unknown size, never idle
    assert teams["vision"]["claims_unknown"] == 1 and teams["vision"]["hours"]["unknown"] == 6.0
    assert teams["vision"]["gpu_hours"]["idle"] == 0.0 and teams["vision"]["unknown_hours_share"] == 0.5
    templates = {c["claim"]: c["template"] for c in usage["claims"]}
    assert templates["batch-0"] == "fractional-gpu-burst" and templates["pretrain-2x8-0"] == "gpu-nic-pair-8"
    (group,) = usage["advice"]["fractional"]
    assert (group["team"], group["template"]) == ("batch", "fractional-gpu-burst")
    assert group["today"]["request"] == "20Gi" and group["claims_per_gpu"]["today"] == 3
    # the batch shares peak at 25 and 28 GiB (bursting): p95 of four peaks is the largest
    assert group["advice"]["request"] == "28Gi" and group["advice"]["claims_above_request"] == 0
    assert [c["claim"] for c in usage["advice"]["whole_gpu_candidates"]] == ["vision-small"]
    assert usage["advice"]["mig"]["headroom"] == 0.05  # the default
    assert json.loads((tmp_path / "utilization.json").read_text()) == used
    assert run(capsys, args)["changed"] is False
    headroom = run(capsys, args_for(tmp_path / "h", usage=dict(USAGE, mig_headroom=0.125)))
    assert headroom["utilization"]["usage"]["advice"]["mig"]["headroom"] == 0.125


def test_the_pods_series_are_written_for_the_replay_and_read_back_by_it(capsys, tmp_path):
    pods = tmp_path / "usage-pods.csv"
    args = args_for(tmp_path, pods_dest=str(pods))
    checked = run(capsys, dict(args, _ansible_check_mode=True, _ansible_diff=True))
    # the pods' file is named and its rows counted in the diff, not shown
    (_json_diff, rows_diff) = checked["diff"]
    assert rows_diff["after_header"] == str(pods) and rows_diff["before"] == "(no file)\n"
    assert rows_diff["after"].endswith(" rows\n") and not pods.exists()
    result = run(capsys, args)
    assert result["changed"] and pods.exists()
    lines = pods.read_text().splitlines()
    assert lines[0] == "pod,timestamp,memory_used_bytes,sm_ratio"
    assert rows_diff["after"] == f"{len(lines) - 1} rows\n"
    # vision-eval has no sample: it has no row; every other pod one row per point, times in RFC 3339
    names = {line.split(",")[0] for line in lines[1:]}
    assert "vision/vision-eval-pod" not in names and "batch/batch-0-pod" in names
    assert len(lines) - 1 == usage_demo.POINTS * len(names)
    assert lines[1].split(",")[1] == "2026-11-18T04:30:00Z"
    # a trace exported as docs/replay.md does (RFC 3339, namespace/pod) reads them; a pod it lacks is skipped
    trace = tmp_path / "trace.csv"
    kept = sorted(names - {"finetune/finetune-a-pod"})
    trace.write_text(
        "name,submit,end,gpus\n" + "".join(f"{n},2026-11-18T04:00:00Z,2026-11-18T10:30:00Z,0.25\n" for n in kept)
    )
    pods_read = replay_trace.read_trace(str(trace), "csv")
    found = replay_usage.read_usage(str(pods), pods_read, pods_read.time_kind)
    assert found.samples == usage_demo.POINTS * len(kept) and found.ignored == 0
    times, used = found.series["batch/batch-0-pod"]
    assert len(times) == usage_demo.POINTS and max(used) == 25 * GIB
    assert run(capsys, args)["changed"] is False


@pytest.mark.parametrize(
    ("usage", "message"),
    [
        (dict(USAGE, idle_threshold=1.5), "usage.idle_threshold: 1.5 must be a number above 0 and at most 1"),
        (dict(USAGE, request_percentile=0), "usage.request_percentile: 0 must be a number above 0 and at most 100"),
        (dict(USAGE, mig_headroom=1.5), "usage.mig_headroom: 1.5 must be a fraction of the profile's memory"),
        (dict(USAGE, files=[str(FILES / "missing.om")]), "missing.om"),
        ({"files": USAGE["files"], "window": "6h", "step": "30m", "colour": "red"}, "colour"),
    ],
)
def test_bad_usage_settings_are_refused_naming_them_and_nothing_is_written(capsys, tmp_path, usage, message):
    result = run(capsys, args_for(tmp_path, usage=usage))
    assert result["failed"] and message in result["msg"], result["msg"]
    assert not (tmp_path / "utilization.json").exists()


def test_pods_dest_without_usage_is_refused(capsys, tmp_path):
    ai_lab = Path(__file__).resolve().parents[3] / "fixtures" / "utilization" / "ai-lab"
    args = {"site": "ai-lab", "slice_files": [str(ai_lab / "slices.yaml")], "claim_files": [str(ai_lab / "claims.yaml")],
            "pods_dest": str(tmp_path / "pods.csv"), "dest": str(tmp_path / "utilization.json")}  # fmt: skip
    result = run(capsys, args)
    assert result["failed"] and result["msg"] == "pods_dest: the pods' usage series come from usage, which is not given"
    assert not (tmp_path / "utilization.json").exists() and not (tmp_path / "pods.csv").exists()
