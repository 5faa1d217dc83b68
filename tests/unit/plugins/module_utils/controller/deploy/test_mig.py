# SPDX-License-Identifier: Apache-2.0
"""deploy/mig: the driver's MIG flags from aligned_dra_mig, NVML's MIG grants in the DaemonSet, and dynamic MIG
refused where the site's minor serves no partitionable devices."""

from __future__ import annotations

import kubernetes_validate
import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.deploy import driver as dd
from ansible_collections.aligned.dra.plugins.module_utils.controller.deploy import driver_instances as di
from ansible_collections.aligned.dra.plugins.module_utils.controller.deploy import mig
from ansible_collections.aligned.dra.tests.support.sites.driver_deploy import DS, MINORS, by_kind

HOST = {"mode": "host", "nodes": ["n1", "n2"]}
SPLIT = {"split_gpu_driver": "gpu.aligned.dev"}
STATIC = {"mode": "static", "gpus": {}, "layout": "all-1g", "mig_configs": {"all-1g": []}}
DYNAMIC = {"mode": "dynamic"}
BY_ADDRESS = {"mode": "static", "gpus": {"pci_addresses": ["0000:18:00.0", "0000:2A:00.0", "0000:18:00.0"]}}
GATE_OFF = (
    "mode dynamic publishes partitionable devices (DRAPartitionableDevices), off by default on Kubernetes {minor}: "
    "turn the gate on in the cluster and say so (partitionable_devices_gate: true), or use mode static"
)


def _pod(daemonset):
    return daemonset["spec"]["template"]["spec"]


def _container(daemonset, name="driver"):
    return next(c for c in _pod(daemonset)["containers"] if c["name"] == name)


def _mig_args(args):
    return [a for a in args if a.startswith("--mig")]


# -- off: every earlier install, unchanged ---------------------------------------------------------


@pytest.mark.parametrize(
    "value", [None, {}, {"mode": "off"}, {"mode": False}, {"mode": "off", "gpus": {"indices": [0]}}]
)
@pytest.mark.parametrize(
    "settings", [DS, HOST, dict(DS, **SPLIT), dict(HOST, **SPLIT)], ids=["ds", "host", "ds-split", "host-split"]
)
def test_mig_off_or_unset_leaves_the_arguments_and_objects_as_they_were(settings, value):
    with_mig = dict(settings, mig=value, kubernetes_version="1.35")
    without = dict(settings, kubernetes_version="1.35")
    assert di.objects(with_mig) == di.objects(without)
    for instance in di.instances(with_mig):
        assert di.instance_args(with_mig, instance) == di.instance_args(without, instance)
        assert not _mig_args(di.instance_args(with_mig, instance))


# -- the flags -------------------------------------------------------------------------------------


def test_mig_mode_and_pci_addresses_reach_the_driver_before_its_log_level():
    args = dd.driver_args({"mig": BY_ADDRESS, "log_level": "DEBUG"})
    # lowercase, in the inventory's order, each once: the driver's form of a PCI address
    assert args[-3:] == ["--mig=static", "--mig-gpus=0000:18:00.0,0000:2a:00.0", "--log-level=DEBUG"]
    assert _mig_args(dd.driver_args({"mig": DYNAMIC, "kubernetes_version": "1.36"})) == [
        "--mig=dynamic",
        "--mig-gpus=all",
    ]


@pytest.mark.parametrize(
    "gpus",
    [
        {},
        {"pci_addresses": []},
        {"models": ["NVIDIA A100*"]},
        {"indices": [0, 1]},
        {"device_ids": ["0x20b0"]},
        # by PCI address and something else: the mig role resolves the rest on the node, the driver takes every
        # GPU whose MIG mode is on
        {"pci_addresses": ["0000:18:00.0"], "models": ["NVIDIA H100*"]},
    ],
)
def test_any_selector_but_pci_addresses_alone_gives_the_driver_all(gpus):
    assert _mig_args(dd.driver_args({"mig": {"mode": "static", "gpus": gpus}})) == ["--mig=static", "--mig-gpus=all"]


def test_the_flags_are_the_driver_command_lines():
    from aligned_dra_driver.cli import parser

    if "--mig-gpus" not in parser()._option_string_actions:
        pytest.skip("the driver's command line has no --mig-gpus yet (H4's cli.py)")
    args = parser().parse_args(["--node-name=n1", *dd.driver_args({"mig": BY_ADDRESS})])
    assert args.mig == "static"
    assert "0000:2a:00.0" in str(args.mig_gpus)


