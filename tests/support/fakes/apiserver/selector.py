# SPDX-License-Identifier: Apache-2.0
"""TEST FAKE: label and field selectors of the fake API server, and lists filtered by them."""

from __future__ import annotations

import re
from typing import Any

from .resources import ApiError

# Field selectors the real server accepts, per resource (others: 400). Resources not listed take any field.
FIELD_SELECTORS: dict[str, frozenset[str]] = {
    "pods": frozenset(
        {
            "metadata.name",
            "metadata.namespace",
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.podIPs",
            "status.nominatedNodeName",
        }
    ),
    "poddisruptionbudgets": frozenset({"metadata.name", "metadata.namespace"}),
    "daemonsets": frozenset({"metadata.name", "metadata.namespace"}),
    "replicasets": frozenset({"metadata.name", "metadata.namespace", "status.replicas"}),
}


def _field(obj: dict[str, Any], dotted: str) -> Any:
    value: Any = obj
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def match_field_selector(obj: dict[str, Any], selector: str) -> bool:
    for term in filter(None, selector.split(",")):
        negate = "!=" in term
        key, _sep, value = term.partition("!=" if negate else "=")
        value = value.lstrip("=")
        actual = _field(obj, key.strip())
        actual = "" if actual is None else str(actual)
        if (actual == value) == negate:
            return False
    return True


def _split_terms(selector: str) -> list[str]:
    terms, depth, current = [], 0, ""
    for char in selector:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            terms.append(current)
            current = ""
        else:
            current += char
    if current:
        terms.append(current)
    return [t.strip() for t in terms if t.strip()]


def match_label_selector(labels: dict[str, str], selector: str) -> bool:
    for term in _split_terms(selector):
        found = re.match(r"^([^\s!=]+)\s+(in|notin)\s+\((.*)\)$", term)
        if found:
            key, op, values = found.group(1), found.group(2), {v.strip() for v in found.group(3).split(",")}
            if (op == "in") != (labels.get(key) in values):
                return False
        elif "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key.strip()) == value.strip():
                return False
        elif "=" in term:
            key, value = re.split(r"==?", term, maxsplit=1)
            if labels.get(key.strip()) != value.strip():
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


def match_selector_object(labels: dict[str, str], selector: dict[str, Any] | None) -> bool:
    """Match a ``LabelSelector`` object (matchLabels, matchExpressions); an empty selector matches everything."""
    selector = selector or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and key in labels and labels[key] in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
    return True


def selector_problem(selector: dict[str, Any] | None, path: str) -> str | None:
    """The API server's check of a LabelSelector's operators and values, or None."""
    for index, expression in enumerate((selector or {}).get("matchExpressions") or []):
        operator, values = expression.get("operator"), expression.get("values") or []
        where = f"{path}.matchExpressions[{index}]"
        if operator in ("In", "NotIn") and not values:
            return f"{where}.values: Required value: must be specified when `operator` is 'In' or 'NotIn'"
        if operator in ("Exists", "DoesNotExist") and values:
            return f"{where}.values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
        if operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
            return f"{where}.operator: Invalid value: {operator!r}: not a valid selector operator"
    return None


# ---------------------------------------------------------------------------
# Lists
# ---------------------------------------------------------------------------


class Listing:
    """List stored objects by label and field selector (mixed into FakeApiServer)."""

    store: dict[tuple[str, str, str], dict[str, Any]]

    def _list(self, plural: str, namespace: str | None, query: dict[str, str]) -> list[dict[str, Any]]:
        allowed = FIELD_SELECTORS.get(plural)
        if allowed is not None and query.get("fieldSelector"):
            for term in filter(None, query["fieldSelector"].split(",")):
                field = re.split(r"!=|==|=", term, maxsplit=1)[0].strip()
                if field not in allowed:
                    raise ApiError(400, f"field label not supported: {field}")
        items = []
        for (kind, ns, _name), obj in sorted(self.store.items()):
            if kind != plural or (namespace is not None and ns != namespace):
                continue
            if "labelSelector" in query and not match_label_selector(
                obj["metadata"].get("labels") or {}, query["labelSelector"]
            ):
                continue
            if "fieldSelector" in query and not match_field_selector(obj, query["fieldSelector"]):
                continue
            items.append(obj)
        return items
