# SPDX-License-Identifier: Apache-2.0
"""Site report data: the alignment score of a site."""

from __future__ import annotations

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.report import data
from ansible_collections.aligned.dra.plugins.module_utils.controller.topology.summary import site_summary
from ansible_collections.aligned.dra.tests.report_sites import topology_of


def test_alignment_score_buckets():
    nodes = {"a": topology_of("dgx-h100"), "b": topology_of("mi300x"), "c": topology_of("hyperv-ndv4")}
    score = data.alignment_score(site_summary("s", nodes))
    assert score["gpus"] == 24
    counts = {b["key"]: b["count"] for b in score["buckets"]}
    assert counts == {"aligned": 8, "host": 16, "sys": 0, "none": 0}
    assert sum(b["share"] for b in score["buckets"]) == pytest.approx(1.0)


def test_alignment_score_counts_sys_and_gpus_without_nic():
    # The score reads the probe's links, as the planner does: one GPU sees
    # every NIC at SYS, another has no level to any NIC.
    topology = topology_of("dgx-h100")
    gpus = sorted(topology["links"])
    topology["links"][gpus[0]] = {nic: "SYS" for nic in topology["links"][gpus[0]]}
    topology["links"][gpus[1]] = {}
    counts = {b["key"]: b["count"] for b in data.alignment_score(site_summary("s", {"a": topology}))["buckets"]}
    assert counts == {"aligned": 6, "host": 0, "sys": 1, "none": 1}


def test_an_unknown_level_is_shown_as_unknown_and_nothing_as_none():
    assert data.badge_level(None, False) == ("unknown", True)
    assert data.badge_level(None, True) == (None, True)  # the badge reads None as "none": nothing measured
    assert data.badge_level("PHB", False) == ("PHB", False)
    from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import utilization
    from ansible_collections.aligned.dra.tests.plan_inputs import p5_slices

    claim = {"metadata": {"name": "blind", "namespace": "ns"}, "status": {"allocation": {"devices": {"results": [
        {"request": "g", "driver": "gpu.nvidia.com", "pool": "p5", "device": "gpu-4"},
        {"request": "n", "driver": "dra.net", "pool": "p5", "device": "pci-0000-61-00-0"}]}}}}  # fmt: skip
    used = utilization.utilization(p5_slices("p5", efa_numa=False), [claim], teams={"ns": "team"})
    assert data.utilization_view(used)["teams"][0]["levels"] == [("unknown", True, 1)]
