# SPDX-License-Identifier: Apache-2.0
"""driver_instances: the driver's plugins on a node, one or two split by kind, their arguments and objects."""

from __future__ import annotations

import kubernetes_validate
import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.deploy import driver as dd
from ansible_collections.aligned.dra.plugins.module_utils.controller.deploy import driver_instances as di
from ansible_collections.aligned.dra.tests.support.harnesses.admission_policies import evaluate_policy

SPLIT = {"split_gpu_driver": "gpu.aligned.dev"}
DS = {"mode": "daemonset", "image": "registry.example/aligned-dra-driver:0.1.0", "exclude": ["eno*"]}
HOST = {"mode": "host", "nodes": ["n1", "n2"]}


# -- one driver, as before ------------------------------------------------------------------------


@pytest.mark.parametrize("split", [None, ""])
@pytest.mark.parametrize("settings", [DS, HOST, dict(DS, metrics_port=0, driver_name="nic.example.com")])
def test_unset_or_empty_split_is_one_plugin_with_the_same_arguments_and_objects(settings, split):
    settings = dict(settings, split_gpu_driver=split)
    (main,) = di.instances(settings)
    assert main["kinds"] == [] and main["unit"] == "aligned-dra-driver.service" and main["container"] == "driver"
    # exactly what a site that never heard of the split gets: no unit, pod or policy changes on upgrade
    assert di.instance_args(settings, main) == di.instance_args(settings) == dd.driver_args(settings)
    assert di.objects(settings) == dd.objects(settings)


# -- split by kind --------------------------------------------------------------------------------


def test_split_runs_a_gpu_plugin_beside_the_main_one_each_with_its_own_state():
    main, gpu = di.instances(dict(SPLIT, state_dir="/var/lib/aligned-dra/", metrics_port=9100))
    assert main == {
        "role": "main",
        "name": "dra.aligned.dev",
        "kinds": ["nic", "vf"],
        "state_dir": "/var/lib/aligned-dra/",
        "mps_root": "/run/aligned-dra/mps",
        "metrics_port": 9100,
        "unit": "aligned-dra-driver.service",
        "container": "driver",
        "port_name": "metrics",
        "rails": True,
    }
    assert gpu == {
        "role": "gpu",
        "name": "gpu.aligned.dev",
        "kinds": ["gpu", "accelerator"],
        "state_dir": "/var/lib/aligned-dra/gpu",
        "mps_root": "/run/aligned-dra/mps/gpu",
        "metrics_port": 9101,
        "unit": "aligned-dra-driver-gpu.service",
        "container": "driver-gpu",
        "port_name": "metrics-gpu",
        "rails": False,
    }
    # every kind the driver publishes, each by one plugin
    assert sorted(main["kinds"] + gpu["kinds"]) == sorted(di.dra.DEVICE_KINDS)
    assert di.instances(dict(SPLIT, metrics_port=0))[1]["metrics_port"] == 0  # off stays off
    assert di.driver_names(dict(SPLIT, driver_name="nic.example.com")) == ["nic.example.com", "gpu.aligned.dev"]


def test_each_plugin_gets_its_own_name_kinds_and_directories_on_the_command_line():
    main, gpu = di.instances(SPLIT)
    main_args, gpu_args = di.instance_args(SPLIT, main), di.instance_args(SPLIT, gpu)
    assert main_args[:2] == ["--driver-name=dra.aligned.dev", "--kinds=nic,vf"]
    assert gpu_args[:2] == ["--driver-name=gpu.aligned.dev", "--kinds=gpu,accelerator"]
    assert "--state-dir=/var/lib/aligned-dra" in main_args and "--mps-root=/run/aligned-dra/mps" in main_args
    assert "--state-dir=/var/lib/aligned-dra/gpu" in gpu_args and "--mps-root=/run/aligned-dra/mps/gpu" in gpu_args
    # the rest is shared
    same = {"--driver-name", "--kinds", "--state-dir", "--mps-root"}
    assert [a for a in main_args if a.split("=", maxsplit=1)[0] not in same] == [
        a for a in gpu_args if a.split("=", maxsplit=1)[0] not in same
    ]


def test_the_driver_command_line_takes_each_plugins_arguments():
    from aligned_dra_driver.cli import parser

    for instance in di.instances(SPLIT):
        args = parser().parse_args(["--node-name=n1", *di.instance_args(SPLIT, instance)])
        assert args.driver_name == instance["name"] and args.state_dir == instance["state_dir"]
        assert args.kinds == ",".join(instance["kinds"])


