# SPDX-License-Identifier: Apache-2.0
"""module_utils/controller/validation/validate.py: argument specs, unknown names, the checks across hosts and stages, the message."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.topology import fact as topology_fact
from ansible_collections.aligned.dra.plugins.module_utils.controller.validation import validate
from ansible_collections.aligned.dra.tests.support.sites.plan_inputs import PAIR_NODE_TOPOLOGY

REPO = Path(__file__).resolve().parents[6]
NAME = re.compile(r"\baligned_dra_[a-z0-9_]*[a-z0-9]\b")

SRIOV_TOPOLOGY = {
    "devices": [
        {
            "pci_address": "0000:01:00.0",
            "vendor_id": "0x15b3",
            "device_id": "0x1021",
            "netdevs": [{"name": "ens1f0"}],
            "sriov": {"totalvfs": 8, "numvfs": 0, "vfs": []},
        },
        {"pci_address": "0000:02:00.0", "vendor_id": "0x8086", "device_id": "0x1533", "netdevs": [{"name": "eno1"}]},
    ]
}


def run(settings: dict[str, dict], stages=validate.STAGES):
    return validate.validate(list(settings), lambda h: list(settings[h]), lambda h, n, d: settings[h].get(n, d), stages)


def reasons(problems) -> list[str]:
    return [f"{p.host} {p.variable} {p.reason}" for p in problems]


def test_every_name_the_roles_and_playbooks_use_is_known():
    """The known-name list cannot go stale: every aligned_dra_* name in roles/ and playbooks/ is in it."""
    used = set()
    for path in [*REPO.joinpath("roles").rglob("*.yml"), *REPO.joinpath("playbooks").rglob("*.yml")]:
        used |= set(NAME.findall(path.read_text()))
    assert used, "the scan found nothing"
    assert sorted(used - validate.known_names()) == []


def test_role_specs_are_read_from_the_collection_files():
    specs = validate.role_specs()
    assert set(specs) == {p.parent.parent.name for p in REPO.glob("roles/*/meta/argument_specs.yml")}
    assert specs["sriov"]["aligned_dra_sriov_pfs"]["type"] == "list"
    assert "aligned_dra_network_serial" in validate.known_names()


def test_a_valid_site_passes():
    problems, sites = run(
        {
            "n1": {"aligned_dra_site": "lab", "aligned_dra_sysfs_root": "/x/sys", "aligned_dra_network_serial": 2},
            "n2": {"aligned_dra_site": "lab", "aligned_dra_sysfs_root": "/y/sys"},
        }
    )
    assert problems == []
    assert sites == {"n1": "lab", "n2": "lab"}


def test_usage_that_cannot_work_is_refused_before_any_run_only_where_the_stage_runs():
    bad = {
        "n1": {
            "aligned_dra_site": "lab",
            "aligned_dra_usage": {"prometheus": "https://p", "window": "1h", "step": "7m"},
        }
    }
    problems, _sites = run(bad, ["utilization"])
    assert reasons(problems) == [
        "n1 aligned_dra_usage aligned_dra_usage: window 1h must be a whole number of steps of 7m"
    ]
    assert run(bad, ["claims"])[0] == []
    good = {"n1": {"aligned_dra_site": "lab", "aligned_dra_usage": {"files": ["u.om"], "window": "6h", "step": "30m"}}}
    assert run(good, ["utilization"])[0] == []


def test_argument_spec_errors_name_host_variable_and_value():
    problems = run({"n1": {"aligned_dra_drain_timeout": "soon", "aligned_dra_claims_write": "maybe"}})[0]
    found = {(p.host, p.variable, p.value) for p in problems}
    assert ("n1", "aligned_dra_drain_timeout", '"soon"') in found
    assert ("n1", "aligned_dra_claims_write", '"maybe"') in found
    assert any("int" in p.reason for p in problems if p.variable == "aligned_dra_drain_timeout")


def test_playbook_settings_have_specs():
    problems = run({"n1": {"aligned_dra_network_max_fail_percentage": "many"}})[0]
    assert [p.variable for p in problems] == ["aligned_dra_network_max_fail_percentage"]


def test_required_options_of_the_stages_run(tmp_path):
    roles = tmp_path / "roles" / "demo" / "meta"
    roles.mkdir(parents=True)
    (roles / "argument_specs.yml").write_text(
        "argument_specs:\n  main:\n    options:\n      aligned_dra_demo:\n        type: str\n        required: true\n"
    )
    stages = dict(validate.STAGE_ROLES)
    try:
        validate.STAGE_ROLES["probe"] = ("demo",)
        missing = validate.check_host_settings("n1", {}, ["probe"], str(tmp_path))
        ignored = validate.check_host_settings("n1", {}, ["report"], str(tmp_path))
    finally:
        validate.STAGE_ROLES.clear()
        validate.STAGE_ROLES.update(stages)
    assert [(p.variable, p.value, p.reason) for p in missing] == [
        ("aligned_dra_demo", "(not set)", "required by the demo role")
    ]
    assert ignored == []


def test_unknown_name_suggests_the_closest_known_one():
    problems = run({"n1": {"aligned_dra_sysfs_rot": "/x"}})[0]
    assert [p.line() for p in problems] == [
        'n1: aligned_dra_sysfs_rot = "/x": unknown variable; did you mean aligned_dra_sysfs_root?'
    ]


@pytest.mark.parametrize(
    ("typo", "meant"),
    [
        ("aligned_dra_sysfs_rot", "aligned_dra_sysfs_root"),
        ("aligned_dra_kubernetes_versoin", "aligned_dra_kubernetes_version"),
        ("aligned_dra_sriov_pf", "aligned_dra_sriov_pfs"),
        ("aligned_dra_network_seriall", "aligned_dra_network_serial"),
        ("aligned_dra_fixture", None),
    ],
)
def test_suggestions(typo, meant):
    assert validate.suggestion(typo, validate.known_names()) == meant


def test_unknown_name_without_a_close_one_points_at_the_allowed_list():
    problems = run({"a": {"aligned_dra_zzzz_qqqq": 1}})[0]
    assert "aligned_dra_allowed_extra_vars" in problems[0].reason


def test_allowed_extra_vars_let_names_and_patterns_through():
    problems = run(
        {
            "n1": {
                "aligned_dra_allowed_extra_vars": ["aligned_dra_sysfs_rot", "aligned_dra_mine_*"],
                "aligned_dra_sysfs_rot": "/x",
                "aligned_dra_mine_a": 1,
                "aligned_dra_other": 2,
            }
        }
    )[0]
    assert [p.variable for p in problems] == ["aligned_dra_other"]


def test_site_name_names_a_directory():
    problems = run({"a": {"aligned_dra_site": "east/../etc"}}, ["probe"])[0]
    assert [(p.variable, p.value) for p in problems] == [("aligned_dra_site", '"east/../etc"')]


def test_one_kubernetes_minor_per_site():
    problems = run(
        {
            "a": {"aligned_dra_site": "lab", "aligned_dra_kubernetes_version": "1.36"},
            "b": {"aligned_dra_site": "lab"},
            "c": {"aligned_dra_site": "lab", "aligned_dra_kubernetes_version": "1.35"},
            "d": {"aligned_dra_site": "other", "aligned_dra_kubernetes_version": "1.35"},
        }
    )[0]
    assert [(p.host, p.variable) for p in problems] == [("c", "aligned_dra_kubernetes_version")]
    assert 'site lab has one Kubernetes minor for all its hosts; its first host a has "1.36"' in problems[0].reason


def test_unsupported_minor_is_refused():
    problems = run({"a": {"aligned_dra_kubernetes_version": "1.20"}})[0]
    assert {p.variable for p in problems} == {"aligned_dra_kubernetes_version"}
    assert any("1.34, 1.35, 1.36, 1.37" in p.reason for p in problems)


def test_claims_settings_that_do_not_render():
    problems = run({"a": {"aligned_dra_claims": {"required": ["no-such-template"]}}}, ["claims"])[0]
    assert [p.variable for p in problems] == ["aligned_dra_claims"]
    assert "'no-such-template' is not rendered" in problems[0].reason


@pytest.mark.parametrize(
    ("host_vars", "reason"),
    [
        ({"aligned_dra_kubernetes_version": "1.35"}, "DRAExtendedResource, which is off on Kubernetes 1.35"),
        ({"aligned_dra_feature_gates": {"DRAExtendedResource": False}}, "which is off on Kubernetes 1.36"),
        ({"aligned_dra_claims": {"extended_resources": {"gpu": "gpu"}}}, "'gpu' is not an extended resource name"),
        (
            {"aligned_dra_claims": {"extended_resources": {"gpu": "x.io/gpu", "vf": "x.io/gpu"}}},
            "'x.io/gpu' is already the extended resource name of class 'gpu'",
        ),
    ],
)
def test_extended_resource_names_the_site_cannot_serve(host_vars, reason):
    settings = {"aligned_dra_claims": {"extended_resources": {"gpu": "aligned.dev/gpu"}}, **host_vars}
    problems = run({"a": settings}, ["claims"])[0]
    assert [(p.host, p.variable) for p in problems] == [("a", "aligned_dra_claims")]
    assert problems[0].value == validate.show(settings["aligned_dra_claims"])
    assert problems[0].reason.startswith("site default: aligned_dra_claims.extended_resources.")
    assert reason in problems[0].reason


def test_team_quota_on_a_class_the_site_does_not_render():
    teams = {"teams": [{"name": "ml", "quotas": {"aligned-tpu": 4}}]}
    problems = run({"a": {"aligned_dra_site": "lab", "aligned_dra_teams": teams}}, ["teams"])[0]
    assert [(p.host, p.variable) for p in problems] == [("a", "aligned_dra_teams")]
    assert "'aligned-tpu' is not a DeviceClass of this site" in problems[0].reason
    # The claims stage alone does not read the teams.
    assert run({"a": {"aligned_dra_teams": teams}}, ["claims"])[0] == []


def test_a_team_setting_kueue_cannot_count_is_a_problem_of_the_teams_variable():
    teams = {"engine": "kueue", "teams": [{"name": "mon", "admin_access": True, "quotas": {"gpu": 1}}]}
    problems = run({"a": {"aligned_dra_site": "lab", "aligned_dra_teams": teams}}, ["teams"])[0]
    assert [(p.host, p.variable) for p in problems] == [("a", "aligned_dra_teams")]
    assert "aligned_dra_teams.teams[mon]" in problems[0].reason and "admin" in problems[0].reason


def test_on_a_kai_site_what_kai_would_miscount_is_refused_before_any_change():
    # the collection's one driver publishes GPUs and NICs under dra.aligned.dev: KAI would count no GPU
    teams = {"engine": "kai", "teams": [{"name": "ml", "quotas": {"gpu": 1}}]}
    problems = run({"a": {"aligned_dra_site": "lab", "aligned_dra_teams": teams}}, ["teams"])[0]
    assert [(p.host, p.variable) for p in problems] == [("a", "aligned_dra_teams")]
    assert "gpu_driver dra.aligned.dev: the name lacks 'gpu', so KAI counts no GPU" in problems[0].reason
    nvidia = {"drivers": ["gpu.nvidia.com", "dra.net"], "gpu_driver": "gpu.nvidia.com", "nic_driver": "dra.net"}
    teams = {"engine": "kai", "teams": [{"name": "ml", "quotas": {"nvidia-gpu": 1}, "over_quota_weight": -1}]}
    problems = run({"a": {"aligned_dra_teams": teams, "aligned_dra_claims": nvidia}}, ["teams"])[0]
    assert "teams[ml].over_quota_weight must be a number from 0" in problems[0].reason
    teams["teams"][0]["over_quota_weight"] = 2
    assert run({"a": {"aligned_dra_teams": teams, "aligned_dra_claims": nvidia}}, ["teams"])[0] == []


def test_a_site_setting_shared_by_the_site_is_said_once_with_the_host_count():
    teams = {"teams": [{"name": "ml", "quotas": {"aligned-tpu": 4}}]}
    hosts = {name: {"aligned_dra_site": "lab", "aligned_dra_teams": teams} for name in ("a", "b", "c")}
    problems, sites = run(hosts, ["teams"])
    assert [p.host for p in problems] == ["a", "b", "c"]
    lines = validate.report(problems, sites).splitlines()
    assert len(lines) == 2 and lines[1].startswith("- site lab, 3 hosts (a, b, c): aligned_dra_teams = ")


def test_driver_stage_alone_does_not_render_the_claims():
    broken = {"a": {"aligned_dra_claims": {"required": ["no-such-template"]}}}
    assert run(broken, ["driver"])[0] == []


def test_team_template_that_is_not_rendered():
    teams = {"teams": [{"name": "ml", "templates": ["nope"]}]}
    problems = run({"a": {"aligned_dra_teams": teams}}, ["teams"])[0]
    assert "'nope' is not rendered for this site" in problems[0].reason


def test_sriov_vf_count_above_the_probed_total():
    pfs = [{"netdev": "ens1f0", "numvfs": 16}]
    problems = run({"a": {"aligned_dra_sriov_pfs": pfs, "aligned_dra_topology": SRIOV_TOPOLOGY}}, ["network"])[0]
    assert [p.line() for p in problems] == [
        'a: aligned_dra_sriov_pfs[0] = {"netdev": "ens1f0", "numvfs": 16}: '
        "pfs[0].numvfs: 16 is above sriov_totalvfs 8 of 0000:01:00.0"
    ]
    fits = [{"netdev": "ens1f0", "numvfs": 8}]
    assert run({"a": {"aligned_dra_sriov_pfs": fits, "aligned_dra_topology": SRIOV_TOPOLOGY}}, ["network"])[0] == []


def test_the_device_checks_read_the_topology_behind_the_probes_slim_fact(tmp_path):
    """The probe's fact names the file of the whole topology: the SR-IOV and driver checks read it."""
    path = tmp_path / "a.json"
    topology_fact.keep(str(path), SRIOV_TOPOLOGY)
    fact = topology_fact.fact_of(SRIOV_TOPOLOGY, str(path))
    pfs = [{"netdev": "ens1f0", "numvfs": 16}]
    problems = run({"a": {"aligned_dra_sriov_pfs": pfs, "aligned_dra_topology": fact}}, ["network"])[0]
    assert reasons(problems) == [
        "a aligned_dra_sriov_pfs[0] pfs[0].numvfs: 16 is above sriov_totalvfs 8 of 0000:01:00.0"
    ]
    assert run({"a": {"aligned_dra_topology": fact}}, ["driver"])[0] == []
    # the file went with an earlier run (a fact cache kept the fact): said, on the fact
    path.unlink()
    for stages, extra in ((["network"], {"aligned_dra_sriov_pfs": pfs}), (["driver"], {})):
        (problem,) = run({"a": {"aligned_dra_topology": fact, **extra}}, stages)[0]
        assert problem.variable == "aligned_dra_topology"
        assert "the file lives as long as the run that probed the node" in problem.reason


