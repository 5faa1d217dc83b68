# SPDX-License-Identifier: Apache-2.0
"""site.yml run again on the demo (inventories/demo: three sites, real sysfs snapshots, the usage files
and traces it ships): every site's inputs and facts are unchanged, so every per-site stage keeps its
outputs and says so, and the output directory is the same byte for byte; the first run's outputs are
what a render writes (the record lists them); the site summaries are computed once when no node fails
after the probe."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ansible_collections.aligned.dra.tests.support.harnesses.playbook_runs import PLAYBOOKS, REPO, run_playbook

DEMO = REPO / "inventories" / "demo"
SITES = ("ai-west", "kai-north", "lab-east")
STAGES = ("claims", "utilization", "teams", "placement", "replay")


def files(root: Path) -> dict[str, bytes]:
    return {str(path.relative_to(root)): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


@pytest.mark.slow
def test_a_converged_demo_keeps_every_sites_outputs_byte_for_byte(tmp_path):
    out = tmp_path / "out"
    first = run_playbook(DEMO, PLAYBOOKS / "site.yml", extra_vars={"aligned_dra_output_dir": str(out)}, cwd=REPO)
    assert first.returncode == 0, first.stdout[-4000:]
    assert "unchanged since the last run" not in first.stdout
    # no node failed after the probe: the last play keeps the summaries the probe's output wrote
    computed = first.stdout.split("Output | Compute the site summaries]")
    assert len(computed) == 3 and computed[1].split()[1] == "ok:" and computed[2].split()[1] == "skipping:"
    written = files(out)
    for site in SITES:
        record = json.loads(written[f"{site}/.aligned-dra-converged.json"])
        assert "plan.json" in record["outputs"] and not any(name.startswith("nodes/") for name in record["outputs"])

    again = run_playbook(DEMO, PLAYBOOKS / "site.yml", extra_vars={"aligned_dra_output_dir": str(out)}, cwd=REPO)
    assert again.returncode == 0, again.stdout[-4000:]
    said = " ".join(again.stdout.split())  # the YAML callback folds long messages
    for site in SITES:
        for stage in STAGES:
            assert f"{site}: inputs and facts unchanged since the last run; the {stage} outputs are kept" in said
    assert f"(kept: {', '.join(SITES)} unchanged since the last run)" in said
    assert files(out) == written
