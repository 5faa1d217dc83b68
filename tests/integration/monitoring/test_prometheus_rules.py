# SPDX-License-Identifier: Apache-2.0
"""The driver's alerting rules through Debian's promtool: ``check rules`` on the rendered file, and
``test rules`` for every alert, firing and not firing (docs/monitoring.md#alerts)."""

from __future__ import annotations

import re

import pytest
import yaml

from ansible_collections.aligned.dra.plugins.module_utils.controller.deploy import monitoring, monitoring_rules
from ansible_collections.aligned.dra.tests.support.harnesses import prometheus

pytestmark = pytest.mark.skipif(not prometheus.available(), reason="Debian's prometheus package is not installed")

TARGET = 'job="aligned-dra-driver", instance="10.0.0.1:8089", node="node-a"'
CLAIM = 'namespace="team-a", claim="train", pod="train-0", device="gpu-0", gpu_uuid="GPU-aaaa"'
# the idle alert is the claim's: its pods folded
IDLE_CLAIM = 'namespace="team-a", claim="train", device="gpu-0", gpu_uuid="GPU-aaaa"'
RULES = {rule["alert"]: rule for rule in monitoring_rules.alerts()}


def labels_of(selector: str) -> dict[str, str]:
    return dict(re.findall(r'(\w+)="([^"]*)"', selector))


def expected(alert: str, series: str, value: str = "") -> dict:
    """The alert as promtool reports it: the series' labels, the severity, and the annotations filled in."""
    labels = dict(labels_of(series))
    rule = RULES[alert]

    def fill(text: str) -> str:
        text = re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels.get(m.group(1), ""), text)
        return text.replace("{{ $value }}", value)

    return {
        "exp_labels": dict(labels, severity=rule["labels"]["severity"]),
        "exp_annotations": {key: fill(text) for key, text in rule["annotations"].items()},
    }


# (alert, input series [(series, values)], eval_time, the series of the firing alert or None, its $value)
CASES = [
    ("AlignedDraDriverDown", [(f"up{{{TARGET}}}", "0x15")], "10m", f"up{{{TARGET}}}", ""),
    ("AlignedDraDriverDown", [(f"up{{{TARGET}}}", "1x15")], "10m", None, ""),
    ("AlignedDraDriverDown", [(f"up{{{TARGET}}}", "0x15")], "3m", None, ""),  # not down for 5 minutes yet
    ("AlignedDraDriverDegraded", [(f"aligned_dra_degraded{{{TARGET}}}", "1x20")], "15m", TARGET, ""),
    ("AlignedDraDriverDegraded", [(f"aligned_dra_degraded{{{TARGET}}}", "0x20")], "15m", None, ""),
    (
        "AlignedDraDriverNotPublishing",
        [(f"aligned_dra_last_publish_age_seconds{{{TARGET}}}", "-1x30")],
        "20m",
        TARGET,
        "",
    ),
    (
        "AlignedDraDriverNotPublishing",
        [(f"aligned_dra_last_publish_age_seconds{{{TARGET}}}", "0+60x40")],
        "35m",
        TARGET,
        "",
    ),
    (
        "AlignedDraDriverNotPublishing",
        [(f"aligned_dra_last_publish_age_seconds{{{TARGET}}}", "30x40")],
        "35m",
        None,
        "",
    ),
    ("AlignedDraDriverApiErrors", [(f"aligned_dra_api_consecutive_errors{{{TARGET}}}", "5x20")], "10m", TARGET, "5"),
    ("AlignedDraDriverApiErrors", [(f"aligned_dra_api_consecutive_errors{{{TARGET}}}", "2x20")], "10m", None, ""),
    (
        "AlignedDraDriverErrors",
        [(f'aligned_dra_errors_total{{{TARGET}, operation="publish"}}', "0+1x40")],
        "30m",
        f'{TARGET}, operation="publish"',
        "",
    ),
    (
        "AlignedDraDriverErrors",
        [(f'aligned_dra_errors_total{{{TARGET}, operation="publish"}}', "3x40")],
        "30m",
        None,
        "",
    ),
    (
        "AlignedDraDeviceUnhealthy",
        [(f'aligned_dra_device_unhealthy{{{TARGET}, device="gpu-0", cause="xid", effect="NoSchedule"}}', "1x20")],
        "10m",
        f'{TARGET}, device="gpu-0", cause="xid", effect="NoSchedule"',
        "",
    ),
    (
        "AlignedDraDeviceUnhealthy",
        [(f'aligned_dra_device_unhealthy{{{TARGET}, device="gpu-0", cause="xid", effect="NoSchedule"}}', "1x2")],
        "10m",
        None,
        "",
    ),
    (
        "AlignedDraClaimsReclaimed",
        [(f'aligned_dra_reclaims_total{{{TARGET}, gpu="gpu-0"}}', "0x5 1x150")],
        "10m",
        f'{TARGET}, gpu="gpu-0"',
        "",
    ),
    (
        "AlignedDraClaimsReclaimed",
        [(f'aligned_dra_reclaims_total{{{TARGET}, gpu="gpu-0"}}', "0x5 1x150")],
        "2h",
        None,
        "",
    ),
    (
        "AlignedDraClaimNearMemoryLimit",
        [
            (f"aligned_dra_claim_gpu_memory_used_bytes{{{TARGET}, {CLAIM}}}", "950x20"),
            (f"aligned_dra_claim_gpu_memory_limit_bytes{{{TARGET}, {CLAIM}}}", "1000x20"),
        ],
        "15m",
        f"{TARGET}, {CLAIM}",
        "",
    ),
    (
        "AlignedDraClaimNearMemoryLimit",
        [
            (f"aligned_dra_claim_gpu_memory_used_bytes{{{TARGET}, {CLAIM}}}", "800x20"),
            (f"aligned_dra_claim_gpu_memory_limit_bytes{{{TARGET}, {CLAIM}}}", "1000x20"),
        ],
        "15m",
        None,
        "",
    ),
    (
        "AlignedDraGpuAllocatedIdle",
        [(f"aligned_dra_claim_gpu_memory_used_bytes{{{TARGET}, {CLAIM}}}", "0x90")],
        "70m",
        f"{TARGET}, {IDLE_CLAIM}",
        "",
    ),
    (
        "AlignedDraGpuAllocatedIdle",
        [
            (f"aligned_dra_claim_gpu_memory_used_bytes{{{TARGET}, {CLAIM}}}", "1000x90"),
            (f"aligned_dra_claim_gpu_sm_utilization_ratio{{{TARGET}, {CLAIM}}}", "0x90"),
        ],
        "70m",
        f"{TARGET}, {IDLE_CLAIM}",
        "",
    ),
    (
        "AlignedDraGpuAllocatedIdle",
        [
            (f"aligned_dra_claim_gpu_memory_used_bytes{{{TARGET}, {CLAIM}}}", "1000x90"),
            (f"aligned_dra_claim_gpu_sm_utilization_ratio{{{TARGET}, {CLAIM}}}", "0.5x90"),
        ],
        "70m",
        None,
        "",
    ),
    (
        "AlignedDraGpuAllocatedIdle",
        [(f"aligned_dra_claim_gpu_memory_used_bytes{{{TARGET}, {CLAIM}}}", "0x90")],
        "50m",
        None,
        "",
    ),
    (
        "AlignedDraGpuAllocatedIdle",
        [
            (f"aligned_dra_claim_gpu_memory_used_bytes{{{TARGET}, {CLAIM}}}", "0x90"),
            (f'aligned_dra_claim_gpu_memory_used_bytes{{{TARGET}, {IDLE_CLAIM}, pod="train-1"}}', "1000x90"),
        ],
        "70m",
        None,
        "",
    ),
    ("AlignedDraUsageUnavailable", [(f"aligned_dra_usage_available{{{TARGET}}}", "0x30")], "20m", TARGET, ""),
    ("AlignedDraUsageUnavailable", [(f"aligned_dra_usage_available{{{TARGET}}}", "1x30")], "20m", None, ""),
]