def test_sriov_names_a_nic_the_node_does_not_have_or_without_sriov():
    pfs = [{"netdev": "ens9"}, {"netdev": "eno1", "numvfs": 2}, {"netdev": "ens7", "missing": "skip"}]
    problems = run({"a": {"aligned_dra_sriov_pfs": pfs, "aligned_dra_topology": SRIOV_TOPOLOGY}}, ["network"])[0]
    assert reasons(problems) == [
        "a aligned_dra_sriov_pfs[0] pfs[0].netdev: no network interface ens9 on this node",
        "a aligned_dra_sriov_pfs[1] pfs[1].numvfs: 0000:02:00.0 has no SR-IOV capability (no sriov_totalvfs); "
        "pfs[1].netdev selects it",
    ]


def test_sriov_shape_is_checked_without_a_probe():
    problems = run({"a": {"aligned_dra_sriov_pfs": [{"netdev": "ens1f0", "colour": "red"}]}}, ["network"])[0]
    assert [p.variable for p in problems] == ["aligned_dra_sriov_pfs"]
    assert "aligned_dra_sriov_pfs.colour" in problems[0].reason


def test_driver_device_options_and_gates():
    bad = {"a": {"aligned_dra_device_options": {"gpus": "yes"}, "aligned_dra_topology": PAIR_NODE_TOPOLOGY}}
    problems = run(bad, ["driver"])[0]
    assert reasons(problems) == ["a aligned_dra_device_options device_options.gpus must be a boolean"]
    good = {"a": {"aligned_dra_topology": PAIR_NODE_TOPOLOGY}}
    assert run(good, ["driver"])[0] == []


