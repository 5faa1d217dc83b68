# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Action of ``aligned.dra.jobs``: the stage in ansible-playbook's process where the module would run
on the controller anyway, else the module (:mod:`plugin_utils.stage_action`)."""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.stages import jobs
from ansible_collections.aligned.dra.plugins.plugin_utils.stage_action import StageAction


class ActionModule(StageAction):
    MODULE = "aligned.dra.jobs"
    SPEC = jobs.MODULE_SPEC
    STAGE = staticmethod(jobs.run)
