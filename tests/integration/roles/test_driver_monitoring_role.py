# SPDX-License-Identifier: Apache-2.0
"""aligned_dra_monitoring through real ansible-playbook runs of the driver role (DaemonSet mode, no node):
refusals before anything is written, and the address host mode's unit binds. The objects rendered (check
mode with a diff first, then the objects, then nothing to change; without the operator the scrape
configuration and rule file; off again, what a site without it had) are tested with reclaim's, the other
setting that gives the GPU plugin NVML, in tests/integration/roles/test_driver_role.py."""

from __future__ import annotations

import pytest

from ansible_collections.aligned.dra.tests.support.harnesses.driver_role import (
    IMAGE,
    exec_start_argv,
    inventory,
    playbook,
    render,
)

BASE = {
    "aligned_dra_driver_mode": "daemonset",
    "aligned_dra_driver_image": IMAGE,
    "aligned_dra_driver_image_context": False,
}


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"aligned_dra_monitoring": {"grafana": True, "graphana": True}},
            "aligned_dra_monitoring.graphana",
        ),
        (
            {"aligned_dra_monitoring": {"rules": True}, "aligned_dra_driver_metrics_port": 0},
            "aligned_dra_monitoring.rules = true: alerts on metrics that nothing serves",
        ),
        (
            {"aligned_dra_monitoring": {"grafana": True}, "aligned_dra_driver_metrics_port": 0},
            "aligned_dra_monitoring.grafana = true: a dashboard of metrics that nothing serves",
        ),
        ({"aligned_dra_monitoring": {"interval": "soon"}}, 'aligned_dra_monitoring.interval = "soon"'),
    ],
)
def test_monitoring_that_makes_no_sense_is_refused_before_anything_is_written(tmp_path, settings, message):
    proc = playbook(inventory(tmp_path, {"node-a": {}}, **dict(BASE, **settings)))
    assert proc.returncode != 0
    assert message in proc.output, proc.output
    assert not (tmp_path / "output").exists()


def test_hosts_of_a_site_that_disagree_are_refused_before_anything_is_written(tmp_path):
    hosts = {"node-a": {"aligned_dra_monitoring": {"grafana": True}}, "node-b": {"aligned_dra_monitoring": {}}}
    proc = playbook(inventory(tmp_path, hosts, **BASE))
    assert proc.returncode != 0
    assert "aligned_dra_monitoring: must be the same on every host of a site" in proc.output, proc.output
    assert not (tmp_path / "output").exists()


@pytest.mark.parametrize(
    ("address", "argument"),
    [(None, "127.0.0.1:8089"), ("10.0.0.5", "10.0.0.5:8089"), ("fd00::5", "[fd00::5]:8089")],
    ids=["default", "ipv4", "ipv6"],
)
def test_the_host_mode_unit_binds_the_metrics_address_the_host_gives(tmp_path, address, argument):
    """aligned_dra_driver_metrics_address: where host mode's /metrics listens (loopback unless the host says)."""
    extra = {} if address is None else {"aligned_dra_driver_metrics_address": address}
    argv = exec_start_argv(render(tmp_path, "aligned-dra-driver.service.j2", **extra))
    assert [a for a in argv if a.startswith("--metrics-address=")] == [f"--metrics-address={argument}"]
