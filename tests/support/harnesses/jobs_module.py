# SPDX-License-Identifier: Apache-2.0
"""TEST HELPER: the ``jobs`` module run in-process, for its tests. Never shipped.

- ``run``: ``jobs.main()`` with the given arguments; its JSON result, failed exactly when the test says so.
"""

from __future__ import annotations

import json

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.aligned.dra.plugins.modules import jobs


def run(capsys, args: dict, fails: bool = False) -> dict:
    with patch_module_args(args), pytest.raises(SystemExit):
        jobs.main()
    result = json.loads(capsys.readouterr().out)
    assert bool(result.get("failed")) is fails, result
    return result
