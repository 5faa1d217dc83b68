# SPDX-License-Identifier: Apache-2.0
"""site.yml run again on the demo (inventories/demo: four sites, real sysfs snapshots, the usage files
and traces it ships): every site's inputs and facts are unchanged, so every per-site stage keeps its
outputs and says so, and the output directory is the same byte for byte; the first run's outputs are
what a render writes (the record lists them); the site summaries are computed once when no node fails
after the probe. kai-north's nodes (no network settings, DaemonSet mode) are converged in the re-run:
no network round; the other sites' network plans still
have something to change (the demo's network stage only shows its plan), so their nodes are checked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ansible_collections.aligned.dra.tests.support.harnesses.playbook_runs import PLAYBOOKS, REPO, run_playbook

DEMO = REPO / "inventories" / "demo"
SITES = ("ai-west", "kai-north", "lab-east", "mig-south")
STAGES = ("claims", "utilization", "teams", "placement", "replay")


def task_block(stdout: str, task: str) -> str:
    """The output of the task named ``task`` (up to the next task or play)."""
    after = stdout.split(f"{task}]", 1)[1]
    return after.split("\nTASK [", 1)[0].split("\nPLAY [", 1)[0]


def files(root: Path) -> dict[str, bytes]:
    return {str(path.relative_to(root)): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


def check_the_mig_site(site: Path) -> None:
    """What docs/quickstart.md says mig-south shows: MIG classes and templates, the plan of
    partitions on the documented H100 geometry, Kueue quotas in GPU memory and the replay's mig policy."""
    claims = {path.name for path in (site / "claims").iterdir()}
    assert {"deviceclass-mig.aligned.dev.yaml", "claimtemplate-mig-3g-40gb.yaml"} <= claims
    assert "claimtemplate-mig-3g-40gb-nic.yaml" in claims
    mig = json.loads((site / "plan.json").read_text())["mig"]
    assert mig["sources"] == {"documented": 8}
    assert mig["templates"]["mig-1g-10gb"]["alone"] == 56  # 7 per H100, the +me profile once per GPU
    assert mig["templates"]["mig-1g-10gb-me"]["alone"] == 8
    assert mig["templates"]["mig-3g-40gb"]["alone"] == 16
    configuration = yaml.safe_load((site / "kueue-configuration.yaml").read_text())
    mapping = next(
        m for m in configuration["resources"]["deviceClassMappings"] if "mig.aligned.dev" in m["deviceClassNames"]
    )
    queue = yaml.safe_load((site / "teams" / "kueue-clusterqueue-inference.yaml").read_text())
    quotas = {
        r["name"]: r["nominalQuota"]
        for g in queue["spec"]["resourceGroups"]
        for f in g["flavors"]
        for r in f["resources"]
    }
    assert quotas[mapping["name"]] == "240Gi"
    replay = json.loads((site / "replay.json").read_text())["policies"]
    assert set(replay) == {"whole", "mig"}
    orders = replay["mig"]["mig"]["orders"]
    assert set(orders) == {"first_fit", "fragmentation_aware"}
    assert replay["mig"]["gpu_pods_placed"] > replay["whole"]["gpu_pods_placed"]


@pytest.mark.slow
def test_a_converged_demo_keeps_every_sites_outputs_byte_for_byte(tmp_path):
    out = tmp_path / "out"
    first = run_playbook(DEMO, PLAYBOOKS / "site.yml", extra_vars={"aligned_dra_output_dir": str(out)}, cwd=REPO)
    assert first.returncode == 0, first.stdout[-4000:]
    said_first = " ".join(first.stdout.split())
    assert (
        "kai-north: 0 of 2 nodes unchanged since the last run (the others, no record of an earlier run: 2)"
        in said_first
    )
    assert "inputs and facts unchanged since the last run" not in said_first
    # no node failed after the probe: the last play keeps the summaries the probe's output wrote
    computed = first.stdout.split("Output | Compute the site summaries]")
    assert len(computed) == 3 and computed[1].split()[1] == "ok:" and computed[2].split()[1] == "skipping:"
    written = files(out)
    check_the_mig_site(out / "mig-south")
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
    assert "kai-north: 2 of 2 nodes unchanged since the last run;" in said
    assert "ai-west: 0 of 6 nodes unchanged since the last run (the others, its network plan has something" in said
    network = task_block(again.stdout, "Network | Plan RDMA and SR-IOV (nothing changes)")
    assert "[kai-dgx-01]" not in network and "[kai-dgx-02]" not in network and "[dgx-h100-01]" in network
    assert files(out) == written
