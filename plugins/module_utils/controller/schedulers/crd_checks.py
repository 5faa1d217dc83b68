# SPDX-License-Identifier: Apache-2.0
"""Rendered objects of a CustomResourceDefinition checked as its API server would, before any apply.

The schedulers' objects (Kueue's, KAI Scheduler's) are validated against
the ``openAPIV3Schema`` of their own CRDs, embedded by ``scripts/crd_schemas.py``
as a module per project (:mod:`kueue_schemas`, :mod:`kai_schemas`), each with
``SCOPES`` (kind: Cluster or Namespaced) and ``schema(kind)``.
:func:`object_problems` checks one object the way an API server with strict
field validation does: the schema with every listed ``properties`` closed
(an unknown field is an error, as with ``fieldValidation=Strict``), the
object's metadata, and the CRD's CEL rules (``x-kubernetes-validations``)
on the object with the schema's defaults applied (transition rules, which
only apply to updates, are skipped). Each project's module adds the rules its
admission webhook enforces beyond the schema.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

import copy
import functools
import re

from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

INT32 = (-(2**31), 2**31 - 1)
_QUALIFIED_PART_RE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_LABEL_VALUE_RE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")


def closed(node: Any) -> Any:
    """The schema with ``additionalProperties: false`` where it lists properties and says nothing else."""
    if isinstance(node, list):
        return [closed(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: closed(child) for name, child in value.items()}
        elif key == "default" or key == "enum":
            out[key] = value
        else:
            out[key] = closed(value)
    if (
        "properties" in node
        and "additionalProperties" not in node
        and not node.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


@functools.lru_cache(maxsize=32)
def _validator(schemas: Any, kind: str) -> Any:
    import jsonschema  # controller-only; kubernetes-validate (requirements.txt) depends on it

    checker = jsonschema.FormatChecker(formats=())

    @checker.checks("int32")
    def _int32(value: Any) -> bool:
        return not isinstance(value, int) or INT32[0] <= value <= INT32[1]

    @checker.checks("int64")
    def _int64(value: Any) -> bool:
        return not isinstance(value, int) or -(2**63) <= value < 2**63

    return jsonschema.Draft7Validator(closed(schemas.schema(kind)), format_checker=checker)


def path_text(parts: Any) -> str:
    """``spec.resources[0].name`` from a jsonschema path."""
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(object)"


def defaulted(schema: dict[str, Any], value: Any) -> Any:
    """``value`` with the schema's defaults applied, as the API server does before CEL rules run."""
    if isinstance(value, dict) and isinstance(schema.get("properties"), dict):
        out = dict(value)
        for name, child in schema["properties"].items():
            if name not in out and "default" in child:
                out[name] = copy.deepcopy(child["default"])
            if name in out:
                out[name] = defaulted(child, out[name])
        return out
    if isinstance(value, dict) and isinstance(schema.get("additionalProperties"), dict):
        return {k: defaulted(schema["additionalProperties"], v) for k, v in value.items()}
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [defaulted(schema["items"], item) for item in value]
    return value


@functools.lru_cache(maxsize=64)
def _rule(expression: str) -> Any:
    from cel_expr_python import cel

    env = cel.NewEnv(variables={"self": cel.Type.DYN})
    return env, env.compile(expression)


def cel_problems(schema: dict[str, Any], value: Any, path: str) -> list[str]:
    """The CEL rules of ``schema`` and its children that ``value`` breaks (transition rules skipped)."""
    problems = []
    for rule in schema.get("x-kubernetes-validations") or []:
        expression = rule.get("rule") or ""
        if re.search(r"\boldSelf\b", expression):
            continue  # transition rules only apply to updates
        try:
            env, program = _rule(expression)
            result = program.eval(env.Activation({"self": value})).value()
            if not isinstance(result, bool):  # an error value (e.g. an int64 overflow), not a verdict
                raise ValueError(f"the rule gave {result!r}, not true or false")
            ok = result
        except Exception as exc:  # a rule that cannot run here is reported, not skipped
            problems.append(f"{path}: CEL rule {expression!r} could not be evaluated: {exc}")
            continue
        if not ok:
            problems.append(f"{path}: {rule.get('message') or 'failed rule ' + expression}")
    if isinstance(value, dict) and isinstance(schema.get("properties"), dict):
        for name, child in schema["properties"].items():
            if name in value:
                problems += cel_problems(child, value[name], f"{path}.{name}" if path else name)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            problems += cel_problems(schema["items"], item, f"{path}[{index}]")
    return problems


def qualified_key(key: Any) -> bool:
    """A label or annotation key: ``[DNS subdomain/]name``, the name at most 63 characters."""
    if not isinstance(key, str):
        return False
    prefix, sep, name = key.rpartition("/")
    return (not sep or dra.is_dns_subdomain(prefix)) and len(name) <= 63 and bool(_QUALIFIED_PART_RE.fullmatch(name))


def metadata_problems(obj: dict[str, Any], kind: str, namespaced: bool) -> list[str]:
    """The object's name, namespace (as its scope wants), labels and annotations."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return ["metadata: must be a mapping"]
    problems = []
    for key in sorted(set(meta) - {"name", "namespace", "labels", "annotations"}):
        problems.append(f"metadata.{key}: unknown field (rendered objects set name, namespace, labels, annotations)")
    if not dra.is_dns_subdomain(meta.get("name")):
        problems.append(f"metadata.name: {meta.get('name')!r} is not a DNS subdomain")
    if namespaced and not dra.is_dns_label(meta.get("namespace")):
        problems.append(f"metadata.namespace: {kind} is namespaced; {meta.get('namespace')!r} is not a namespace name")
    if not namespaced and "namespace" in meta:
        problems.append(f"metadata.namespace: {kind} is cluster-scoped")
    for field in ("labels", "annotations"):
        values = meta.get(field) or {}
        if not isinstance(values, dict):
            problems.append(f"metadata.{field}: must be a mapping")
            continue
        for key, value in values.items():
            if not qualified_key(key):
                problems.append(f"metadata.{field}: {key!r} is not a qualified name")
            if not isinstance(value, str) or (field == "labels" and value and not _LABEL_VALUE_RE.fullmatch(value)):
                problems.append(f"metadata.{field}.{key}: {value!r} is not a valid value")
    return problems


def object_problems(schemas: Any, obj: dict[str, Any]) -> list[str]:
    """Every problem of ``obj`` against its embedded CRD schema (``schemas``), metadata and CEL rules.

    The caller has checked that ``schemas`` embeds the object's kind and version. Problems are
    ``<field path>: <what is wrong>``, without the object's name.
    """
    kind = obj["kind"]
    schema = schemas.schema(kind)
    problems = []
    for error in sorted(_validator(schemas, kind).iter_errors(obj), key=lambda e: list(map(str, e.absolute_path))):
        if error.validator == "additionalProperties" and error.validator_value is False:
            known = sorted(error.schema.get("properties") or {})
            extra = sorted(set(error.instance) - set(known))
            for name in extra:
                where = path_text(list(error.absolute_path) + [name])
                problems.append(f"{where}: unknown field (known: {', '.join(known)})")
            continue
        problems.append(f"{path_text(error.absolute_path)}: {error.message}")
    problems += metadata_problems(obj, kind, schemas.SCOPES[kind] == "Namespaced")
    if not problems:  # CEL rules assume the structure is right
        problems += cel_problems(schema, defaulted(schema, obj), "")
    return problems