@pytest.mark.parametrize(
    ("value", "variable", "reason"),
    [
        ({"mode": "partitioned"}, "aligned_dra_mig.mode", "must be one of off, static, dynamic"),
        (
            {"mode": "static", "gpus": {"pci_addresses": ["18:00.0"]}},
            "aligned_dra_mig.gpus.pci_addresses",
            "0000:18:00.0",
        ),
        ({"mode": "static", "gpus": {"pci_addresses": ["0000:18:00.0,all"]}}, "aligned_dra_mig.gpus.pci_addresses", ""),
        ({"mode": "static", "gpus": ["0000:18:00.0"]}, "aligned_dra_mig.gpus", "must be a dict"),
        ("static", "aligned_dra_mig", "must be a dict"),
    ],
)
def test_a_setting_the_driver_cannot_run_with_is_refused_naming_it(value, variable, reason):
    with pytest.raises(dd.DeployError, match=f"^{variable} = .*{reason}"):
        dd.driver_args({"mig": value})
    with pytest.raises(dd.DeployError, match=f"^{variable} = "):
        di.instances({"mig": value})


# -- dynamic needs partitionable devices -----------------------------------------------------------


@pytest.mark.parametrize("minor", ["1.34", "1.35"])
def test_dynamic_is_refused_where_the_minor_serves_no_partitionable_devices(minor):
    settings = {"mig": DYNAMIC, "kubernetes_version": minor}
    assert di.mig_problems(settings) == [("aligned_dra_mig", DYNAMIC, GATE_OFF.format(minor=minor))]
    # before any change: the role's preflight asks driver_instances, and every argument asks it again
    with pytest.raises(dd.DeployError, match=r"^aligned_dra_mig = \{\"mode\": \"dynamic\"\}: mode dynamic publishes"):
        di.instances(settings)
    with pytest.raises(dd.DeployError, match="partitionable_devices_gate: true"):
        dd.driver_args(settings)
    # static needs no gate
    assert di.mig_problems(dict(settings, mig={"mode": "static"})) == []


@pytest.mark.parametrize(
    ("minor", "value", "gates"),
    [
        ("1.36", DYNAMIC, None),
        ("1.37", DYNAMIC, {}),
        ("1.35", dict(DYNAMIC, partitionable_devices_gate=True), None),
        ("1.34", DYNAMIC, {"DRAPartitionableDevices": True}),
        ("1.35.4", DYNAMIC, {"DRAPartitionableDevices": True, "DRADeviceTaints": False}),
    ],
)
def test_dynamic_runs_where_the_gate_is_on_by_default_or_by_the_site(minor, value, gates):
    settings = {"mig": value, "kubernetes_version": minor, "feature_gates": gates}
    assert di.mig_problems(settings) == []
    assert _mig_args(dd.driver_args(settings)) == ["--mig=dynamic", "--mig-gpus=all"]


def test_the_site_turning_the_gate_off_or_saying_two_things_is_refused():
    off = {"mig": DYNAMIC, "kubernetes_version": "1.36", "feature_gates": {"DRAPartitionableDevices": False}}
    assert di.mig_problems(off) == [("aligned_dra_mig", DYNAMIC, GATE_OFF.format(minor="1.36"))]
    said = dict(DYNAMIC, partitionable_devices_gate=True)
    two = {"mig": said, "kubernetes_version": "1.35", "feature_gates": {"DRAPartitionableDevices": False}}
    assert [reason for _v, _value, reason in di.mig_problems(two)] == [
        "partitionable_devices_gate is true and aligned_dra_feature_gates.DRAPartitionableDevices false: "
        "the site says one thing"
    ]
    bad = {"mig": DYNAMIC, "kubernetes_version": "1.20"}
    assert [variable for variable, _value, _reason in di.mig_problems(bad)] == ["aligned_dra_kubernetes_version"]


def test_the_validation_stage_says_the_same_words():
    checks = pytest.importorskip("ansible_collections.aligned.dra.plugins.module_utils.controller.mig.checks")
    for minor, value, gates in [
        ("1.35", DYNAMIC, {}),
        ("1.35", dict(DYNAMIC, partitionable_devices_gate=True), {"DRAPartitionableDevices": False}),
        ("1.36", DYNAMIC, {}),
    ]:
        assert checks.gate_problems(value, minor, gates) == mig.partitionable_problems(value, minor, gates)


# -- the DaemonSet ---------------------------------------------------------------------------------


@pytest.mark.parametrize("minor", MINORS)
@pytest.mark.parametrize("value", [STATIC, DYNAMIC, BY_ADDRESS], ids=["static", "dynamic", "by-address"])
@pytest.mark.parametrize("split", [{}, SPLIT], ids=["one", "split"])
def test_daemonset_with_mig_validates_strictly_against_the_official_schema(value, split, minor):
    settings = dict(DS, mig=value, kubernetes_version=minor, feature_gates={"DRAPartitionableDevices": True}, **split)
    for obj in di.objects(settings):
        kubernetes_validate.validate(obj, minor, strict=True)