def test_an_instance_that_is_not_one_of_the_sites_is_refused():
    with pytest.raises(dd.DeployError, match="instance"):
        di.instance_args(SPLIT, {"name": "gpu.aligned.dev"})


# -- the split's rules ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "variable", "words"),
    [
        ({"split_gpu_driver": "nic.aligned.dev"}, "aligned_dra_device_options.split_gpu_driver", "'gpu'"),
        ({"split_gpu_driver": "GPU.Aligned.dev"}, "aligned_dra_device_options.split_gpu_driver", "DNS subdomain"),
        ({"split_gpu_driver": "gpu." + "a" * 60}, "aligned_dra_device_options.split_gpu_driver", "63"),
        ({"split_gpu_driver": 5}, "aligned_dra_device_options.split_gpu_driver", "a driver name"),
        (
            {"split_gpu_driver": "gpu.example.com", "driver_name": "gpu.example.com"},
            "aligned_dra_device_options.split_gpu_driver",
            "must differ from aligned_dra_driver_name (gpu.example.com)",
        ),
        (
            {"split_gpu_driver": "gpu.example.com", "driver_name": "gpu-nics.example.com"},
            "aligned_dra_driver_name",
            "would count them as GPUs",
        ),
        (dict(SPLIT, metrics_port=65535), "aligned_dra_driver_metrics_port", "at most 65534"),
    ],
)
def test_a_bad_split_is_refused_naming_the_variable_and_the_value(settings, variable, words):
    problems = di.split_problems(settings)
    assert [p[0] for p in problems] == [variable], problems
    line = di.problem_lines(problems)[0]
    value = settings["split_gpu_driver"] if variable.endswith("split_gpu_driver") else None
    assert line.startswith(f"{variable} = "), line
    assert words in line, line
    if value is not None:
        assert repr(value).strip("'") in line
    with pytest.raises(dd.DeployError, match=variable.replace(".", r"\.")):
        di.instances(settings)


@pytest.mark.parametrize("split", [None, "", "gpu.aligned.dev", "aligned-gpu.example.com"])
def test_a_good_or_unset_split_has_no_problem(split):
    assert di.split_problems({"split_gpu_driver": split, "metrics_port": 65535 if not split else 8089}) == []


def test_the_name_rule_is_the_device_models(monkeypatch):
    """One rule for the name: the validation stage asks dra.split_gpu_driver_problem too."""
    monkeypatch.setattr(di.dra, "split_gpu_driver_problem", lambda name: "refused by the model")
    assert di.split_problems(SPLIT) == [(di.SPLIT_VARIABLE, "gpu.aligned.dev", "refused by the model")]


# -- the DaemonSet and the credentials ------------------------------------------------------------


@pytest.mark.parametrize("minor", ["1.34.0", "1.37.0"])
@pytest.mark.parametrize("port", [8089, 0])
def test_the_split_daemonset_runs_both_plugins_in_one_pod_and_validates(minor, port):
    settings = dict(DS, **SPLIT, metrics_port=port)
    objects = di.objects(settings)
    for obj in objects:
        kubernetes_validate.validate(obj, minor, strict=True)
    (daemonset,) = [o for o in objects if o["kind"] == "DaemonSet"]
    pod = daemonset["spec"]["template"]["spec"]
    main, gpu = pod["containers"]
    assert (main["name"], gpu["name"]) == ("driver", "driver-gpu")
    assert main["args"][:4] == [
        "--node-name=$(NODE_NAME)",
        "--dev-root=/dev",
        "--driver-name=dra.aligned.dev",
        "--kinds=nic,vf",
    ]
    assert gpu["args"][:4] == [
        "--node-name=$(NODE_NAME)",
        "--dev-root=/dev",
        "--driver-name=gpu.aligned.dev",
        "--kinds=gpu,accelerator",
    ]
    assert "--state-dir=/var/lib/aligned-dra/gpu" in gpu["args"]
    # the same image, mounts and security: the GPU plugin's directories are below the main plugin's volumes
    for key in ("image", "volumeMounts", "securityContext", "env", "resources"):
        assert gpu[key] == main[key], key
    assert len(pod["volumes"]) == len(dd.daemonset(DS)["spec"]["template"]["spec"]["volumes"])
    if port:
        assert "--metrics-address=$(POD_IP):8089" in main["args"] and "--metrics-address=$(POD_IP):8090" in gpu["args"]
        assert gpu["ports"] == [{"name": "metrics-gpu", "containerPort": 8090, "protocol": "TCP"}]
        assert main["ports"] == [{"name": "metrics", "containerPort": 8089, "protocol": "TCP"}]
        assert gpu["livenessProbe"]["httpGet"] == {"path": "/livez", "port": "metrics-gpu"}
        assert gpu["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics-gpu"}
        assert main["livenessProbe"]["httpGet"]["port"] == "metrics"
    else:
        for container in (main, gpu):
            assert "ports" not in container and "livenessProbe" not in container
            assert not [a for a in container["args"] if a.startswith("--metrics-address")]


