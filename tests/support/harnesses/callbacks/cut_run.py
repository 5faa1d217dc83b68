# SPDX-License-Identifier: Apache-2.0
"""TEST HARNESS (never shipped): an Ansible callback that kills its own ansible-playbook run at a named task,
as an operator's Ctrl-C twice, an OOM kill or a lost controller would: no ``always:``, no handler, nothing
after it runs.

    ANSIBLE_CALLBACK_PLUGINS=<this folder> ANSIBLE_CALLBACKS_ENABLED=cut_run \\
    ALIGNED_DRA_CUT_AT='MIG | Apply the layout' ansible-playbook ...

The run is killed (SIGKILL) when the first task of that name (its own name, without the role's prefix) is
about to start: every task before it has run on every host of the batch, none of it has.
"""

from __future__ import annotations

import os
import signal
import sys

from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "cut_run"
    CALLBACK_NEEDS_ENABLED = True

    def v2_playbook_on_task_start(self, task, is_conditional):
        if task.name == os.environ.get("ALIGNED_DRA_CUT_AT"):
            sys.stdout.write(f"\nCUT: the run is killed at: {task.name}\n")
            sys.stdout.flush()
            os.kill(os.getpid(), signal.SIGKILL)
