# SPDX-License-Identifier: Apache-2.0
"""The reclaim watcher as the driver role installs it: options, rights, the DaemonSet pod, the refusals."""

from __future__ import annotations

import kubernetes_validate
import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.deploy import driver as dd
from ansible_collections.aligned.dra.plugins.module_utils.controller.deploy import driver_instances, reclaim
from ansible_collections.aligned.dra.tests.support.sites.driver_deploy import (
    DS,
    MINORS,
    by_kind,
)

HOST = {"mode": "host", "nodes": ["n1", "n2"]}
EVICT = {"mode": "evict", "margin": 7.5, "interval": 0.5}
RECLAIM_RULES = {("", "pods"): {"get"}, ("", "pods/eviction"): {"create"}, ("", "events"): {"create"}}


def rule_table(objects):
    (role,) = by_kind(objects, "ClusterRole")
    return {(r["apiGroups"][0], res): set(r["verbs"]) for r in role["rules"] for res in r["resources"]}


@pytest.mark.parametrize("settings", [DS, HOST], ids=["daemonset", "host"])
@pytest.mark.parametrize(
    "setting",
    [None, {}, {"mode": "off"}, {"mode": False, "margin": 10}, dict(reclaim.DEFAULTS)],
    ids=["unset", "empty", "off", "yaml-off", "defaults"],
)
def test_reclaim_off_changes_no_argument_and_no_object(settings, setting):
    """A site that does not turn the watcher on gets exactly the arguments and objects it had."""
    on = dict(settings, reclaim=setting)
    assert dd.driver_args(on) == dd.driver_args(settings)
    assert dd.objects(on) == dd.objects(settings)
    assert not [a for a in dd.driver_args(on) if a.startswith("--reclaim")]
    assert all(key not in RECLAIM_RULES for key in rule_table(dd.objects(on)))


@pytest.mark.parametrize("minor", MINORS)
def test_reclaim_evict_gives_the_driver_its_options_rights_and_the_hosts_processes(minor):
    objects = dd.objects(dict(DS, reclaim=EVICT))
    for obj in objects:
        kubernetes_validate.validate(obj, minor, strict=True)
    (daemonset,) = by_kind(objects, "DaemonSet")
    pod = daemonset["spec"]["template"]["spec"]
    assert pod["hostPID"] is True
    args = pod["containers"][0]["args"]
    assert [a for a in args if a.startswith("--reclaim")] == [
        "--reclaim=evict",
        "--reclaim-margin=7.5",
        "--reclaim-interval=0.5",
    ]
    # the rules the watcher calls, added to the driver's own and nothing more
    without = rule_table(dd.objects(DS))
    assert rule_table(objects) == {**without, **RECLAIM_RULES}
    # host mode: the same rules for every node's account, no pod
    host = dd.objects(dict(HOST, reclaim={"mode": "evict"}))
    assert rule_table(host) == rule_table(objects) and not by_kind(host, "DaemonSet")
    assert [a for a in dd.driver_args(dict(HOST, reclaim={"mode": "evict"})) if a.startswith("--reclaim")] == [
        "--reclaim=evict",
        "--reclaim-margin=5",
        "--reclaim-interval=2",
    ]


def test_reclaim_options_are_accepted_by_the_driver_command_line():
    from aligned_dra_driver.cli import parser

    args = parser().parse_args(["--node-name=n1", *dd.driver_args({"reclaim": EVICT})])
    assert (args.reclaim, args.reclaim_margin, args.reclaim_interval) == ("evict", 7.5, 0.5)
    strings = parser().parse_args(["--node-name=n1", *dd.driver_args({"reclaim": {"mode": "evict", "margin": "12"}})])
    assert (strings.reclaim_margin, strings.reclaim_interval) == (12.0, 2.0)
    off = parser().parse_args(["--node-name=n1", *dd.driver_args({"reclaim": {"mode": "off"}})])
    assert off.reclaim == "off"


