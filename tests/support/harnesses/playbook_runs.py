# SPDX-License-Identifier: Apache-2.0
"""TEST HELPER: every ``ansible-playbook`` run of the integration tests, the inventories and plays they
write, and the recap they read. Never shipped.

- inventories: ``write_inventory`` (the ``aligned_dra_nodes`` group on this machine, host vars, other
  groups), ``tree_vars`` (a node read from a fixture tree);
- plays: ``write_play`` (plays of the test's own), ``write_imports`` (the collection's playbooks in a row);
- runs: ``run_playbook`` (an inventory and a play), ``run_on_localhost`` (a play on this machine alone),
  ``run_in_project`` (a user's project directory, with exactly its environment); ``environment`` for a
  run with settings of its own;
- output: ``recap``.

Every run is captured as text, never raises on a failed play, and turns colour off; its result has
``.output`` besides ``stdout`` and ``stderr``: both on one line, each run of whitespace one space, for
messages ansible wraps.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[3]
PLAYBOOKS = REPO / "playbooks"

# Every node of these inventories is this machine, run with the controller's Python.
LOCAL_NODE = {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"}
# The text the tests read carries no colour codes, whatever the caller's terminal settings say.
PLAIN_OUTPUT = {"ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0"}


# -- inventories and plays ---------------------------------------------------------------------


def write_inventory(
    path: Path,
    hosts: Iterable[str] | Mapping[str, Mapping[str, Any]],
    variables: Mapping[str, Any],
    groups: Mapping[str, Any] | None = None,
) -> Path:
    """An ``aligned_dra_nodes`` group run on this machine, with group ``variables`` (they win over
    ``LOCAL_NODE``); ``hosts`` are names, or names with their host vars; ``groups`` are written beside
    it as given. The directories above ``path`` are created."""
    host_vars = dict(hosts) if isinstance(hosts, Mapping) else {name: {} for name in hosts}
    inventory = {**(groups or {}), "aligned_dra_nodes": {"hosts": host_vars, "vars": {**LOCAL_NODE, **variables}}}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(inventory))
    return path


def tree_vars(root: Path) -> dict[str, str]:
    """The host vars of a node whose sysfs and procfs are the fixture tree at ``root``."""
    return {"aligned_dra_sysfs_root": str(root / "sys"), "aligned_dra_procfs_root": str(root / "proc")}


def write_play(path: Path, plays: list[dict[str, Any]]) -> Path:
    path.write_text(yaml.safe_dump(plays))
    return path


def write_imports(path: Path, playbooks: Iterable[Path | str]) -> Path:
    """A playbook that imports ``playbooks`` in order (the stages of ``site.yml`` a test wants)."""
    return write_play(path, [{"ansible.builtin.import_playbook": str(playbook)} for playbook in playbooks])


# -- runs --------------------------------------------------------------------------------------


def environment(**changes: str) -> dict[str, str]:
    """This process's environment with ``changes``: for a run with settings of its own."""
    return {**os.environ, **changes}


def run_playbook(
    inventory: Path | str,
    play: Path | str,
    *args: str,
    extra_vars: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float | None = None,
) -> subprocess.CompletedProcess:
    """``ansible-playbook -i inventory play args``; ``extra_vars`` last (``-e`` as JSON), ``env`` the whole
    environment (default: this process's), ``cwd`` where it runs, ``timeout`` in seconds."""
    command = ["-i", str(inventory), str(play), *args]
    if extra_vars is not None:
        command += ["-e", json.dumps(extra_vars)]
    return _ansible_playbook(command, env=env, cwd=cwd, timeout=timeout)


def run_on_localhost(play: Path, *args: str, **options: Any) -> subprocess.CompletedProcess:
    """``play`` on this machine alone: inventory ``localhost,``, local connection, the controller's Python;
    ``options`` as for ``run_playbook``."""
    interpreter = f"ansible_python_interpreter={LOCAL_NODE['ansible_python_interpreter']}"
    return run_playbook("localhost,", play, "-c", "local", *args, "-e", interpreter, **options)


def run_in_project(
    project: Path,
    play: str,
    *args: str,
    env: Mapping[str, str],
    executable: Path | str = "ansible-playbook",
) -> subprocess.CompletedProcess:
    """``play`` (a playbook of an installed collection, ``aligned.dra.site``) run from a user's ``project``
    directory with exactly ``env``: its ansible.cfg and collections, nothing of this checkout. The
    inventory is the project's (its ansible.cfg, or ``-i`` in ``args``); ``executable`` is another
    Python's ``ansible-playbook`` (an execution environment's)."""
    return _ansible_playbook([play, *args], env=env, cwd=project, executable=executable)


def _ansible_playbook(
    arguments: list[str],
    *,
    env: Mapping[str, str] | None,
    cwd: Path | None,
    timeout: float | None = None,
    executable: Path | str = "ansible-playbook",
) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [str(executable), *arguments],
        capture_output=True,
        text=True,
        check=False,
        env={**(os.environ if env is None else env), **PLAIN_OUTPUT},
        cwd=cwd,
        timeout=timeout,
    )
    proc.output = " ".join((proc.stdout + proc.stderr).split())  # type: ignore[attr-defined]
    return proc


# -- output ------------------------------------------------------------------------------------


def recap(stdout: str) -> dict[str, int]:
    """``changed`` and ``failed`` of the PLAY RECAP, summed over its hosts."""
    found = {"changed": 0, "failed": 0}
    for key, value in re.findall(r"\b(changed|failed)=(\d+)", stdout.split("PLAY RECAP")[-1]):
        found[key] += int(value)
    return found