def test_daemonset_gives_the_gpu_plugin_nvml_with_the_mig_capabilities_and_the_hosts_proc_read_only():
    static = dd.daemonset(dict(DS, mig=STATIC))
    container, pod = _container(static), _pod(static)
    env = {item["name"]: item["value"] for item in container["env"] if "value" in item}
    assert env == {
        "NVIDIA_VISIBLE_DEVICES": "all",
        "NVIDIA_DRIVER_CAPABILITIES": "utility",
        "NVIDIA_MIG_MONITOR_DEVICES": "all",
    }
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["NET_ADMIN", "SYS_ADMIN"]}
    assert container["securityContext"]["privileged"] is False
    assert {"name": "host-proc", "hostPath": {"path": "/proc", "type": "Directory"}} in pod["volumes"]
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert mounts["host-proc"] == {
        "name": "host-proc",
        "mountPath": "/host/proc",
        "readOnly": True,
        "recursiveReadOnly": "IfPossible",
    }
    # /dev/nvidia-caps: below the pod's /dev, which stays read-only
    assert mounts["dev"] == {"name": "dev", "mountPath": "/dev", "readOnly": True}
    assert container["args"].count("--procfs-root=/host/proc") == 1
    assert _mig_args(container["args"]) == ["--mig=static", "--mig-gpus=all"]
    assert "hostPID" not in pod and "runtimeClassName" not in pod
    # dynamic: the driver creates and destroys instances
    dynamic = _container(dd.daemonset(dict(DS, mig=DYNAMIC, kubernetes_version="1.36")))
    assert {"name": "NVIDIA_MIG_CONFIG_DEVICES", "value": "all"} in dynamic["env"]


def test_daemonset_with_mig_and_reclaim_names_each_variable_once_and_keeps_the_runtime_class():
    reclaim = {"mode": "evict", "runtime_class": "nvidia"}
    settings = dict(DS, mig=STATIC, reclaim=reclaim, fractional_gpus=True, kubernetes_version="1.36")
    daemonset = dd.daemonset(settings)
    names = [item["name"] for item in _container(daemonset)["env"]]
    assert len(names) == len(set(names)) and "NVIDIA_MIG_MONITOR_DEVICES" in names
    assert _pod(daemonset)["runtimeClassName"] == "nvidia" and _pod(daemonset)["hostPID"] is True
    # MIG alone takes the RuntimeClass the site's monitoring names
    monitored = dd.daemonset(dict(DS, mig=STATIC, monitoring={"runtime_class": "nvidia-cdi"}))
    assert _pod(monitored)["runtimeClassName"] == "nvidia-cdi"


def test_split_daemonset_gives_mig_to_the_gpu_plugin_only():
    daemonset = di.daemonset(dict(DS, mig=BY_ADDRESS, **SPLIT))
    gpu, nic = _container(daemonset, "driver-gpu"), _container(daemonset, "driver")
    assert _mig_args(gpu["args"]) == ["--mig=static", "--mig-gpus=0000:18:00.0,0000:2a:00.0"]
    assert "--procfs-root=/host/proc" in gpu["args"] and "SYS_ADMIN" in gpu["securityContext"]["capabilities"]["add"]
    assert "host-proc" in {m["name"] for m in gpu["volumeMounts"]}
    assert not [a for a in nic["args"] if a.startswith(("--mig", "--procfs-root"))]
    assert nic["securityContext"]["capabilities"]["add"] == ["NET_ADMIN"]
    assert "host-proc" not in {m["name"] for m in nic["volumeMounts"]}
    assert not [item for item in nic["env"] if item["name"].startswith("NVIDIA_")]
    # host mode: the GPU unit's arguments only
    main, gpu_instance = di.instances(dict(HOST, mig=BY_ADDRESS, **SPLIT))
    assert not _mig_args(di.instance_args(dict(HOST, mig=BY_ADDRESS, **SPLIT), main))
    assert _mig_args(di.instance_args(dict(HOST, mig=BY_ADDRESS, **SPLIT), gpu_instance)) == _mig_args(gpu["args"])


def test_host_mode_objects_are_the_same_with_mig():
    """Host mode's cluster objects hold no DaemonSet: MIG changes only the units' arguments."""
    settings = dict(HOST, mig=STATIC)
    assert di.objects(settings) == di.objects(HOST)
    assert not by_kind(di.objects(settings), "DaemonSet")
