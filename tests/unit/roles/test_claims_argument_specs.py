# SPDX-License-Identifier: Apache-2.0
"""roles/claims/meta/argument_specs.yml and the validation's site render: the MIG options of aligned_dra_claims
(templates.mig, classes.mig) and aligned_dra_mig pass, bad MIG options are refused naming the setting."""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.validation import validate

MIG_OPTIONS = {
    "enabled": True,
    "profiles": ["1g.10gb", "3g.40gb"],
    "nic": True,
    "prioritized": [["3g.40gb", "4g.40gb"]],
    "name": "mig-{profile}",
    "nic_name": "mig-{profile}-nic",
    "prioritized_name": "mig-{profiles}",
    "class_name": "mig-{profile}.aligned.dev",
    "selectors": {"nic": ['device.attributes["dra.aligned.dev"].linkSpeed >= 400']},
}
DYNAMIC = {"mode": "dynamic", "partitionable_devices_gate": True}


def host_errors(settings: dict) -> list[str]:
    return [f"{p.variable}: {p.reason}" for p in validate.check_host_settings("gpu-01", settings, stages=("claims",))]


def site_errors(settings: dict) -> list[str]:
    def setting(host: str, name: str, default):
        return settings.get(name, default)

    problems = validate.check_site("west", ["gpu-01"], setting, ("claims",))
    return [f"{p.variable}: {p.reason}" for p in problems]


def test_the_mig_options_and_the_nodes_mig_pass():
    settings = {
        "aligned_dra_claims": {"classes": {"mig": "partitions.aligned.dev"}, "templates": {"mig": MIG_OPTIONS}},
        "aligned_dra_mig": DYNAMIC,
    }
    assert host_errors(settings) == []
    assert site_errors(settings) == []


def test_aligned_dra_mig_must_be_a_mapping():
    assert any(e.startswith("aligned_dra_mig: ") for e in host_errors({"aligned_dra_mig": "dynamic"}))


def test_bad_mig_options_are_refused_by_the_validation_naming_the_setting():
    bad = {"aligned_dra_claims": {"templates": {"mig": {"prioritized": [["3g.40gb"]]}}}}
    (error,) = site_errors(bad)
    assert error.startswith("aligned_dra_claims: ")
    assert "aligned_dra_claims.templates.mig.prioritized[0]: a prioritized list names at least 2 profiles" in error
    (error,) = site_errors({"aligned_dra_claims": {"templates": {"mig": {"profile": ["3g.40gb"]}}}})
    assert "aligned_dra_claims.templates.mig: unknown option 'profile'" in error