@pytest.mark.parametrize(
    ("setting", "variable", "words"),
    [
        ({"mode": "kill"}, "aligned_dra_driver_reclaim.mode", "must be off or evict"),
        ({"mode": "Evict"}, "aligned_dra_driver_reclaim.mode", "must be off or evict"),
        ({"mode": "evict", "margin": 0}, "aligned_dra_driver_reclaim.margin", "more than 0 and less than 100"),
        ({"mode": "evict", "margin": 100}, "aligned_dra_driver_reclaim.margin", "more than 0 and less than 100"),
        ({"mode": "evict", "margin": "nan"}, "aligned_dra_driver_reclaim.margin", "more than 0"),
        ({"mode": "evict", "margin": True}, "aligned_dra_driver_reclaim.margin", "more than 0"),
        ({"mode": "evict", "interval": 0.05}, "aligned_dra_driver_reclaim.interval", "from 0.1 to 3600"),
        ({"mode": "evict", "interval": 3601}, "aligned_dra_driver_reclaim.interval", "from 0.1 to 3600"),
        ({"mode": "evict", "interval": "soon"}, "aligned_dra_driver_reclaim.interval", "from 0.1 to 3600"),
        ({"mode": "evict", "margins": 5}, "aligned_dra_driver_reclaim.margins", "no key of it"),
        ("evict", "aligned_dra_driver_reclaim", "must be a dict"),
        ({"mode": "evict", "runtime_class": "Nvidia_RT"}, "aligned_dra_driver_reclaim.runtime_class", "DNS subdomain"),
        # refused when off too: a wrong value is wrong before it is turned on
        ({"mode": "off", "margin": -1}, "aligned_dra_driver_reclaim.margin", "more than 0"),
    ],
)
def test_a_bad_reclaim_setting_is_refused_naming_the_variable(setting, variable, words):
    problems = reclaim.problems(setting)
    assert [p[0] for p in problems] == [variable], problems
    (line,) = dd.problem_lines(problems)
    assert line.startswith(f"{variable} = ") and words in line, line
    for call in (dd.driver_args, dd.objects):
        with pytest.raises(dd.DeployError, match=variable.replace(".", r"\.") + " = "):
            call(dict(DS, reclaim=setting))


@pytest.mark.parametrize("margin", [0.5, 5, 99.9, "5"])
def test_reclaim_bounds_are_the_drivers(margin):
    assert reclaim.problems({"mode": "evict", "margin": margin, "interval": 0.1}) == []
    assert reclaim.problems({"mode": "evict", "interval": 3600}) == []


NVML_ENV = {"NVIDIA_VISIBLE_DEVICES": "all", "NVIDIA_DRIVER_CAPABILITIES": "utility"}


def env_of(container):
    return {item["name"]: item.get("value") for item in container.get("env", []) if "value" in item}


def test_the_watchers_container_asks_the_nvidia_toolkit_for_nvml_and_the_runtime_class_is_the_sites():
    (daemonset,) = by_kind(dd.objects(dict(DS, reclaim={"mode": "evict"})), "DaemonSet")
    pod = daemonset["spec"]["template"]["spec"]
    assert env_of(pod["containers"][0]) == NVML_ENV and "runtimeClassName" not in pod
    named = dict(DS, reclaim={"mode": "evict", "runtime_class": "nvidia"})
    (daemonset,) = by_kind(dd.objects(named), "DaemonSet")
    assert daemonset["spec"]["template"]["spec"]["runtimeClassName"] == "nvidia"
    kubernetes_validate.validate(daemonset, "1.36.0", strict=True)
    # off: neither, even with a runtime class named
    off = dict(DS, reclaim={"mode": "off", "runtime_class": "nvidia"})
    assert dd.objects(off) == dd.objects(DS)


def test_split_by_kind_only_the_gpu_plugins_container_gets_the_gpus():
    settings = dict(DS, reclaim={"mode": "evict"}, split_gpu_driver="gpu.aligned.dev", kubernetes_version="1.36")
    (daemonset,) = by_kind(driver_instances.objects(settings), "DaemonSet")
    containers = {c["name"]: c for c in daemonset["spec"]["template"]["spec"]["containers"]}
    assert env_of(containers["driver-gpu"]) == NVML_ENV
    assert env_of(containers["driver"]) == {}
    assert [a for a in containers["driver"]["args"] if a.startswith("--reclaim")] == []
