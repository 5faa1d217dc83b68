# SPDX-License-Identifier: Apache-2.0
"""The validation stage's one entry: :func:`run`, which the ``validate`` module and its action call.

The checks are :func:`validate.validate`'s; :func:`run` gives the result both
return (``changed``, ``hosts``, ``sites``, ``problems``) and the message that
says every problem, each caller reading the hosts' variables its own way (the
module from its ``settings`` argument, the action from ``hostvars``).

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.validation import validate

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any


def run(
    hosts: list[str],
    names: Callable[[str], Iterable[str]],
    setting: Callable[[str, str, Any], Any],
    stages: Iterable[str],
) -> tuple[dict[str, Any], str | None]:
    """``(result, message)``: what the stage returns, and the message of its problems (None when there are none).

    ``names(host)`` lists a host's variable names and ``setting(host, name,
    default)`` reads one; ``stages`` are the stages of this run
    (:data:`validate.STAGES`).
    """
    problems, sites = validate.validate(hosts, names, setting, stages)
    result = {
        "changed": False,
        "hosts": len(hosts),
        "sites": sorted(set(sites.values())),
        "problems": [problem.__dict__.copy() for problem in problems],
    }
    return result, validate.report(problems, sites) if problems else None
