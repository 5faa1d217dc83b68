# SPDX-License-Identifier: Apache-2.0
"""Kueue amounts: device counts and capacity quantities, exactly."""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kueue import api as kueue_api


def test_quantities():
    assert kueue_api.quantity_text(kueue_api.amount("160Gi") * 2) == "320Gi"
    assert kueue_api.quantity_text(kueue_api.amount("1500m")) == "1500m"
    assert kueue_api.quantity_text(kueue_api.amount(3)) == "3"
