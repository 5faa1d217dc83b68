# SPDX-License-Identifier: Apache-2.0
"""What the docs pages show, made the way users get it: a module run in-process, a role's message rendered.

Tests that pin a page's sample output use these, so the lines they compare come from the module and
from the role's own ``debug`` task, not from a copy of either.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import jinja2
import pytest
import yaml
from ansible.module_utils.testing import patch_module_args


def run_module(module: Any, args: dict[str, Any]) -> dict[str, Any]:
    """``module.main()`` with ``args``; its result, which must not have failed."""
    out = io.StringIO()
    with patch_module_args(args), contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        module.main()
    result = json.loads(out.getvalue())
    assert not result.get("failed"), result.get("msg")
    return result


def role_message(tasks_file: Path, task_name: str, context: dict[str, Any]) -> str:
    """The ``ansible.builtin.debug`` message of the task ``task_name``, rendered with ``context``.

    The task's own ``vars`` are rendered first; a lone ``{{ item }}`` stays the mapping, as Ansible
    keeps a lone expression's type.
    """
    tasks = yaml.safe_load(tasks_file.read_text(encoding="utf-8"))
    (task,) = [t for t in tasks if t.get("name") == task_name]
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    context = dict(context)
    for name, value in (task.get("vars") or {}).items():
        context[name] = context["item"] if value.strip() == "{{ item }}" else env.from_string(value).render(context)
    return env.from_string(task["ansible.builtin.debug"]["msg"]).render(context)
