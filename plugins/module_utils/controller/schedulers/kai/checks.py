# SPDX-License-Identifier: Apache-2.0
"""KAI Scheduler's objects checked against KAI's own CRD schemas before any apply (:mod:`crd_checks`).

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers import crd_checks
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kai import api as kai_api
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kai import schemas as kai_schemas

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def validate_objects(objects: list[dict[str, Any]]) -> list[str]:
    """KAI objects against KAI's CRD schemas (strict, CEL rules); empty when all may be applied."""
    problems = []
    for obj in objects:
        kind = obj.get("kind")
        label = f"{kind} {(obj.get('metadata') or {}).get('name')}"
        if kind not in kai_schemas.API_VERSIONS or obj.get("apiVersion") != kai_schemas.API_VERSIONS[kind]:
            problems.append(
                f"{label}: no embedded schema for {obj.get('apiVersion')} {kind} (KAI {kai_api.KAI_VERSION})"
            )
            continue
        problems += [f"{label}: {p}" for p in crd_checks.object_problems(kai_schemas, obj)]
    return problems
