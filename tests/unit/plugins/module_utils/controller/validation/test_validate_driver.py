# SPDX-License-Identifier: Apache-2.0
"""The validation's checks of each host's driver settings: the driver role's own rules, asked first.

site.yml lets every DaemonSet-mode host but the site's first leave the driver play before the role,
so these rules must refuse what the role's per-host check refuses (roles/driver/tasks/main.yml).
"""

from __future__ import annotations

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.validation import validate, validate_driver

DEFAULTS = {"aligned_dra_driver_mode": "host", "aligned_dra_driver_image": "", "aligned_dra_driver_metrics_port": 8089}
DAEMONSET = {"aligned_dra_driver_mode": "daemonset", "aligned_dra_driver_image": "localhost/aligned-dra-driver:0.1.0"}


@pytest.mark.parametrize(
    ("host", "settings", "expected"),
    [
        ("gpu-01", {}, []),
        ("gpu-01.dc1.example", DAEMONSET, []),
        ("gpu-01", {"aligned_dra_driver_metrics_port": 0}, []),
        ("gpu-01", {"aligned_dra_driver_metrics_port": "9100"}, []),
        ("gpu-01", {"aligned_dra_driver_mode": "daemonset"}, ["aligned_dra_driver_image"]),
        ("gpu-01", dict(DAEMONSET, aligned_dra_driver_image=""), ["aligned_dra_driver_image"]),
        # the node name defaults to the inventory name, which must then be a DNS name itself
        ("GPU_01", {}, ["aligned_dra_driver_node_name"]),
        ("GPU_01", {"aligned_dra_driver_node_name": "gpu-01"}, []),
        ("gpu-01", {"aligned_dra_driver_node_name": "gpu-01."}, ["aligned_dra_driver_node_name"]),
        ("gpu-01", {"aligned_dra_driver_metrics_port": 65536}, ["aligned_dra_driver_metrics_port"]),
        ("gpu-01", {"aligned_dra_driver_metrics_port": -1}, ["aligned_dra_driver_metrics_port"]),
        ("gpu-01", {"aligned_dra_driver_metrics_port": True}, ["aligned_dra_driver_metrics_port"]),
    ],
)
def test_host_settings_the_role_refuses(host, settings, expected):
    assert [item[0] for item in validate_driver.host_problems(host, settings, DEFAULTS)] == expected


def run(settings: dict[str, dict], stages=validate.STAGES):
    return validate.validate(list(settings), lambda h: list(settings[h]), lambda h, n, d: settings[h].get(n, d), stages)


def test_the_validation_names_the_host_and_the_value_with_the_roles_defaults():
    problems, sites = run({"GPU_01": {"aligned_dra_site": "s1", "aligned_dra_driver_metrics_port": 70000}}, ["driver"])
    found = {(p.host, p.variable, p.value) for p in problems if p.variable.startswith("aligned_dra_driver_")}
    assert found == {
        ("GPU_01", "aligned_dra_driver_node_name", '"GPU_01"'),
        ("GPU_01", "aligned_dra_driver_metrics_port", "70000"),
    }, validate.report(problems, sites)
    # the driver's rules are asked only when the driver stage runs
    assert not [p for p in run({"GPU_01": {"aligned_dra_site": "s1"}}, ["claims"])[0] if "driver" in p.variable]


def test_a_value_its_argument_spec_refuses_is_said_once():
    problems = run({"gpu-01": {"aligned_dra_site": "s1", "aligned_dra_driver_metrics_port": "many"}}, ["driver"])[0]
    assert [p.variable for p in problems if p.variable.startswith("aligned_dra_driver_")] == [
        "aligned_dra_driver_metrics_port"
    ]