def test_promtool_checks_the_rendered_rule_file(tmp_path):
    files = monitoring.files({"rules": True}, {"mode": "host"}, [{"port_name": "metrics", "metrics_port": 8089}], {})
    path = tmp_path / "rules.yml"
    path.write_text(files[monitoring.RULES_FILE])
    proc = prometheus.check_rules(path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(RULES)} rules found" in proc.stdout


def test_every_alert_is_unit_tested_firing_and_not_firing_with_promtool(tmp_path):
    assert {case[0] for case in CASES if case[3]} == set(RULES) == {case[0] for case in CASES if not case[3]}
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(monitoring_rules.rule_file(), sort_keys=False))
    tests = []
    for alert, series, at, firing, value in CASES:
        exp = [expected(alert, firing, value)] if firing else []
        # an alert whose description shows $value needs the case to say it
        assert not (firing and not value and "{{ $value }}" in RULES[alert]["annotations"]["description"]), alert
        tests.append(
            {
                "interval": "1m",
                "input_series": [{"series": name, "values": values} for name, values in series],
                "alert_rule_test": [{"eval_time": at, "alertname": alert, "exp_alerts": exp}],
            }
        )
    unit = tmp_path / "rules_test.yml"
    unit.write_text(yaml.safe_dump({"rule_files": ["rules.yml"], "evaluation_interval": "1m", "tests": tests}))
    proc = prometheus.rule_tests(unit)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout


def test_promtool_test_rules_fails_on_a_wrong_expectation(tmp_path):
    """The unit test above can fail: an alert expected where it does not fire is reported."""
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(monitoring_rules.rule_file(), sort_keys=False))
    wrong = {
        "interval": "1m",
        "input_series": [{"series": f"up{{{TARGET}}}", "values": "1x15"}],
        "alert_rule_test": [
            {
                "eval_time": "10m",
                "alertname": "AlignedDraDriverDown",
                "exp_alerts": [expected("AlignedDraDriverDown", TARGET)],
            }
        ],
    }
    unit = tmp_path / "rules_test.yml"
    unit.write_text(yaml.safe_dump({"rule_files": ["rules.yml"], "evaluation_interval": "1m", "tests": [wrong]}))
    proc = prometheus.rule_tests(unit)
    assert proc.returncode != 0 and "AlignedDraDriverDown" in proc.stdout + proc.stderr
