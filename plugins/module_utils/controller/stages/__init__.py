# SPDX-License-Identifier: Apache-2.0
"""The controller's stages, one module per Ansible module, each entered through one ``run`` (the top layer).

A module under ``plugins/modules/`` is its arguments, ``run`` and the exit:
``run`` takes the module's parameters (and, where the module changes files,
check mode and diff) and returns the module's result, or raises
:class:`StageError` with the message (and the result fields) the module fails with.
A stage that writes a JSON file to ``dest`` writes it with :func:`write_dest`.

- :mod:`claims_render`: a site's DeviceClasses and ResourceClaimTemplates;
- :mod:`teams_render`: a site's team objects (namespaces, quotas, priorities, Kueue's or KAI Scheduler's);
- :mod:`jobs`: a site's jobs rendered, placed and written to ``jobs.json``;
- :mod:`plan`: the site's claims planned on its nodes (``plan.json``);
- :mod:`utilization`: the devices in use per node, team and class (``utilization.json``);
- :mod:`replay`: a workload trace replayed on the site's devices;
- :mod:`site_report`: the site report's pages;
- :mod:`topology_output`: the nodes' topology files;
- :mod:`site_state`: which sites' inputs and facts did not change since the last run (their outputs kept).

The validation stage and the preflight are :mod:`controller.validation`.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.json_file import JsonFileError, write_json_file

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class StageError(Exception):
    """A stage's failure: the message its module fails with, and the result fields it returns beside it."""

    def __init__(self, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.fields = fields


def write_dest(dest: str | None, data: Any, check_mode: bool) -> tuple[bool, dict[str, Any]]:
    """``data`` as the JSON file ``dest`` (none: nothing written): whether it changed, and its diff. A file
    that cannot be written fails the stage with its message."""
    if not dest:
        return False, {}
    try:
        return write_json_file(dest, data, check_mode)
    except JsonFileError as exc:
        raise StageError(str(exc)) from None