def test_driver_device_that_needs_a_gate_the_minor_leaves_off(monkeypatch):
    def with_taints(topology, options=None):
        return [{"name": "gpu-0", "attributes": {}, "taints": [{"key": "k", "effect": "NoSchedule"}]}]

    monkeypatch.setattr(validate.dra, "devices_from_topology", with_taints)
    problems = validate.check_driver("a", {}, PAIR_NODE_TOPOLOGY, "1.35", {})
    assert [p.reason for p in problems] == [
        "spec.devices[0].taints needs feature gate DRADeviceTaints, which is off on Kubernetes 1.35"
    ]
    assert validate.check_driver("a", {}, PAIR_NODE_TOPOLOGY, "1.35", {"DRADeviceTaints": True}) == []


def test_list_attributes_without_the_gate_are_refused_before_any_probe():
    # the driver stage validates before it probes: no topology, still refused
    for topology in (None, PAIR_NODE_TOPOLOGY):
        (problem,) = validate.check_driver("a", {"list_attributes": True}, topology, "1.36", {})
        assert problem.variable == "aligned_dra_device_options"
        assert problem.reason.startswith(
            "list_attributes: list-typed attributes need feature gate DRAListTypeAttributes"
        )
        assert "off on Kubernetes 1.36" in problem.reason
    assert validate.check_driver("a", {"list_attributes": True}, None, "1.36", {"DRAListTypeAttributes": True}) == []


