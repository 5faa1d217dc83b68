# SPDX-License-Identifier: Apache-2.0
"""The report of a site with the bundled driver lists the metrics the driver exports, the driver's own and the
use metrics' contract (docs/monitoring.md)."""

from __future__ import annotations

import re
from pathlib import Path

from ansible_collections.aligned.dra.plugins.module_utils.controller.report import driver_metrics, pages
from ansible_collections.aligned.dra.tests.support.sites.report_sites import parse, topology_of, write_site

REPO = Path(__file__).resolve().parents[6]
# the use metrics the driver exports by contract (issue: the names the utilization stage reads)
CONTRACT = {
    "aligned_dra_claim_gpu_memory_used_bytes",
    "aligned_dra_claim_gpu_memory_request_bytes",
    "aligned_dra_claim_gpu_memory_limit_bytes",
    "aligned_dra_claim_gpu_sm_utilization_ratio",
    "aligned_dra_claim_gpu_sms_busy_ratio",
    "aligned_dra_gpu_memory_used_bytes",
    "aligned_dra_gpu_memory_total_bytes",
    "aligned_dra_gpu_memory_unattributed_bytes",
    "aligned_dra_claim_device_info",
    "aligned_dra_usage_available",
}


def registered() -> set[str]:
    """The names the driver's metrics.py registers, as Prometheus stores them (counters with _total)."""
    text = (REPO / "driver" / "aligned_dra_driver" / "usage" / "metrics.py").read_text(encoding="utf-8")
    names = set()
    for kind, name in re.findall(r'(Counter|Gauge|Histogram|GaugeMetricFamily)\(\s*"(aligned_dra_\w+)"', text):
        names.add(name + "_total" if kind == "Counter" else name)
    return names


def test_the_table_holds_every_metric_the_driver_registers_and_the_use_contract():
    listed = {row["name"] for row in driver_metrics.rows()}
    assert len(listed) == len(driver_metrics.METRICS)
    assert registered() and registered() <= listed
    assert CONTRACT <= listed
    # nothing listed that the driver neither registers nor promises
    assert listed <= registered() | CONTRACT


def test_a_site_with_the_driver_shows_the_table_and_one_without_does_not(tmp_path):
    write_site(tmp_path, "east", {"a": topology_of("vm-flat")})
    write_site(tmp_path, "west", {"b": topology_of("vm-flat")})
    (tmp_path / "east" / "driver").mkdir()
    built = pages.build_reports(str(tmp_path))
    east = parse(built["files"]["east/report.html"])
    shown = [a["data-metric"] for t, a in east if t == "tr" and "data-metric" in a]
    assert shown == [row["name"] for row in driver_metrics.rows()]
    west = parse(built["files"]["west/report.html"])
    assert not [a for t, a in west if t == "tr" and "data-metric" in a]
