# SPDX-License-Identifier: Apache-2.0
"""Shape checks of the controller-side modules' free-form inputs: every refusal names the path."""

from __future__ import annotations

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.inputs import site as inputs

SLICE = {
    "kind": "ResourceSlice",
    "metadata": {"name": "n1-dra"},
    "spec": {
        "nodeName": "n1",
        "driver": "dra.aligned.dev",
        "pool": {"name": "n1", "generation": 1},
        "devices": [{"name": "gpu-0", "attributes": {"kind": {"string": "gpu"}}, "capacity": {}}],
    },
}
CLAIM = {
    "metadata": {"name": "c", "namespace": "ns"},
    "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]}},
    "status": {"allocation": {"devices": {"results": [{"driver": "d", "pool": "p", "device": "g", "request": "r"}]}}},
}
CLASS = {"kind": "DeviceClass", "metadata": {"name": "gpu"}, "spec": {"selectors": [{"cel": {"expression": "true"}}]}}


def test_well_formed_inputs_pass():
    inputs.check_slices([SLICE], "slices")
    inputs.check_claims([CLAIM], "claims")
    inputs.check_classes([CLASS], "classes")
    inputs.check_objects([CLASS, dict(CLAIM, kind="ResourceClaim")], "objects")
    inputs.check_topologies({"n1": {"devices": [{"pci_address": "0000:01:00.0", "kind": "gpu"}], "links": {}}}, "t")
    inputs.check_plan({"templates": [{"aligned_level": "PIX"}], "classes": {"gpu": {"devices": 8}}}, "plan_file")


@pytest.mark.parametrize(
    ("check", "value", "message"),
    [
        (inputs.check_slices, [5], "slices[0]: must be a mapping (got int)"),
        (inputs.check_slices, [{"spec": {"devices": [{"name": ""}]}}], "slices[0].spec.devices[0].name: must be"),
        (inputs.check_slices, [{"spec": {"pool": {"generation": "1"}}}], "slices[0].spec.pool.generation: must be"),
        (inputs.check_claims, [{"metadata": {}}], "claims[0].metadata.name: must be a non-empty string"),
        (inputs.check_claims, [dict(CLAIM, status={"allocation": 5})], "claims[0].status.allocation: must be"),
        (inputs.check_classes, [{"metadata": {"name": "x"}, "spec": {"selectors": [{"cel": {"expression": 5}}]}}],
         "classes[0].spec.selectors[0].cel.expression: must be a string"),
        (inputs.check_objects, [{"kind": "ResourceClaimTemplate", "metadata": {"name": "t"}, "spec": {"spec": 5}}],
         "objects[0].spec.spec: must be a mapping"),
        (inputs.check_topologies, {"n1": {"devices": [{"pci_address": 5, "kind": "gpu"}]}},
         "topologies.n1.devices[0].pci_address: must be a string"),
        (inputs.check_topologies, {"n1": {"links": {"g": 5}}}, "topologies.n1.links.g: must be a mapping"),
        (inputs.check_plan, {"classes": {"gpu": {"devices": -1}}}, "plan.classes.gpu.devices: must be a device count"),
    ],
)  # fmt: skip
def test_wrong_shapes_name_the_path(check, value, message):
    field = {inputs.check_topologies: "topologies", inputs.check_plan: "plan"}.get(check) or message.split("[")[0]
    with pytest.raises(inputs.InputError) as caught:
        check(value, field)
    assert str(caught.value).startswith(message)


@pytest.mark.parametrize(
    ("text", "name", "message"),
    [
        ("kind: ResourceSliceList\nitems: 5\n", "s.yaml", "'items' of a ResourceSliceList must be a list"),
        ("just a string\n", "s.yaml", "holds str"),
        ("{", "s.json", "cannot read"),
        ("a: [\n", "s.yaml", "cannot read"),
    ],
)
def test_load_documents_refuses_what_is_no_object(tmp_path, text, name, message):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(inputs.InputError) as caught:
        inputs.load_documents(str(path), "slice_files")
    assert str(caught.value).startswith("slice_files: ") and message in str(caught.value)