# The demo's driver settings (inventories/demo/group_vars/all.yml): DaemonSet mode, the default base image (Python 3.12).
DEMO_DRIVER = {
    "aligned_dra_site": "ai-west",
    "aligned_dra_driver_mode": "daemonset",
    "aligned_dra_driver_image": "localhost/aligned-dra-driver:0.1.0",
}


def test_driver_image_python_the_base_image_does_not_have_is_refused_naming_only_that_rule():
    hosts = {name: dict(DEMO_DRIVER, aligned_dra_driver_image_python="3.11") for name in ("n1", "n2")}
    problems, sites = run(hosts, ["driver"])
    reason = (
        "the base image docker.io/library/python:3.12-slim (aligned_dra_driver_base_image) is Python 3.12: "
        "set '3.12', or a python:3.11 base image"
    )
    assert [(p.host, p.variable, p.value, p.reason) for p in problems] == [
        (host, "aligned_dra_driver_image_python", '"3.11"', reason) for host in ("n1", "n2")
    ]
    message = validate.report(problems, sites)
    assert message.splitlines() == [
        "aligned.dra validation: 1 problem in the inventory; nothing was changed.",
        f'- site ai-west, 2 hosts (n1, n2): aligned_dra_driver_image_python = "3.11": {reason}',
    ]
    # the rules that hold are not said
    assert "glibc" not in message and "3.10 or newer" not in message


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({}, []),
        # the two agree: any CPython the driver supports
        ({"aligned_dra_driver_base_image": "python:3.13-slim", "aligned_dra_driver_image_python": "3.13"}, []),
        # not a python:3.X image: the setting is taken as said
        ({"aligned_dra_driver_base_image": "registry.local/ubi9:9.4", "aligned_dra_driver_image_python": "3.11"}, []),
        ({"aligned_dra_driver_image_glibc": "2.5"}, [("aligned_dra_driver_image_glibc", "2.17 or newer")]),
        (
            {"aligned_dra_driver_base_image": "python:3.9-slim", "aligned_dra_driver_image_python": "3.9"},
            [("aligned_dra_driver_image_python", "CPython version 3.10 or newer")],
        ),
        # a YAML number: 3.10 reads as 3.1, older than the driver needs and not the base image's 3.12
        (
            {"aligned_dra_driver_image_python": 3.1},
            [
                ("aligned_dra_driver_image_python", "CPython version 3.10 or newer written as a string"),
                ("aligned_dra_driver_image_python", "is Python 3.12"),
            ],
        ),
        # nothing is built here: the image's platform is not checked
        ({"aligned_dra_driver_mode": "host", "aligned_dra_driver_image_python": "3.1"}, []),
        ({"aligned_dra_driver_image_context": False, "aligned_dra_driver_image_python": "3.1"}, []),
        ({"aligned_dra_driver_state": "absent", "aligned_dra_driver_image_python": "3.1"}, []),
    ],
)
def test_driver_image_platform_rules(settings, expected):
    problems = run({"a": {**DEMO_DRIVER, **settings}}, ["driver"])[0]
    found = sorted((p.variable, p.reason) for p in problems)
    assert len(found) == len(expected), found
    for (variable, reason), (want_variable, want_text) in zip(found, sorted(expected), strict=True):
        assert variable == want_variable and want_text in reason, found


