# SPDX-License-Identifier: Apache-2.0
"""playbooks/replay.yml with ansible-playbook: per site, the inventory's trace replayed on the site's
plan with whole and with fractional GPUs into <site>/replay.json; a site without a trace is skipped;
a second run changes nothing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from ansible_collections.aligned.dra.tests.playbook_runs import PLAYBOOKS, recap, run_playbook, write_inventory

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "replay"


def test_both_policies_per_site_into_replay_json_and_a_rerun_changes_nothing(tmp_path):
    output = tmp_path / "output"
    for site in ("lab", "idle"):
        (output / site).mkdir(parents=True)
        shutil.copy(FIXTURES / "plan-1.36.json", output / site / "plan.json")
    shutil.copy(FIXTURES / "openb-pods.csv", tmp_path / "pods.csv")
    inventory = write_inventory(
        tmp_path / "hosts.yml",
        ["n1", "n2"],
        {
            "aligned_dra_site": "lab",
            "aligned_dra_output_dir": str(output),
            # relative: next to the inventory
            "aligned_dra_replay": {"trace": "pods.csv", "order": "pack", "mode": "timeline"},
        },
    )
    hosts = yaml.safe_load(inventory.read_text())
    hosts["aligned_dra_nodes"]["hosts"]["n3"] = {"aligned_dra_site": "idle", "aligned_dra_replay": {}}
    inventory.write_text(yaml.safe_dump(hosts))

    first = run_playbook(inventory, PLAYBOOKS / "replay.yml")
    assert first.returncode == 0, first.stdout + first.stderr
    assert recap(first.stdout) == {"changed": 1, "failed": 0}
    written = json.loads((output / "lab" / "replay.json").read_text())
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