def slice_of(node, driver):
    body = {"driver": driver, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "nodeName": node}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "spec": body}


def claim(results, devices=None):
    status = {
        "allocation": {"devices": {"results": results}},
        "reservedFor": [{"resource": "pods", "name": "p", "uid": "u1"}],
    }
    if devices is not None:
        status["devices"] = devices
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "status": status}


def test_the_node_credentials_write_the_slices_and_statuses_of_both_drivers_and_no_other():
    objects = di.objects(dict(HOST, **SPLIT))
    policies = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ValidatingAdmissionPolicy"}
    slices, claims = policies["aligned-dra-driver-node-slices"], policies["aligned-dra-driver-node-claims"]
    user = {"username": "system:serviceaccount:aligned-dra:aligned-dra-node-n1"}
    create = {"userInfo": user, "operation": "CREATE"}
    for driver in ("dra.aligned.dev", "gpu.aligned.dev"):
        assert evaluate_policy(slices, create, slice_of("n1", driver), None) is None, driver
        assert "spec.nodeName is n1" in evaluate_policy(slices, create, slice_of("n2", driver), None)
    denied = evaluate_policy(slices, create, slice_of("n1", "gpu.nvidia.com"), None)
    assert denied == "driver credentials may only write ResourceSlices of drivers dra.aligned.dev, gpu.aligned.dev"
    # a claim with a GPU of one plugin and a NIC of the other: each writes its own device's status
    results = [
        {"request": "gpu", "driver": "gpu.aligned.dev", "pool": "n1", "device": "gpu-0"},
        {"request": "nic", "driver": "dra.aligned.dev", "pool": "n1", "device": "nic-0"},
    ]
    update = {"userInfo": user, "operation": "UPDATE"}
    entries = [{"driver": r["driver"], "pool": "n1", "device": r["device"]} for r in results]
    assert evaluate_policy(claims, update, claim(results, entries), claim(results)) is None
    other = [{"driver": "gpu.nvidia.com", "pool": "n1", "device": "x"}]
    assert "in its own pool" in evaluate_policy(claims, update, claim(results, other), claim(results))


def test_policies_of_one_driver_keep_their_expressions():
    """A site that does not split gets the policies it had: nothing to apply on upgrade."""
    one = dd.admission_policy("aligned-dra-driver", "aligned-dra", "aligned-dra-node-", "dra.aligned.dev")
    listed = dd.admission_policy("aligned-dra-driver", "aligned-dra", "aligned-dra-node-", ["dra.aligned.dev"])
    assert one == listed
    texts = [
        v.get("expression", "")
        for p in one
        if p["kind"] == "ValidatingAdmissionPolicy"
        for v in p["spec"]["validations"]
    ]
    assert any("object.spec.driver == 'dra.aligned.dev'" in t for t in texts)
    with pytest.raises(dd.DeployError, match="driver_name"):
        dd.admission_policy("a", "b", "c-", [])
    with pytest.raises(dd.DeployError, match="driver_name"):
        dd.admission_policy("a", "b", "c-", ["dra.aligned.dev", "Bad Name"])


# -- the reclaim watcher runs in the plugin that publishes GPUs ------------------------------------

EVICT = {"mode": "evict", "margin": 10, "interval": 1}


def reclaim_args(args):
    return [a for a in args if a.startswith("--reclaim")]


@pytest.mark.parametrize("reclaim", [None, {"mode": "off"}, {"mode": False}])
@pytest.mark.parametrize("settings", [DS, HOST, dict(DS, **SPLIT), dict(HOST, **SPLIT)])
def test_reclaim_off_leaves_every_plugin_as_it_was(settings, reclaim):
    on = dict(settings, reclaim=reclaim, extra_args=["--reclaim=evict", "--fractional-gpus=off"])
    assert di.instances(on) == di.instances(settings)
    for instance in di.instances(settings):
        assert di.instance_args(on, instance) == di.instance_args(settings, instance)
    assert di.objects(on) == di.objects(settings)


