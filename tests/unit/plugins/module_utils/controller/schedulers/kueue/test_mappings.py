# SPDX-License-Identifier: Apache-2.0
"""What Kueue can count and admit of the site's claim objects."""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kueue import mappings as kueue_mappings
from ansible_collections.aligned.dra.tests.support.sites.kueue_teams import GPU


def test_template_refusals_name_what_kueue_refuses():
    template = {
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "t"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {"name": "a", "exactly": {"deviceClassName": GPU, "allocationMode": "All", "adminAccess": True}}
                    ]
                }
            }
        },
    }
    reasons = kueue_mappings.template_refusals(template)
    assert reasons == [
        "t request a uses adminAccess, which Kueue v0.19.2 refuses",
        "t request a uses allocationMode All, which Kueue v0.19.2 refuses",
    ]
