# SPDX-License-Identifier: Apache-2.0
"""The utilization stage on a site with dynamic MIG (the DGX H100 fixture, GPUs 0 and 1): the ``mig`` section,
its instances' used versus allocated, MIG claims weighed by their memory slices in the usage, and the MIG
advice, as the module writes them. The usage window is handed to the stage in place of Prometheus."""

from __future__ import annotations

import json

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.stages import utilization as stage
from ansible_collections.aligned.dra.plugins.module_utils.controller.usage import source as usage_source
from ansible_collections.aligned.dra.tests.support.sites import mig_usage_site as site

GIB = 1 << 30
DYNAMIC = {"mode": "dynamic", "gpus": {"indices": [0, 1]}}


def params(**given):
    found = {name: spec.get("default") for name, spec in stage.MODULE_SPEC["argument_spec"].items()}
    found.update(given)
    return found


@pytest.fixture
def written(tmp_path, monkeypatch):
    topo = site.topology()
    names = site.gpu_names(topo)
    nodes = tmp_path / "nodes"
    nodes.mkdir()
    (nodes / "node-a.json").write_text(json.dumps(topo))
    small = f"{names[0]}-mig-1g-10gb-6"
    whole = names[2]  # not taken by MIG: a whole GPU, used under 6 GiB
    claims = [
        site.claim("ml", "small", "node-a", [small]),
        site.claim("ml", "whole", "node-a", [whole]),
    ]
    window = site.usage_window(
        [
            {"namespace": "ml", "claim": "small", "node": "node-a", "device": small, "uuid": "MIG-1",
             "used": [3 * GIB] * 10, "request": 10 * GIB},
            {"namespace": "ml", "claim": "whole", "node": "node-a", "device": whole, "uuid": "GPU-2",
             "used": [6 * GIB] * 10, "request": 80 * GIB, "gpu_total": 80 * GIB},
        ]
    )  # fmt: skip
    monkeypatch.setattr(usage_source, "read_usage", lambda conf, option, others: window)
    dest = tmp_path / "utilization.json"
    result = stage.run(
        params(
            site="mig-south",
            slices=site.slices("node-a", DYNAMIC, topo),
            claims=claims,
            teams={"teams": [{"name": "ml", "namespaces": ["ml"]}]},
            topology_dir=str(nodes),
            usage={"files": [str(tmp_path / "unused.om")], "window": "10m", "step": "1m"},
            dest=str(dest),
        ),
        check_mode=False,
        diff=False,
    )
    assert result["changed"]
    return json.loads(dest.read_text()), names


def test_the_stage_writes_mig_with_used_versus_allocated_and_the_advice(written):
    used, names = written
    mig = used["mig"]
    assert mig["totals"]["gpus"] == 2 and mig["teams"]["ml"]["by_profile"] == {"1g.10gb": 1}
    (instance,) = mig["instances"]
    assert instance["usage"]["used_over_allocated"] == {"p95": 0.3, "max": 0.3}
    claims = {c["claim"]: c for c in used["usage"]["claims"]}
    assert claims["small"]["kind"] == "mig" and claims["small"]["gpu_fraction"] == 0.125
    assert claims["whole"]["kind"] == "whole"
    advice = used["usage"]["advice"]["mig"]
    (group,) = advice["groups"]
    assert group["team"] == "ml" and [c["claim"] for c in group["claims"]] == ["whole"]
    assert group["claims"][0]["profile"] == "1g.10gb" and group["gpus_today"] == {"gpu_equivalents": 1.0, "gpus": 1}
    assert group["snippet"]["mig_configs"]["aligned-advice"][0]["mig-devices"] == {"1g.10gb": 1}
