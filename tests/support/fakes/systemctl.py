# SPDX-License-Identifier: Apache-2.0
"""FAKE ``systemctl`` for the tests (never shipped): a node's systemd units in a JSON state file.

The playbook tests put it on a node's PATH (``write_systemctl``), so ``ansible.builtin.systemd_service`` asks
it, and not this machine's systemd. It answers what systemd answers for the calls that module makes:

- ``show [--property=A,B] UNIT...``: ``Id``, ``LoadState`` (``not-found`` for a unit that is not installed,
  rc 0 as systemd answers), ``ActiveState`` and ``SubState`` (only those named by ``--property``), one block
  per unit, the blocks separated by an empty line as systemd separates them;
- ``start UNIT`` / ``stop UNIT``: the unit becomes ``active`` / ``inactive`` (rc 5, "Unit UNIT not found."
  for one not installed); a unit in ``fail_start`` does not start: ``failed``, rc 1 and systemd's "Job for
  UNIT failed because the control process exited with error code." (its unit's process exits non-zero);
- ``is-enabled UNIT``: ``enabled`` (rc 0) or, not installed, rc 1;
- anything else: rc 1, "Unknown command" on stderr.

State file: ``{"units": {NAME: "active" | "inactive" | "failed"}, "calls": [[VERB, NAME], ...],
"fail_start": [NAME, ...]}``: every start and stop of an installed unit (one that fails too) is appended to
``calls``, in order; ``fail_start`` (optional) names the units whose start fails.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def write_systemctl(directory: Path, state: Path, units: dict[str, str]) -> Path:
    """A ``systemctl`` in ``directory`` (put it first on the node's PATH) whose units are ``units``."""
    state.write_text(json.dumps({"units": units, "calls": []}))
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / "systemctl"
    script.write_text(f'#!/bin/sh\nexec {sys.executable} {Path(__file__).resolve()} {state} "$@"\n')
    script.chmod(0o755)
    return script


def read_state(state: Path) -> dict:
    return json.loads(state.read_text())


def _show(units: dict[str, str], name: str, wanted: list[str]) -> str:
    state = units.get(name)
    active = state or "inactive"
    shown = {
        "Id": name,
        "LoadState": "loaded" if state is not None else "not-found",
        "ActiveState": active,
        "SubState": {"active": "running", "failed": "failed"}.get(active, "dead"),
    }
    return "".join(f"{key}={value}\n" for key, value in shown.items() if not wanted or key in wanted)


def main(argv: list[str]) -> int:
    path, args = Path(argv[0]), [a for a in argv[1:] if not a.startswith("-")]
    wanted = [p for a in argv[1:] if a.startswith("--property=") for p in a.split("=", 1)[1].split(",")]
    data = read_state(path)
    verb, names = (args[0], args[1:]) if args else ("", [])
    units = data["units"]
    if verb == "show" and names:
        print("\n".join(_show(units, name, wanted) for name in names), end="")
        return 0
    if verb in ("start", "stop") and len(names) == 1:
        name = names[0]
        if name not in units:
            print(f"Failed to {verb} {name}: Unit {name} not found.", file=sys.stderr)
            return 5
        data["calls"].append([verb, name])
        failing = verb == "start" and name in data.get("fail_start", [])
        units[name] = "failed" if failing else "active" if verb == "start" else "inactive"
        path.write_text(json.dumps(data))
        if failing:
            print(
                f"Job for {name} failed because the control process exited with error code.\n"
                f'See "systemctl status {name}" and "journalctl -xeu {name}" for details.',
                file=sys.stderr,
            )
            return 1
        return 0
    if verb == "is-enabled" and len(names) == 1:
        if names[0] in units:
            print("enabled")
            return 0
        return 1
    print(f"Unknown command verb {verb}.", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
