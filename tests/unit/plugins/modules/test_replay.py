# SPDX-License-Identifier: Apache-2.0
"""aligned.dra.replay: check mode and diff, the JSON written once, errors that change nothing, every policy in one run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.aligned.dra.plugins.modules import replay
from ansible_collections.aligned.dra.tests.support.sites.replay_mig import H100, write_site, write_trace

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "replay"
PODS = str(FIXTURES / "openb-pods.csv")


def run(capsys, args: dict) -> dict:
    with patch_module_args(args), pytest.raises(SystemExit):
        replay.main()
    return json.loads(capsys.readouterr().out)


def test_check_mode_predicts_then_the_json_is_written_once(capsys, tmp_path):
    dest = tmp_path / "out" / "replay.json"
    args = {
        "trace": PODS,
        "plan": str(FIXTURES / "plan-1.36.json"),
        "policy": "fractional",
        "mode": "timeline",
        "dest": str(dest),
    }
    checked = run(capsys, dict(args, _ansible_check_mode=True, _ansible_diff=True))
    assert checked["changed"] and checked["diff"]["before"] == "" and not dest.exists()
    written = run(capsys, dict(args, _ansible_diff=True))
    assert written["changed"] and json.loads(dest.read_text()) == written["replay"] == checked["replay"]
    assert written["replay"]["policy_applied"] == "fractional" and written["replay"]["timeline"]["time"]
    again = run(capsys, dict(args, _ansible_diff=True))
    assert again["changed"] is False and "diff" not in again
    other = run(capsys, dict(args, order="spread", _ansible_check_mode=True, _ansible_diff=True))
    assert (
        other["changed"]
        and other["diff"]["before"] == dest.read_text()
        and json.loads(dest.read_text()) == written["replay"]
    )


def test_without_dest_nothing_is_written_and_nothing_changes(capsys, tmp_path):
    result = run(capsys, {"trace": PODS, "nodes": str(FIXTURES / "openb-nodes.csv")})
    assert result["changed"] is False and result["replay"]["pods_placed"] == 4
    assert result["replay"]["policy"] == "whole" and result["replay"]["mode"] == "saturation"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"trace": "bad"}, "trace: line 3, column gpu_milli: 1200 is out of range (0 to 1000)"),
        ({"plan": "missing"}, "plan: cannot read"),
        ({"gpu_class": "nvidia-gpu"}, "gpu_class: the plan"),
        ({"trace_format": "csv"}, "trace: line 1: unknown column(s) cpu_milli"),
    ],
)
def test_errors_name_the_option_and_write_nothing(capsys, tmp_path, change, message):
    bad = tmp_path / "bad.csv"
    bad.write_text(
        (FIXTURES / "openb-pods.csv").read_text().replace("pod-02,4000,16384,1,500", "pod-02,4000,16384,1,1200")
    )
    args = {"trace": PODS, "plan": str(FIXTURES / "plan-1.36.json"), "dest": str(tmp_path / "replay.json")}
    args.update(
        {
            k: str(bad) if v == "bad" else (str(tmp_path / "nope.json") if v == "missing" else v)
            for k, v in change.items()
        }
    )
    result = run(capsys, args)
    assert result["failed"] and message in result["msg"] and not result.get("changed")
    assert not (tmp_path / "replay.json").exists()


def test_nodes_and_plan_are_one_or_the_other(capsys):
    both = run(capsys, {"trace": PODS, "nodes": PODS, "plan": PODS})
    assert both["failed"] and "mutually exclusive: nodes|plan" in both["msg"]
    neither = run(capsys, {"trace": PODS})
    assert neither["failed"] and "one of the following is required: nodes, plan" in neither["msg"]


def test_a_dest_that_cannot_be_written_is_named(capsys, tmp_path):
    result = run(capsys, {"trace": PODS, "nodes": str(FIXTURES / "openb-nodes.csv"), "dest": str(tmp_path)})
    assert result["failed"] and result["msg"].startswith(f"dest: cannot write {tmp_path}")


def test_measured_use_and_burst_factors_through_the_modules_options(capsys, tmp_path):
    usage = tmp_path / "usage.csv"
    usage.write_text("pod,timestamp,memory_used_bytes\npod-01,0,1000\npod-02,10,5000\n")
    args = {
        "trace": PODS,
        "nodes": str(FIXTURES / "openb-nodes.csv"),
        "policy": "thin",
        "mode": "timeline",
        "usage": str(usage),
        "gpu_memory": "16Gi",
        "gpu_reserve": "1Gi",
        "thin_limit": 2.0,
        "on_evict": "requeue",
        "burst_factors": [1.5, "3"],
    }
    out = run(capsys, args)["replay"]
    assert out["measured"]["rules"] == {
        "policy": "thin",
        "request": "request",
        "limit": "2 x request",
        "reclaim_margin": 5.0,
        "gpu_reserve_bytes": 2**30,
        "on_evict": "requeue",
    }
    assert "evictions_bound" not in out["measured"] and "over_memory" in out["measured"]
    assert [entry["factor"] for entry in out["thin_factors"]] == [1.5, 3.0]
    # the module's default reserve, 0: the evictions are marked as fewer than the driver's
    bare = run(capsys, {key: value for key, value in args.items() if key != "gpu_reserve"})["replay"]
    assert bare["measured"]["rules"]["gpu_reserve_bytes"] == 0 and bare["measured"]["evictions_bound"] == "lower"
    assert out["measured"]["usage"]["samples"] == 2 and out["measured"]["gpu_memory"]["bytes"] == 16 * 2**30
    failed = run(capsys, dict(args, mode="saturation"))
    assert failed["failed"] and failed["msg"].startswith("usage: measured use is replayed in timeline mode")
    refused = run(capsys, {"trace": PODS, "nodes": str(FIXTURES / "openb-nodes.csv"), "on_evict": "requeue"})
    assert (
        refused["failed"]
        and refused["msg"] == "on_evict: 'requeue' needs usage (the measured use the thin rules are replayed on)"
    )
    refused = run(capsys, {"trace": PODS, "nodes": str(FIXTURES / "openb-nodes.csv"), "gpu_reserve": "1Gi"})
    assert refused["failed"] and refused["msg"].startswith("gpu_reserve: '1Gi' needs usage")


def test_policies_in_one_run_equal_each_run_alone_and_write_the_sites_file(capsys, tmp_path):
    usage = tmp_path / "usage.csv"
    usage.write_text("pod,timestamp,memory_used_bytes\npod-01,0,1000\npod-02,10,5000\n")
    common = {
        "trace": PODS,
        "nodes": str(FIXTURES / "openb-nodes.csv"),
        "mode": "timeline",
        "usage": str(usage),
        "gpu_memory": "16Gi",
        "burst_factors": [2.0],
    }
    dest = tmp_path / "replay.json"
    args = dict(common, policies=["thin", "whole", "fractional"], site="west", dest=str(dest))
    checked = run(capsys, dict(args, _ansible_check_mode=True, _ansible_diff=True))
    assert checked["changed"] and checked["diff"]["before"] == "" and not dest.exists()
    joined = run(capsys, args)
    assert joined["changed"] and "replay" not in joined and list(joined["replays"]) == ["thin", "whole", "fractional"]
    for policy in ("whole", "fractional", "thin"):
        alone = run(capsys, dict(common, policy=policy))["replay"]
        assert joined["replays"][policy] == alone
    assert joined["replays"]["thin"]["thin_factors"] and "thin_factors" not in joined["replays"]["whole"]
    assert json.loads(dest.read_text()) == {"schema_version": 1, "site": "west", "policies": joined["replays"]}
    assert dest.read_text() == json.dumps(json.loads(dest.read_text()), indent=2, sort_keys=True) + "\n"
    assert run(capsys, args)["changed"] is False


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"policies": ["whole"], "policy": "whole"}, "mutually exclusive: policy|policies"),
        ({"policies": ["whole", "whole"]}, "policies: each policy once (got whole, whole)"),
        ({"policies": []}, "policies: give at least one of whole, fractional, thin"),
        ({"policies": ["half"]}, "value of policies must be one or more of"),
    ],
)
def test_bad_policies_are_refused_and_write_nothing(capsys, tmp_path, change, message):
    args = {"trace": PODS, "nodes": str(FIXTURES / "openb-nodes.csv"), "dest": str(tmp_path / "replay.json"), **change}
    result = run(capsys, args)
    assert result["failed"] and message in result["msg"] and not (tmp_path / "replay.json").exists()


def test_the_mig_settings_pass_through_the_module_and_are_refused_without_mig(capsys, tmp_path):
    plan = write_site(tmp_path, {"n1": (H100, 2, 0)})
    trace = write_trace(tmp_path, ["a,0,,0.5,4Gi", "b,1,,0.1,"])
    args = {"trace": trace, "trace_format": "csv", "plan": plan, "policy": "mig", "mig": {"n1": {"mode": "dynamic"}}}
    out = run(capsys, dict(args, mig_headroom=0.1, seed=3, draws=4))["replay"]["mig"]
    assert out["sizing"]["headroom"] == 0.1
    assert out["first_fit_range"]["seed"] == 3 and out["first_fit_range"]["draws"] == 4
    assert out["orders"]["first_fit"]["decided_by"] == {"memory": 0, "compute": 2, "both": 0, "whole": 0}
    default = run(capsys, args)["replay"]["mig"]
    assert default["sizing"]["headroom"] == 0.05 and default["first_fit_range"]["draws"] == 10
    refused = run(capsys, dict(args, mig_headroom=1.0))
    assert refused["failed"] and refused["msg"].startswith("mig_headroom: 1.0 is out of range")
    for option, value in (("seed", 4), ("draws", 2), ("mig_headroom", 0.2)):
        refused = run(capsys, {"trace": PODS, "nodes": str(FIXTURES / "openb-nodes.csv"), option: value})
        assert refused["failed"] and refused["msg"] == (
            f"{option}: {value!r} applies to the policy mig only: add mig to policies, or leave it out"
        )