def test_driver_image_platform_is_checked_only_for_the_driver_stage():
    hosts = {"a": dict(DEMO_DRIVER, aligned_dra_driver_image_python="3.11")}
    assert run(hosts, ["probe", "claims", "report"])[0] == []
    assert [p.variable for p in run(hosts)[0]] == ["aligned_dra_driver_image_python"]


def test_a_value_that_cannot_be_templated_is_a_problem():
    def setting(host, name, default):
        raise ValueError("'nope' is undefined")

    problems = validate.validate(["a"], lambda h: ["aligned_dra_site"], setting, ["probe"])[0]
    assert problems[0].value == "(not templated)"
    assert "'nope' is undefined" in problems[0].reason


def test_report_says_a_shared_mistake_once_per_site_with_the_host_count():
    hosts = {f"n{i:04}": {"aligned_dra_site": "big", "aligned_dra_sysfs_rot": "/x"} for i in range(1000)}
    hosts["m1"] = {"aligned_dra_site": "small", "aligned_dra_sysfs_rot": "/x"}
    problems, sites = run(hosts, ["probe"])
    assert len(problems) == 1001
    message = validate.report(problems, sites)
    assert message.splitlines() == [
        "aligned.dra validation: 2 problems in the inventory; nothing was changed.",
        '- m1: aligned_dra_sysfs_rot = "/x": unknown variable; did you mean aligned_dra_sysfs_root?',
        '- site big, 1000 hosts (n0000, n0001, n0002 and 997 more): aligned_dra_sysfs_rot = "/x": '
        "unknown variable; did you mean aligned_dra_sysfs_root?",
    ]


