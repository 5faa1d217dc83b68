# SPDX-License-Identifier: Apache-2.0
"""Benchmark callback: wall time and host results per play, written as JSON.

Used by ``benchmarks/site_scale.py`` (not shipped with the collection): it
enables this callback with ``ANSIBLE_CALLBACKS_ENABLED`` and names the output
file in ``ALIGNED_DRA_PLAY_TIMES``. Per play it records the seconds from its
start to the next play's start (or the end of the run), the number of tasks
started, and the host results by outcome; a host result is one worker round.
Per task (``tasks_detail``): its name, the seconds from its start to the next
task's start and its host results.
"""

from __future__ import annotations

import json
import os
import time

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
    name: aligned_dra_play_times
    type: aggregate
    short_description: wall time and host results per play (benchmarks only)
    description:
      - Writes a JSON list with one entry per play to the file named by ALIGNED_DRA_PLAY_TIMES.
    requirements:
      - enabled with ANSIBLE_CALLBACKS_ENABLED
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "aligned_dra_play_times"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self) -> None:
        super().__init__()
        self._plays: list[dict] = []
        self._current: dict | None = None

    def _close_current(self) -> None:
        if self._current is not None:
            self._close_task()
            self._current["seconds"] = round(time.monotonic() - self._current.pop("_start"), 3)
            self._plays.append(self._current)
            self._current = None

    def v2_playbook_on_play_start(self, play) -> None:
        self._close_current()
        self._current = {
            "play": play.get_name().strip(),
            "_start": time.monotonic(),
            "tasks": 0,
            "tasks_detail": [],
            "results": {"ok": 0, "changed": 0, "skipped": 0, "failed": 0, "unreachable": 0},
        }

    def _close_task(self) -> None:
        detail = self._current["tasks_detail"] if self._current is not None else []
        if detail and "_start" in detail[-1]:
            detail[-1]["seconds"] = round(time.monotonic() - detail[-1].pop("_start"), 3)

    def v2_playbook_on_task_start(self, task, is_conditional) -> None:
        if self._current is not None:
            self._close_task()
            self._current["tasks"] += 1
            self._current["tasks_detail"].append(
                {"task": task.get_name().strip(), "_start": time.monotonic(), "rounds": 0}
            )

    def v2_playbook_on_handler_task_start(self, task) -> None:
        self.v2_playbook_on_task_start(task, False)

    def _count(self, outcome: str) -> None:
        if self._current is not None:
            self._current["results"][outcome] += 1
            if self._current["tasks_detail"]:
                self._current["tasks_detail"][-1]["rounds"] += 1

    def v2_runner_on_ok(self, result) -> None:
        self._count("changed" if result._result.get("changed") else "ok")

    def v2_runner_on_skipped(self, result) -> None:
        self._count("skipped")

    def v2_runner_on_failed(self, result, ignore_errors=False) -> None:
        self._count("failed")

    def v2_runner_on_unreachable(self, result) -> None:
        self._count("unreachable")

    def v2_playbook_on_stats(self, stats) -> None:
        self._close_current()
        path = os.environ.get("ALIGNED_DRA_PLAY_TIMES")
        if path:
            with open(path, "w", encoding="utf-8") as handle:
                json.dump(self._plays, handle, indent=1)
