# SPDX-License-Identifier: Apache-2.0
"""playbooks/replay.yml with ansible-playbook: per site, the inventory's trace replayed on the site's
plan with whole and with fractional GPUs into <site>/replay.json; a site without a trace is skipped;
a second run changes nothing; ``--check --diff`` shows what replay.json would become and writes nothing;
a bad trace fails the play naming its line and column, and writes nothing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ansible_collections.aligned.dra.tests.support.harnesses.playbook_runs import (
    PLAYBOOKS,
    recap,
    run_playbook,
    write_inventory,
)
from ansible_collections.aligned.dra.tests.support.sites.report_sites import topology_of

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "replay"


def test_check_diff_then_both_policies_per_site_into_replay_json_and_a_rerun_changes_nothing(tmp_path):
    output = tmp_path / "output"
    for site in ("lab", "idle"):
        (output / site).mkdir(parents=True)
        shutil.copy(FIXTURES / "plan-1.36.json", output / site / "plan.json")
    shutil.copy(FIXTURES / "openb-pods.csv", tmp_path / "pods.csv")
    inventory = write_inventory(
        tmp_path / "hosts.yml",
        {"n1": {}, "n2": {}, "n3": {"aligned_dra_site": "idle", "aligned_dra_replay": {}}},
        {
            "aligned_dra_site": "lab",
            "aligned_dra_output_dir": str(output),
            # relative: next to the inventory
            "aligned_dra_replay": {"trace": "pods.csv", "order": "pack", "mode": "timeline"},
        },
    )

    # check mode: the replay runs, the diff shows replay.json as it would be written, and nothing is
    checked = run_playbook(inventory, PLAYBOOKS / "replay.yml", "--check", "--diff")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert recap(checked.stdout) == {"changed": 1, "failed": 0}
    diff = checked.stdout.split(f"+++ after: {output / 'lab' / 'replay.json'}", 1)
    assert len(diff) == 2, checked.stdout
    added = [line[1:] for line in diff[1].split("\n\n", 1)[0].splitlines() if line.startswith("+")]
    would = json.loads("\n".join(added))
    assert would["site"] == "lab" and sorted(would["policies"]) == ["fractional", "whole"]
    assert (would["policies"]["whole"]["pods_placed"], would["policies"]["fractional"]["pods_placed"]) == (7, 9)
    assert "lab: fractional, pack, timeline: 9 of 10 pods placed" in checked.stdout
    assert sorted(p.name for p in output.rglob("*")) == ["idle", "lab", "plan.json", "plan.json"]

    first = run_playbook(inventory, PLAYBOOKS / "replay.yml")
    assert first.returncode == 0, first.stdout + first.stderr
    assert recap(first.stdout) == {"changed": 1, "failed": 0}
    written = json.loads((output / "lab" / "replay.json").read_text())
    assert written == would
    assert written["site"] == "lab" and sorted(written["policies"]) == ["fractional", "whole"]
    whole, fractional = written["policies"]["whole"], written["policies"]["fractional"]
    assert (whole["pods_placed"], fractional["pods_placed"]) == (7, 9)
    assert fractional["policy_applied"] == "fractional" and fractional["timeline"]["time"]
    assert whole["trace"]["path"] == str(tmp_path / "pods.csv")
    assert "lab: fractional, pack, timeline: 9 of 10 pods placed" in first.stdout
    assert "idle: no trace (aligned_dra_replay.trace is not set), skipped" in first.stdout
    assert not (output / "idle" / "replay.json").exists()

    again = run_playbook(inventory, PLAYBOOKS / "replay.yml")
    assert again.returncode == 0, again.stdout + again.stderr
    assert recap(again.stdout) == {"changed": 0, "failed": 0}


def test_a_bad_trace_fails_the_play_naming_its_line_and_column_and_writes_nothing(tmp_path):
    output = tmp_path / "output"
    (output / "lab").mkdir(parents=True)
    shutil.copy(FIXTURES / "plan-1.36.json", output / "lab" / "plan.json")
    lines = (FIXTURES / "openb-pods.csv").read_text().splitlines(keepends=True)
    assert lines[5].startswith("pod-05,4000,8192,1,250,")
    lines[5] = lines[5].replace(",250,", ",1200,", 1)  # line 6 of the file: gpu_milli above 1000
    (tmp_path / "pods.csv").write_text("".join(lines))
    inventory = write_inventory(
        tmp_path / "hosts.yml",
        ["n1"],
        {"aligned_dra_site": "lab", "aligned_dra_output_dir": str(output), "aligned_dra_replay": {"trace": "pods.csv"}},
    )

    failed = run_playbook(inventory, PLAYBOOKS / "replay.yml")
    assert failed.returncode != 0
    assert recap(failed.stdout)["failed"] == 1, failed.stdout
    assert "trace: line 6, column gpu_milli: 1200 is out of range (0 to 1000)" in failed.stdout
    assert not (output / "lab" / "replay.json").exists()


EXAMPLE_TRACE = "name,submit,end,gpus,priority\na,0,3600,0.25,100\nb,0,3600,0.25,0\nc,0,3600,0.25,0\nd,0,3600,0.25,0\n"
GI = 2**30


def test_measured_use_prints_one_line_per_burst_factor(tmp_path):
    """The worked example of docs/replay.md on a plan: usage relative to the inventory, like the trace."""
    output = tmp_path / "output"
    (output / "lab").mkdir(parents=True)
    shutil.copy(FIXTURES / "plan-1.36.json", output / "lab" / "plan.json")
    (tmp_path / "pods.csv").write_text(EXAMPLE_TRACE)
    rows = [f"{pod},0,{15 * GI}" for pod in "abcd"]
    rows += [f"a,1800,{35 * GI}", f"b,1800,{30 * GI}", f"c,1800,{30 * GI}"]
    rows += [f"{pod},2700,{15 * GI}" for pod in "abc"]
    (tmp_path / "use.csv").write_text("pod,timestamp,memory_used_bytes\n" + "\n".join(rows) + "\n")
    settings = {
        "trace": "pods.csv",
        "trace_format": "csv",
        "usage": "use.csv",
        "gpu_memory": "80Gi",
        "policies": ["whole", "fractional", "thin"],
        "burst_factors": [1.0, 2.0],
    }
    inventory = write_inventory(
        tmp_path / "hosts.yml",
        ["n1"],
        {"aligned_dra_site": "lab", "aligned_dra_output_dir": str(output), "aligned_dra_replay": settings},
    )
    done = run_playbook(inventory, PLAYBOOKS / "replay.yml")
    assert done.returncode == 0, done.stdout + done.stderr
    written = json.loads((output / "lab" / "replay.json").read_text())["policies"]
    assert written["thin"]["measured"]["usage"]["path"] == str(tmp_path / "use.csv")
    assert [written[p]["measured"]["gpus_needed"]["peak"] for p in ("whole", "fractional", "thin")] == [4, 2, 1]
    assert [(f["factor"], f["evictions"]) for f in written["thin"]["thin_factors"]] == [(1.0, 0), (2.0, 2)]
    said = " ".join(done.stdout.split())  # the callback wraps long messages
    assert "on measured use: 4 of 4 pods placed on 1 GPUs at the peak, 2 evictions" in said
    for line in (
        "lab: thin x1.0: 0.0 evictions/day (0), 1 GPUs at the peak (1 saved against fractional at peak use, 2); "
        "4 of 4 pods placed",
        "lab: thin x2.0: 48.0 evictions/day (2), 1 GPUs at the peak (1 saved against fractional at peak use, 2); "
        "4 of 4 pods placed",
    ):
        assert line in said, done.stdout


def test_the_mig_policy_reads_the_hosts_mig_settings_and_probes(tmp_path):
    """policies with mig: each host's aligned_dra_mig (through aligned.dra.mig_settings, a static layout and a
    dynamic GPU set) against the probes in <site>/nodes; both orders in replay.json, one line per policy."""
    output = tmp_path / "output"
    (output / "lab" / "nodes").mkdir(parents=True)
    shutil.copy(FIXTURES / "plan-1.36.json", output / "lab" / "plan.json")
    for host in ("gpu-a", "gpu-b"):
        (output / "lab" / "nodes" / f"{host}.json").write_text(json.dumps(topology_of("dgx-h100")))
    (tmp_path / "pods.csv").write_text("name,submit,end,gpus\n" + "".join(f"p{i},{i},,0.25\n" for i in range(40)))
    half = {"half": [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}]}
    inventory = write_inventory(
        tmp_path / "hosts.yml",
        {
            "gpu-a": {"aligned_dra_mig": {"mode": "dynamic"}},
            "gpu-b": {"aligned_dra_mig": {"mode": "static", "layout": "half", "mig_configs": half}},
            "cpu-c": {},
        },
        {
            "aligned_dra_site": "lab",
            "aligned_dra_output_dir": str(output),
            "aligned_dra_replay": {
                "trace": "pods.csv",
                "trace_format": "csv",
                "policies": ["whole", "mig"],
                "seed": 5,
                "draws": 3,
                "mig_headroom": 0.1,
            },
        },
    )
    done = run_playbook(inventory, PLAYBOOKS / "replay.yml")
    assert done.returncode == 0, done.stdout + done.stderr
    mig = json.loads((output / "lab" / "replay.json").read_text())["policies"]["mig"]
    assert mig["gpus_total"] == 16 and mig["mig"]["gpu_models"] == {
        "H100-SXM5-80GB (dynamic)": 8,
        "H100-SXM5-80GB (static)": 8,
    }
    orders = mig["mig"]["orders"]
    # a quarter of 7 compute slices: 2g.20gb, 3 on each dynamic GPU (2 slices left); the static layout has no
    # 2g instance (its 3g.40gb ones, 8 slices a GPU, stay free)
    assert {p["profile"] for p in orders["first_fit"]["placements"]} == {"2g.20gb"}
    assert orders["first_fit"]["gpu_pods_placed"] == orders["fragmentation_aware"]["gpu_pods_placed"] == 24
    assert orders["first_fit"]["stranded"] == {"pod": "p24", "time": 24, "slices": 80, "gpus": 16}
    said = " ".join(done.stdout.split())
    assert "lab: mig, pack, timeline: 24 of 40 pods placed (24 of 40 with GPUs) on 16 GPUs" in said
    assert "MIG, fragmentation-aware: 24 pods placed, 8 GPUs needed at the peak" in said
    # only gpu-a's dynamic GPUs hold a 2g.20gb: every draw among the nodes that can take a pod draws gpu-a
    spread = mig["mig"]["first_fit_range"]
    assert (spread["seed"], spread["draws"], mig["mig"]["sizing"]["headroom"]) == (5, 3, 0.1)
    assert spread["gpu_pods_placed"] == {"min": 24, "median": 24, "max": 24}
    assert (
        "MIG first fit, nodes by name (best case): 24 GPU pods placed; with random ties among nodes (3 draws, "
        "seed 5): 24 GPU pods placed (median 24), 8 GPUs needed at the peak" in said
    )