def test_report_is_sorted_and_deduplicated():
    one = validate.Problem("b", "aligned_dra_x", "1", "why")
    two = validate.Problem("a", "aligned_dra_y", "2", "because")
    assert validate.report([one, two, one]).splitlines()[1:] == [
        "- a: aligned_dra_y = 2: because",
        "- b: aligned_dra_x = 1: why",
    ]
    assert validate.report([]) == ""
    error = validate.ValidationError([one, one])
    assert error.problems == [one] and "1 problem in" in str(error)


def test_long_values_are_cut():
    assert validate.show("x" * 500).endswith("...") and len(validate.show("x" * 500)) == 80


@pytest.mark.parametrize("stage", validate.STAGES)
def test_every_stage_validates_alone(stage):
    assert run({"a": {"aligned_dra_site": "lab"}}, [stage])[0] == []


# -- the driver split by kind (aligned_dra_device_options.split_gpu_driver) ---------------------------

GPU_IN_NAME = "the name must contain 'gpu': KAI Scheduler counts the devices of drivers whose name does"
KAI_TEAMS = {"engine": "kai", "teams": [{"name": "ml", "quotas": {"gpu": 1, "nic": 1}}]}


def test_a_kai_site_whose_driver_runs_split_by_kind_passes():
    # the GPUs under gpu.aligned.dev: KAI counts them; the NICs stay under dra.aligned.dev
    split = {"aligned_dra_teams": KAI_TEAMS, "aligned_dra_device_options": {"split_gpu_driver": "gpu.aligned.dev"}}
    hosts = {name: {"aligned_dra_site": "lab", "aligned_dra_topology": PAIR_NODE_TOPOLOGY, **split} for name in "ab"}
    assert run(hosts)[0] == []
    # the same site on one driver is refused as before
    one = {name: {k: v for k, v in host.items() if k != "aligned_dra_device_options"} for name, host in hosts.items()}
    assert any("the name lacks 'gpu', so KAI counts no GPU" in p.reason for p in run(one, ["teams"])[0])


