# SPDX-License-Identifier: Apache-2.0
"""Site report inputs: plan files the report cannot use are refused with the field at fault."""

from __future__ import annotations

import re

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.report import inputs
from ansible_collections.aligned.dra.tests.report_sites import identical_site, plan_for


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda p: p.update(tainted_devices=[{"node": "n1"}]), "'tainted_devices' must be a list of objects"),
        (lambda p: p.update(schema_version=2), "schema_version 2 is not supported"),
        (lambda p: p["templates"][0].pop("fits_total"), "templates[0] has no 'fits_total'"),
        (lambda p: p["templates"][1].update(worst_level="FAR"), "worst_level 'FAR' is not one of"),
        (lambda p: p.update(templates={}), "'templates' must be a list"),
        (lambda p: p["templates"][0]["nodes"]["gpu-0001"].pop("fits"), "nodes.gpu-0001 needs 'fits'"),
    ],
)
def test_bad_plans_are_refused_with_the_field(mutate, message):
    plan = plan_for("s", identical_site("vm-flat", 1))
    mutate(plan)
    with pytest.raises(inputs.ReportError, match=re.escape(message)):
        inputs.validate_plan(plan, "p.json")
