# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Action of ``aligned.dra.claims_render``: the stage in ansible-playbook's process where the module would run
on the controller anyway, else the module (:mod:`plugin_utils.stage_action`)."""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.stages import claims_render
from ansible_collections.aligned.dra.plugins.plugin_utils.stage_action import StageAction


class ActionModule(StageAction):
    MODULE = "aligned.dra.claims_render"
    SPEC = claims_render.MODULE_SPEC
    # rendering writes nothing: check mode and diff do not change it
    STAGE = staticmethod(lambda params, check_mode, diff: claims_render.run(params))
