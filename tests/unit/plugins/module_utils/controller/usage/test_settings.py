# SPDX-License-Identifier: Apache-2.0
"""``aligned_dra_usage`` checked before anything is read: every refusal names the key, good settings pass."""

from __future__ import annotations

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.usage import UsageError, settings

PROM = {"prometheus": "https://prometheus.example:9090"}


@pytest.mark.parametrize(
    "conf",
    [
        {},
        None,
        PROM,
        dict(PROM, window="7d", step="60s", end="2026-11-20T00:00:00Z", match='job="x"', timeout=10, max_points=500),
        dict(PROM, headers={"X-Scope-OrgID": "a"}, bearer_token_file="/t", ca_file="/c", pods_csv=True),
        dict(PROM, match='job="aligned-dra-driver"', dcgm_match='{namespace="gpu-operator"}'),
        {"files": ["a.om"], "window": "6h", "step": "30m", "idle_threshold": 0.1, "request_percentile": 90},
        {"files": "a.om"},
        {"files": "a.om", "mig_headroom": 0},
        {"files": "a.om", "mig_headroom": 0.2},
    ],
)
def test_settings_that_can_work_pass(conf):
    settings.check(conf)


@pytest.mark.parametrize(
    ("conf", "message"),
    [
        ("http://x", "aligned_dra_usage: must be a mapping with prometheus or files, not str"),
        ({"window": "7d"}, "set exactly one of prometheus"),
        (dict(PROM, files=["a"]), "not prometheus and files"),
        (dict(PROM, colour="red"), "unknown key(s) colour"),
        ({"files": ["a"], "timeout": 3}, "not used when reading from files: timeout"),
        ({"prometheus": "prometheus:9090"}, "aligned_dra_usage.prometheus: 'prometheus:9090' is not an http"),
        (dict(PROM, timeout=0), "aligned_dra_usage.timeout: 0"),
        (dict(PROM, max_points=1.5), "aligned_dra_usage.max_points: 1.5"),
        (dict(PROM, headers={"a": 1}), "aligned_dra_usage.headers"),
        (dict(PROM, bearer_token_file=3), "aligned_dra_usage.bearer_token_file: 3 is not a string"),
        (dict(PROM, dcgm_match=["x"]), "aligned_dra_usage.dcgm_match: ['x'] is not a string"),
        ({"files": ["a"], "dcgm_match": 'job="dcgm"'}, "not used when reading from files: dcgm_match"),
        ({"files": []}, "names no file"),
        (dict(PROM, window="7 days"), "window"),
        (dict(PROM, window="1h", step="7m"), "window 1h must be a whole number of steps of 7m"),
        (dict(PROM, window="1h", step="2h"), "whole number of steps"),
        (dict(PROM, end="yesterday"), "end"),
        (dict(PROM, idle_threshold=0), "aligned_dra_usage.idle_threshold: 0 must be a number above 0 and at most 1"),
        (dict(PROM, request_percentile=101), "request_percentile: 101"),
        (dict(PROM, idle_threshold=True), "idle_threshold: True"),
        (dict(PROM, pods_csv="yes"), "aligned_dra_usage.pods_csv: 'yes' is not true or false"),
        (dict(PROM, mig_headroom=1), "aligned_dra_usage.mig_headroom: 1 must be a fraction of the profile's memory"),
        (dict(PROM, mig_headroom=-0.1), "aligned_dra_usage.mig_headroom: -0.1 must be"),
        (dict(PROM, mig_headroom="5%"), "aligned_dra_usage.mig_headroom: '5%' must be"),
        (dict(PROM, mig_headroom=False), "aligned_dra_usage.mig_headroom: False must be"),
    ],
)
def test_settings_that_cannot_work_are_refused_naming_the_key(conf, message):
    with pytest.raises(UsageError) as raised:
        settings.check(conf)
    assert message in str(raised.value)


def test_the_mig_headroom_defaults_to_five_percent_and_is_read_as_given():
    assert settings.mig_headroom({}, "usage") == 0.05
    assert settings.mig_headroom({"mig_headroom": 0}, "usage") == 0.0
    assert settings.mig_headroom({"mig_headroom": 0.1}, "usage") == 0.1