@pytest.mark.parametrize("stage", ["claims", "teams", "placement", "utilization", "driver"])
@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("dra.aligned.dev", GPU_IN_NAME),
        ("accel.aligned.dev", GPU_IN_NAME),
        ("GPU.aligned.dev", "a driver name must be a DNS subdomain of at most 63 characters"),
        ("gpu." + "x" * 60, "a driver name must be a DNS subdomain of at most 63 characters"),
    ],
)
def test_a_bad_split_gpu_driver_is_refused_naming_the_setting(stage, name, reason):
    options = {"split_gpu_driver": name}
    host = {"aligned_dra_device_options": options, "aligned_dra_topology": PAIR_NODE_TOPOLOGY}
    problems = run({"a": host}, [stage])[0]
    assert [(p.host, p.variable, p.value) for p in problems] == [
        ("a", "aligned_dra_device_options", validate.show(options))
    ]
    assert problems[0].reason == f"device_options.split_gpu_driver {name!r}: {reason}"


def test_a_site_runs_its_driver_split_on_every_host_or_on_none():
    split = {"split_gpu_driver": "gpu.aligned.dev"}
    hosts = {
        "a": {"aligned_dra_site": "lab", "aligned_dra_device_options": split},
        "b": {"aligned_dra_site": "lab", "aligned_dra_device_options": {"exclude": ["eno*"]}},
        "c": {"aligned_dra_site": "lab", "aligned_dra_device_options": {**split, "exclude": ["eno*"]}},
    }
    problems = run(hosts, ["claims"])[0]
    assert reasons(problems) == [
        "b aligned_dra_device_options site lab runs its driver split by kind on every host or on none: "
        "split_gpu_driver is 'gpu.aligned.dev' on its first host a, None here"
    ]
    # the probe alone renders nothing that depends on it
    assert run(hosts, ["probe"])[0] == []


def test_an_empty_split_gpu_driver_is_one_driver_as_unset():
    hosts = {
        "a": {"aligned_dra_site": "lab", "aligned_dra_device_options": {"split_gpu_driver": ""}},
        "b": {"aligned_dra_site": "lab", "aligned_dra_device_options": {"split_gpu_driver": None}},
        "c": {"aligned_dra_site": "lab"},
    }
    assert run(hosts, ["claims", "driver"])[0] == []
    (problem,) = run({"a": {"aligned_dra_device_options": {"split_gpu_driver": False}}}, ["claims"])[0]
    assert problem.reason.startswith("device_options.split_gpu_driver False: a driver name must be a DNS subdomain")


# -- burstable fractional GPUs (aligned_dra_fractional_burst) ---------------------------------------


def test_a_bad_burst_factor_is_refused_naming_the_setting_and_a_good_one_passes():
    site = {"aligned_dra_site": "lab", "aligned_dra_kubernetes_version": "1.36"}
    good = {"a": dict(site, aligned_dra_fractional_burst={"memory": 2.0})}
    assert run(good, ["claims"])[0] == []
    bad = {"a": dict(site, aligned_dra_fractional_burst={"memory": 0.5})}
    (problem,) = run(bad, ["claims"])[0]
    assert problem.variable == "aligned_dra_fractional_burst" and "site lab" in problem.reason