def test_split_only_the_gpu_plugin_runs_the_watcher():
    settings = dict(SPLIT, reclaim=EVICT)
    main, gpu = di.instances(settings)
    assert reclaim_args(di.instance_args(settings, main)) == []
    assert reclaim_args(di.instance_args(settings, gpu)) == [
        "--reclaim=evict",
        "--reclaim-margin=10",
        "--reclaim-interval=1",
    ]
    assert [di.runs_reclaim(i) for i in (main, gpu)] == [False, True]
    # one plugin for every kind runs it itself
    (one,) = di.instances({"reclaim": EVICT})
    assert reclaim_args(di.instance_args({"reclaim": EVICT}, one)) == reclaim_args(dd.driver_args({"reclaim": EVICT}))


@pytest.mark.parametrize("minor", ["1.34.0", "1.37.0"])
def test_the_split_daemonset_with_reclaim_gives_the_gpu_container_the_options_and_the_pod_host_pid(minor):
    objects = di.objects(dict(DS, **SPLIT, reclaim=EVICT))
    for obj in objects:
        kubernetes_validate.validate(obj, minor, strict=True)
    (daemonset,) = [o for o in objects if o["kind"] == "DaemonSet"]
    pod = daemonset["spec"]["template"]["spec"]
    main, gpu = pod["containers"]
    assert reclaim_args(main["args"]) == [] and len(reclaim_args(gpu["args"])) == 3
    assert pod["hostPID"] is True
    (role,) = [o for o in objects if o["kind"] == "ClusterRole"]
    assert {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]} in role["rules"]


@pytest.mark.parametrize(
    ("settings", "words"),
    [
        # the driver's --fractional-gpus=auto shares GPUs from 1.36 on
        ({"kubernetes_version": "1.35"}, "the site runs 1.35 (aligned_dra_kubernetes_version)"),
        ({"kubernetes_version": "1.34", "mode": "daemonset"}, "the site runs 1.34"),
        ({"extra_args": ["--fractional-gpus=off"]}, "--fractional-gpus=off (aligned_dra_driver_extra_args)"),
        ({"extra_args": ["--fractional-gpus", "off"], "kubernetes_version": "1.37"}, "--fractional-gpus=off"),
        # the last one wins, as on the driver's command line
        ({"extra_args": ["--fractional-gpus=on", "--fractional-gpus=off"]}, "--fractional-gpus=off"),
        ({"fractional_gpus": True, "extra_args": ["--fractional-gpus=off"]}, "--fractional-gpus=off"),
    ],
)
def test_reclaim_without_fractional_gpus_is_refused(settings, words):
    settings = dict(settings, reclaim={"mode": "evict"})
    problems = di.reclaim_problems(settings)
    assert [p[0] for p in problems] == ["aligned_dra_driver_reclaim.mode"], problems
    (line,) = di.problem_lines(problems)
    assert "reclaim needs fractional GPUs" in line and words in line and "evict any pod" in line, line
    with pytest.raises(dd.DeployError, match=r"aligned_dra_driver_reclaim\.mode"):
        di.instances(settings)


@pytest.mark.parametrize(
    "settings",
    [
        {"kubernetes_version": "1.36"},
        {"kubernetes_version": "1.37", "mode": "daemonset"},
        {},  # no minor known: the driver decides
        {"kubernetes_version": "1.35", "extra_args": ["--fractional-gpus=on"]},
        {"kubernetes_version": "1.35", "fractional_gpus": True, "mode": "daemonset"},
        # the DaemonSet takes no extra args: they neither turn the GPUs off nor set the watcher twice
        {"kubernetes_version": "1.36", "mode": "daemonset", "extra_args": ["--fractional-gpus=off", "--reclaim=off"]},
    ],
)
def test_reclaim_with_fractional_gpus_is_accepted(settings):
    settings = dict(settings, reclaim={"mode": "evict"})
    assert di.reclaim_problems(settings) == []
    assert reclaim_args(di.instance_args(settings)) == ["--reclaim=evict", "--reclaim-margin=5", "--reclaim-interval=2"]


def test_reclaim_set_twice_in_host_mode_is_refused():
    settings = {"reclaim": {"mode": "evict"}, "extra_args": ["--health-service", "--reclaim-interval=1"]}
    assert di.problem_lines(di.reclaim_problems(settings)) == [
        'aligned_dra_driver_extra_args = "--reclaim-interval=1": sets the reclaim watcher too: '
        "set it in aligned_dra_driver_reclaim only"
    ]
