# SPDX-License-Identifier: Apache-2.0
"""Device taint tolerations of a site's claim templates (``aligned_dra_claims_tolerations``).

:func:`check` checks the site's tolerations as ``resource.k8s.io/v1``
DeviceTolerations and refuses them where ``DRADeviceTaints`` is off (an API
server with the gate off drops every ``tolerations`` field, so a template that
relies on one is refused rather than rendered without it); :func:`tolerating`
puts them in every request of a template.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

import copy

from ansible_collections.aligned.dra.plugins.module_utils.dra import gates as dra_gates
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra
from ansible_collections.aligned.dra.plugins.module_utils.dra.labels import is_label_name, is_label_value

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

SETTING = "aligned_dra_claims_tolerations"
FIELDS = ("key", "operator", "value", "effect", "tolerationSeconds")
OPERATORS = ("Equal", "Exists")
EFFECTS = ("NoSchedule", "NoExecute")


class TolerationError(ValueError):
    """Tolerations that cannot be rendered; the message names the setting and the entry."""


def check(tolerations: Any, minor: str, gates: dict[str, bool]) -> list[dict[str, Any]]:
    """The site's DeviceTolerations, checked, with empty fields left out; raises :class:`TolerationError`."""
    if not tolerations:
        return []
    if not isinstance(tolerations, list):
        raise TolerationError(f"{SETTING} must be a list of tolerations")
    if not dra_gates.gate_enabled("DRADeviceTaints", minor, gates):
        raise TolerationError(
            f"{SETTING}: device taint tolerations need feature gate DRADeviceTaints, which is off on Kubernetes "
            f"{minor}; turn it on in aligned_dra_feature_gates (alpha before 1.36) or remove the tolerations"
        )
    limit = dra.LIMITS["tolerations_max_length"]
    if len(tolerations) > limit:
        raise TolerationError(f"{SETTING}: {len(tolerations)} tolerations, a request takes at most {limit}")
    return [_checked(item, f"{SETTING}[{index}]") for index, item in enumerate(tolerations)]


def _checked(item: Any, at: str) -> dict[str, Any]:
    """One toleration, checked."""
    if not isinstance(item, dict):
        raise TolerationError(f"{at} must be a mapping")
    unknown = sorted(set(item) - set(FIELDS), key=str)
    if unknown:
        raise TolerationError(f"{at}: unknown field {unknown[0]!r} (known: {', '.join(FIELDS)})")
    key = item.get("key") or ""
    operator = item.get("operator") or "Equal"
    value = item.get("value") or ""
    effect = item.get("effect") or ""
    if operator not in OPERATORS:
        raise TolerationError(f"{at}.operator {operator!r} is not one of {', '.join(OPERATORS)}")
    if key and not is_label_name(key):
        raise TolerationError(f"{at}.key {key!r} is not a label name (prefix/name)")
    if not key and operator != "Exists":
        raise TolerationError(f"{at}: without a key the operator must be Exists")
    if operator == "Exists" and value:
        raise TolerationError(f"{at}: operator Exists takes no value")
    if value and not is_label_value(value):
        raise TolerationError(f"{at}.value {value!r} is not a label value")
    if effect and effect not in EFFECTS:
        raise TolerationError(f"{at}.effect {effect!r} is not one of {', '.join(EFFECTS)} (or empty)")
    seconds = item.get("tolerationSeconds")
    if seconds is not None:
        if not isinstance(seconds, int) or isinstance(seconds, bool):
            raise TolerationError(f"{at}.tolerationSeconds must be an integer")
        if effect != "NoExecute":
            raise TolerationError(f"{at}.tolerationSeconds applies only to effect NoExecute")
    return {k: item[k] for k in FIELDS if item.get(k) not in (None, "")}


def tolerating(template: dict[str, Any], tolerations: list[dict[str, Any]]) -> dict[str, Any]:
    """The template with the tolerations in every request (``exactly`` and each ``firstAvailable`` entry)."""
    for request in template["spec"]["spec"]["devices"]["requests"]:
        for spec in [request["exactly"]] if request.get("exactly") else request.get("firstAvailable") or []:
            spec["tolerations"] = copy.deepcopy(tolerations)
    return template
