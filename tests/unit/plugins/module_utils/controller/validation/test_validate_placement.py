# SPDX-License-Identifier: Apache-2.0
"""The validation stage's placement checks (controller/validation/validate_placement.py), through validate.validate."""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.validation import validate

LEVELS = [{"name": "block", "label": "aligned.dev/block"}, {"name": "rack", "label": "aligned.dev/rack"}]
KUEUE = {"engine": "kueue", "teams": [{"name": "vision", "quotas": {"aligned-gpu": 2}}]}
JOB = {"name": "train", "workers": 4, "template": "gpu-nic-pair-1", "placement": {"level": "rack"}}


def host(block: str | None, rack: str | None, **more: object) -> dict:
    placement = {k: v for k, v in (("block", block), ("rack", rack)) if v is not None}
    return {
        "aligned_dra_site": "lab",
        "aligned_dra_placement_levels": LEVELS,
        "aligned_dra_placement": placement,
        **more,
    }


def lines(settings: dict[str, dict], stages=("placement",)) -> list[str]:
    problems, sites = validate.validate(
        list(settings), lambda h: list(settings[h]), lambda h, n, d: settings[h].get(n, d), stages
    )
    return validate.report(problems, sites).splitlines()[1:]


def test_the_stage_and_the_names_are_known():
    assert "placement" in validate.STAGES
    assert {"aligned_dra_placement_levels", "aligned_dra_placement", "aligned_dra_jobs"} <= validate.known_names()


def test_a_good_site_with_levels_and_jobs_passes():
    site = {f"n{i}": host(f"b{i // 4}", f"r{i // 2}", aligned_dra_jobs=[JOB]) for i in range(8)}
    assert lines(site) == []
    assert lines(site, validate.STAGES) == []


def test_a_host_without_a_level_and_a_level_the_site_does_not_have():
    site = {
        "a": host("b1", "r1"),
        "b": host("b1", None),
        "c": host("b1", None),
        "d": host("b1", None, aligned_dra_placement={"block": "b1", "rak": "r1"}),
    }
    assert lines(site) == [
        "- d: aligned_dra_placement.rak = \"r1\": the site declares no level 'rak'; did you mean rack? "
        "(levels: block, rack)",
        "- site lab, 3 hosts (b, c, d): aligned_dra_placement.rack = (not set): every host needs a domain at "
        "every level (levels: block, rack)",
    ]


def test_a_rack_in_two_blocks():
    site = {"a": host("b1", "r7"), "b": host("b2", "r7"), "c": host("b2", "r8")}
    assert lines(site) == [
        '- site lab, 2 hosts (a, b): aligned_dra_placement.rack = "r7": rack r7 is in block b1 (host a) and '
        "block b2 (host b); a domain sits inside one domain of the level above"
    ]


def test_a_domain_that_is_not_a_label_value():
    assert lines({"a": host("b1", "r 1")}) == [
        "- a: aligned_dra_placement.rack = \"r 1\": 'r 1' is not a valid label value (at most 63 letters, digits, "
        "'-', '_' or '.', starting and ending with a letter or digit)"
    ]


def test_levels_are_per_site():
    site = {"a": host("b1", "r1"), "b": host("b1", "r1", aligned_dra_placement_levels=LEVELS[:1])}
    (line,) = lines(site)
    # the site's levels are its first host's: b's placement is checked against them, its own levels refused
    assert line.startswith(
        '- b: aligned_dra_placement_levels = [{"label": "aligned.dev/block", "name": "block"}]: site lab has one '
        "value for all its hosts; its first host a has"
    )


def test_unset_levels_and_jobs_read_as_empty_lists():
    site = {
        "a": {"aligned_dra_site": "lab", "aligned_dra_placement_levels": [], "aligned_dra_jobs": []},
        "b": {"aligned_dra_site": "lab"},
    }
    assert lines(site, validate.STAGES) == []


def test_bad_levels_are_said_once_for_the_site():
    site = {h: {"aligned_dra_site": "lab", "aligned_dra_placement_levels": [{"name": "rack"}]} for h in "abcd"}
    assert lines(site) == [
        '- site lab, 4 hosts (a, b, c and 1 more): aligned_dra_placement_levels = [{"name": "rack"}]: site lab: '
        "aligned_dra_placement_levels[0].label: None is not a label key ([DNS subdomain/]name, the name at most 63 "
        "letters, digits, '-', '_' or '.')"
    ]


