# SPDX-License-Identifier: Apache-2.0
"""aligned_dra_monitoring through real ansible-playbook runs of the driver role (DaemonSet mode, no node):
check mode with a diff first, then the objects, then nothing to change; without the operator the scrape
configuration and rule file; off again, what a site without it had; refusals before anything is written."""

from __future__ import annotations

import subprocess

import pytest
import yaml

from ansible_collections.aligned.dra.tests.support.harnesses.driver_role import (
    IMAGE,
    changed,
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
ALL = {"prometheus_operator": True, "rules": True, "grafana": True, "labels": {"release": "kps"}}


def run(tmp_path, monitoring: dict | None, *args: str, hosts: dict | None = None) -> subprocess.CompletedProcess:
    settings = dict(BASE, **({"aligned_dra_monitoring": monitoring} if monitoring is not None else {}))
    proc = playbook(inventory(tmp_path, hosts or {"node-a": {}, "node-b": {}}, **settings), *args)
    assert proc.returncode == 0, proc.output
    return proc


def test_monitoring_renders_with_check_mode_and_diff_first_idempotently_and_goes_back_when_off(tmp_path):
    out = tmp_path / "output" / "lab" / "driver"
    run(tmp_path, None)
    before = (out / "daemonset.yaml").read_bytes()
    assert sorted(p.name for p in out.iterdir()) == ["daemonset.yaml"]

    rehearsed = run(tmp_path, ALL, "--check", "--diff")
    assert "\n+kind: PodMonitor\n" in rehearsed.stdout and "\n+kind: PrometheusRule\n" in rehearsed.stdout
    assert "\n+      hostPID: true\n" in rehearsed.stdout
    assert (out / "daemonset.yaml").read_bytes() == before

    run(tmp_path, ALL)
    objects = [o for o in yaml.safe_load_all((out / "daemonset.yaml").read_text()) if o]
    kinds = [o["kind"] for o in objects]
    assert kinds[-3:] == ["PodMonitor", "PrometheusRule", "ConfigMap"]
    assert objects[-1]["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert all(o["metadata"]["labels"]["release"] == "kps" for o in objects[-3:])
    (daemonset,) = [o for o in objects if o["kind"] == "DaemonSet"]
    assert daemonset["spec"]["template"]["spec"]["hostPID"] is True
    again = run(tmp_path, ALL)
    assert changed(again) == 0, again.output

    # without the operator: files for a plain Prometheus, and only the dashboard as an object
    plain = run(tmp_path, {"rules": True, "grafana": True})
    assert changed(plain) > 0
    scrape = yaml.safe_load((out / "prometheus" / "scrape-config.yml").read_text())
    assert scrape["scrape_configs"][0]["job_name"] == "aligned-dra-driver"
    assert yaml.safe_load((out / "prometheus" / "rules.yml").read_text())["groups"][0]["name"] == "aligned-dra-driver"
    kinds = [o["kind"] for o in yaml.safe_load_all((out / "daemonset.yaml").read_text()) if o]
    assert "PodMonitor" not in kinds and kinds[-1] == "ConfigMap"
    assert changed(run(tmp_path, {"rules": True, "grafana": True})) == 0

    run(tmp_path, {})
    assert (out / "daemonset.yaml").read_bytes() == before
    assert not (out / "prometheus" / "scrape-config.yml").exists() and not (out / "prometheus" / "rules.yml").exists()


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
