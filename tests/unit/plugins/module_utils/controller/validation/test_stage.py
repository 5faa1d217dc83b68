# SPDX-License-Identifier: Apache-2.0
"""controller/validation/stage.py: the stage's one entry gives the result and the message the module and action return."""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.validation import stage, validate


def run(settings: dict[str, dict], stages=("probe",)):
    return stage.run(list(settings), lambda h: list(settings[h]), lambda h, n, d: settings[h].get(n, d), stages)


def test_a_clean_site_has_no_message_and_counts_its_hosts_and_sites():
    result, message = run({"gpu-01": {}, "gpu-02": {"aligned_dra_site": "west"}})
    assert message is None
    assert result == {"changed": False, "hosts": 2, "sites": ["default", "west"], "problems": []}


def test_every_problem_is_returned_and_said_in_the_message_as_the_checks_say_it():
    settings = {"gpu-01": {"aligned_dra_sit": "west"}, "gpu-02": {}}
    result, message = run(settings)
    problems, sites = validate.validate(
        list(settings), lambda h: list(settings[h]), lambda h, n, d: settings[h].get(n, d), ("probe",)
    )
    assert problems, "the misspelt name is a problem"
    assert result["problems"] == [problem.__dict__ for problem in problems]
    assert result["problems"][0]["host"] == "gpu-01" and result["problems"][0]["variable"] == "aligned_dra_sit"
    assert message == validate.report(problems, sites)
