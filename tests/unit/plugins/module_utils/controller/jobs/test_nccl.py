# SPDX-License-Identifier: Apache-2.0
"""NCCL environment: set only from what the template promises."""

from __future__ import annotations

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.jobs import nccl


def names(env):
    return {e["name"]: e["value"] for e in env}


def test_pinned_rails_keep_rings_on_one_rail():
    assert names(nccl.nccl_env(4, [0, 1])) == {"NCCL_CROSS_NIC": "0"}


@pytest.mark.parametrize(("workers", "rails"), [(1, [0]), (4, None), (4, [])])
def test_nothing_without_pinned_rails_or_a_second_worker(workers, rails):
    # NCCL_NET_GDR_LEVEL is never set: no bound over every allocation a template allows is known
    assert nccl.nccl_env(workers, rails) == []