def test_load_documents_reads_lists_and_documents(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("kind: ResourceSliceList\nitems: [{kind: ResourceSlice}]\n---\n[{kind: A}]\n---\nkind: B\n")
    assert [o["kind"] for o in inputs.load_documents(str(path), "f")] == ["ResourceSlice", "A", "B"]


def test_kubernetes_node_name_is_the_driver_node_name_else_the_host():
    assert inputs.kubernetes_node_name("a", {"aligned_dra_driver_node_name": "k8s-a"}) == "k8s-a"
    assert inputs.kubernetes_node_name("a", {"aligned_dra_driver_node_name": ""}) == "a"


def test_a_host_without_a_site_is_in_the_default_site():
    assert inputs.site_of({"aligned_dra_site": "lab-east"}) == "lab-east"
    assert inputs.site_of({}) == inputs.site_of({"aligned_dra_site": None}) == "default"
    assert inputs.site_of({"aligned_dra_site": ""}) == inputs.DEFAULT_SITE


# -- a site's settings, read once -------------------------------------------------------------------

FIRST = {"aligned_dra_claims": {"gpu": True}, "aligned_dra_teams": None, "aligned_dra_jobs": []}
ROLE = {"aligned_dra_claims": {}, "aligned_dra_teams": {"default": True}, "aligned_dra_jobs": [{"name": "j"}]}
ROLE["aligned_dra_kubernetes_version"] = "1.36"


def test_a_site_setting_is_the_first_hosts_even_null_or_empty():
    names = ["aligned_dra_claims", "aligned_dra_teams", "aligned_dra_jobs"]
    settings = inputs.read_site_settings(names, "gpu-01", FIRST, ROLE)
    assert settings == {"aligned_dra_claims": {"gpu": True}, "aligned_dra_teams": None, "aligned_dra_jobs": []}
    assert list(settings) == names


def test_a_setting_the_first_host_lacks_is_the_callers_default_else_its_own():
    settings = inputs.read_site_settings(
        ["aligned_dra_kubernetes_version", "aligned_dra_placement_levels", "aligned_dra_utilization_measured"],
        "gpu-01",
        FIRST,
        {**ROLE, "aligned_dra_placement_levels": [{"name": "rack"}]},
        defaults={"aligned_dra_placement_levels": [], "aligned_dra_utilization_measured": []},
    )
    # the given default wins over the caller's own value, as `| default([])` ignores the play's variable
    assert settings == {
        "aligned_dra_kubernetes_version": "1.36",
        "aligned_dra_placement_levels": [],
        "aligned_dra_utilization_measured": [],
    }
    kept = inputs.read_site_settings(["aligned_dra_claims"], "gpu-01", FIRST, ROLE, {"aligned_dra_claims": {}})
    assert kept == {"aligned_dra_claims": {"gpu": True}}


def test_only_what_is_asked_is_read_and_the_callers_value_only_where_the_host_has_none():
    read = []

    class Reads(dict):
        def __getitem__(self, name):
            read.append((self is role, name))
            return super().__getitem__(name)

    role = Reads(ROLE)
    inputs.read_site_settings(["aligned_dra_teams", "aligned_dra_kubernetes_version"], "gpu-01", Reads(FIRST), role)
    assert read == [(False, "aligned_dra_teams"), (True, "aligned_dra_kubernetes_version")]


# the task runs for e1, of another site, whose group_vars set the claims; the site's first host w1 does not
E1_OWN = {"aligned_dra_claims": {"east": 1}, "aligned_dra_kubernetes_version": "1.36"}


def test_the_value_of_the_host_the_task_runs_for_is_never_taken_for_a_site_it_is_not_of():
    values = {**ROLE, **E1_OWN}
    own = inputs.own_names(["aligned_dra_claims", "aligned_dra_teams"], values, E1_OWN)
    assert own == {"aligned_dra_claims"}
    in_role = inputs.Caller(values, host="e1", own=own, role_defaults=ROLE)
    names = ["aligned_dra_claims", "aligned_dra_teams"]
    # in a role: the role's default, not e1's; what is not e1's (the role's or play's value) stands
    assert inputs.read_site_settings(names, "w1", {}, in_role) == {
        "aligned_dra_claims": {},
        "aligned_dra_teams": {"default": True},
    }
    # a given default still comes first; the first host's value before all
    assert inputs.read_site_settings(names, "w1", {}, in_role, {"aligned_dra_claims": []})["aligned_dra_claims"] == []
    assert inputs.read_site_settings(names, "w1", FIRST, in_role)["aligned_dra_claims"] == {"gpu": True}
    # in a playbook: refused by name, unless e1 is of the site
    in_play = inputs.Caller(values, host="e1", own=own)
    with pytest.raises(inputs.SiteSettingError) as caught:
        inputs.read_site_settings(names, "w1", {}, in_play)
    assert str(caught.value).startswith(
        "site settings: aligned_dra_claims is not set on w1 (the site's first host) and has no default here; "
        "the value here is e1's own (its inventory or facts), not the site's: set aligned_dra_claims for the site"
    )
    assert "or pass defaults=" in str(caught.value)
    of_site = inputs.Caller(values, host="e1", own=own, in_site=True)
    assert inputs.read_site_settings(names, "w1", {}, of_site)["aligned_dra_claims"] == {"east": 1}


def test_a_role_without_a_default_refuses_the_hosts_value_and_a_play_value_unlike_the_hosts_stands():
    values = {**E1_OWN, "aligned_dra_kubernetes_version": "1.34"}  # the play's vars win over e1's inventory
    own = inputs.own_names(["aligned_dra_claims", "aligned_dra_kubernetes_version"], values, E1_OWN)
    assert own == {"aligned_dra_claims"}
    caller = inputs.Caller(values, host="e1", own=own, in_site=True, role_defaults={})
    assert inputs.read_site_settings(["aligned_dra_kubernetes_version"], "w1", {}, caller) == {
        "aligned_dra_kubernetes_version": "1.34"
    }
    with pytest.raises(inputs.SiteSettingError, match="aligned_dra_claims is not set on w1"):
        inputs.read_site_settings(["aligned_dra_claims"], "w1", {}, caller)


@pytest.mark.parametrize(
    ("names", "defaults", "message"),
    [
        (
            ["aligned_dra_claims", "aligned_dra_claim"],
            None,
            "unknown setting 'aligned_dra_claim' (known: aligned_dra_claims,",
        ),
        (["aligned_dra_site"], None, "unknown setting 'aligned_dra_site'"),
        ("aligned_dra_claims", None, "names must be a list of setting names"),
        (["aligned_dra_teams", "aligned_dra_teams"], None, "aligned_dra_teams asked more than once"),
        (["aligned_dra_teams"], {"aligned_dra_jobs": []}, "a default for aligned_dra_jobs, which is not asked for"),
        (
            ["aligned_dra_rails"],
            None,
            "aligned_dra_rails is set neither on gpu-01 (the site's first host) nor here",
        ),
    ],
)
def test_an_unknown_or_unset_setting_is_refused_by_name(names, defaults, message):
    with pytest.raises(inputs.SiteSettingError) as caught:
        inputs.read_site_settings(names, "gpu-01", FIRST, ROLE, defaults)
    assert message in str(caught.value)


def test_the_known_names_are_the_roles_settings_and_one_fact():
    known = inputs.SITE_SETTINGS + inputs.RUN_FACTS
    assert len(set(known)) == len(known) and all(name.startswith("aligned_dra_") for name in known)
    assert inputs.SITE_VARIABLE not in known and inputs.NODE_NAME_VARIABLE not in known