def test_a_placement_without_levels():
    site = {"a": {"aligned_dra_site": "lab", "aligned_dra_placement": {"rack": "r1"}}}
    assert lines(site) == [
        '- a: aligned_dra_placement = {"rack": "r1"}: the site declares no levels (aligned_dra_placement_levels); '
        "set them in the site's group_vars"
    ]


def test_jobs_are_checked_against_the_levels_and_the_catalogue():
    bad_level = {"a": host("b1", "r1", aligned_dra_jobs=[dict(JOB, placement={"level": "rak"})])}
    (line,) = lines(bad_level)
    assert line.startswith('- a: aligned_dra_jobs = [{"name": "train", "placement": {"level": "rak"}')
    assert line.endswith(
        ": site lab: aligned_dra_jobs[0] (job train).placement.level: 'rak' is not a level of the site; "
        "did you mean rack? (levels: block, rack)"
    )
    bad_template = {"a": host("b1", "r1", aligned_dra_jobs=[dict(JOB, template="gpu-nic-piar-1")])}
    (line,) = lines(bad_template)
    assert line.endswith(
        "site lab: aligned_dra_jobs[0].template (job train): 'gpu-nic-piar-1' is not a claim template the site's "
        "catalogue renders for Kubernetes 1.36; did you mean gpu-nic-pair-1?"
    )
    # the catalogue of the site's minor: the rail templates exist only with rails
    rails = {"a": host("b1", "r1", aligned_dra_jobs=[dict(JOB, template="gpu-nic-rail-0")])}
    assert "'gpu-nic-rail-0' is not a claim template" in lines(rails)[0]


def test_a_job_whose_namespace_has_no_copy_of_its_template():
    teams = {"teams": [{"name": "vision", "templates": ["gpu-only"]}]}
    site = {"a": host("b1", "r1", aligned_dra_teams=teams, aligned_dra_jobs=[dict(JOB, namespace="vision")])}
    (line,) = lines(site)
    assert line.endswith(
        "site lab: aligned_dra_jobs[0] (job train).template: 'gpu-nic-pair-1' is not copied into namespace "
        "'vision': team 'vision' lists gpu-only"
    )


def test_jobs_are_checked_by_the_placement_stage_only():
    site = {"a": host("b1", "r1", aligned_dra_jobs=[dict(JOB, template="nope")])}
    assert lines(site, ["claims"]) == []
    assert lines(site, ["placement"]) != []


def test_host_placement_under_the_teams_stage_only_with_kueue_and_levels():
    wrong = {"a": host("b1", None, aligned_dra_teams=KUEUE)}
    assert lines(wrong, ["teams"]) == [
        "- a: aligned_dra_placement.rack = (not set): every host needs a domain at every level (levels: block, rack)"
    ]
    quota = {"a": host("b1", None, aligned_dra_teams={"teams": [{"name": "vision", "quotas": {"aligned-gpu": 2}}]})}
    assert lines(quota, ["teams"]) == []
    assert lines(wrong, ["probe", "claims"]) == []


def test_the_teams_stage_checks_the_levels_and_renders_the_topology():
    bad = {"a": {"aligned_dra_site": "lab", "aligned_dra_placement_levels": "rack", "aligned_dra_teams": KUEUE}}
    found = lines(bad, ["teams"])
    assert any("must be a list of {name, label}" in line for line in found)
    # the Topology and the flavor need the site name as a label value
    site = {"a": host("b1", "r1", aligned_dra_site="lab.", aligned_dra_teams=KUEUE)}
    found = lines(site, ["teams"])
    assert any("aligned_dra_site" in line and "not a valid label value" in line for line in found), found


def test_two_hosts_on_one_node():
    site = {
        "a": host("b1", "r1", aligned_dra_driver_node_name="n1"),
        "b": host("b1", "r1", aligned_dra_driver_node_name="n1"),
    }
    assert lines(site) == [
        '- site lab, 2 hosts (a, b): aligned_dra_driver_node_name = "n1": 2 hosts (a, b) are all Kubernetes node '
        "n1; one host per node"
    ]
