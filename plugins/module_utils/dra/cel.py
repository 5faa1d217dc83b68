# SPDX-License-Identifier: Apache-2.0
"""CEL for DRA device selectors, with Kubernetes' functions and error semantics.

Runs on the controller only (the planner and the renderer); it needs
``cel-expr-python`` (the CEL project's C++ runtime with a type checker).

What a selector sees, as in Kubernetes:

- ``device.driver`` (string), ``device.attributes[domain][id]`` (string, int,
  bool or semver, or a list of one of them when the driver publishes
  list-typed attributes), ``device.capacity[domain][id]`` (quantity) and
  ``device.allowMultipleAllocations`` (bool);
- an attribute domain that the device does not have is an empty map; an
  attribute or capacity that is missing inside a domain is an evaluation
  error, and so is a result that is not a boolean: either aborts the whole
  allocation of the claim;
- Kubernetes' CEL libraries that DRA selectors use: ``quantity()``,
  ``isQuantity()`` and the quantity methods, ``semver()``, ``isSemver()`` and
  the semver methods, ``includes()`` of DRAListTypeAttributes (on a list
  attribute: membership; on a scalar one: equality), the list functions (``isSorted``, ``sum``, ``min``,
  ``max``), ``find``/``findAll``, the ``sets`` functions and the extended
  string library. Not provided: ``indexOf``/``lastIndexOf`` on lists (the
  string library's ``indexOf`` owns the name here), the URL, IP and CIDR
  libraries.

Quantities and semantic versions are represented inside CEL as one-key maps
(``{"k8s.quantity": "num/den"}``, ``{"k8s.semver": "1.2.3"}``) in canonical
form, so ``==`` compares values like Kubernetes does.

Static checks (:func:`check_expression`) go beyond "it compiles": the result
type must be able to be a boolean, ``device`` has only its four fields, the
attribute and capacity accesses of the form ``device.attributes["d"].id`` are
checked against a catalogue of known attributes for the domains it knows
(names and value types), and the expression size limit applies. What is not
checked: the runtime cost estimate that the API server computes, and accesses
with computed domain names.
"""

from __future__ import annotations

import functools
import re
from fractions import Fraction

from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any

try:
    from cel_expr_python import cel as _cel
    from cel_expr_python.ext import ext_strings as _ext_strings

    CEL_IMPORT_ERROR = None
except ImportError as exc:  # pragma: no cover - exercised only without the package
    _cel = None
    _ext_strings = None
    CEL_IMPORT_ERROR = exc

QUANTITY_KEY = "k8s.quantity"
SEMVER_KEY = "k8s.semver"
DEVICE_FIELDS = ("driver", "attributes", "capacity", "allowMultipleAllocations")

# -- quantities ----------------------------------------------------------------

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY_RE = re.compile(
    r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(?:([eE][+-]?[0-9]+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]))?$"
)


class CelError(ValueError):
    """An expression that does not compile or fails a static check."""


@functools.lru_cache(maxsize=4096)
def parse_quantity(text: str) -> Fraction:
    """The exact value of a Kubernetes quantity string; ValueError when invalid."""
    if not isinstance(text, str):
        raise ValueError(f"quantity must be a string, got {text!r}")
    match = _QUANTITY_RE.match(text.strip())
    if not match or text != text.strip():
        raise ValueError(f"quantities must match the regular expression of Kubernetes quantities: {text!r}")
    number, exponent, suffix = match.groups()
    value = Fraction(number)
    if exponent:
        value *= Fraction(10) ** int(exponent[1:])
    elif suffix in _BINARY:
        value *= _BINARY[suffix]
    else:
        value *= _DECIMAL[suffix or ""]
    return value


def quantity_value(value: Fraction) -> dict[str, str]:
    return {QUANTITY_KEY: f"{value.numerator}/{value.denominator}"}


def quantity(text: str) -> dict[str, str]:
    return quantity_value(parse_quantity(text))


@functools.lru_cache(maxsize=4096)
def _fraction(key: str) -> Fraction:
    num, den = key.split("/")
    return Fraction(int(num), int(den))


def _q(value: Any) -> Fraction:
    if isinstance(value, dict) and QUANTITY_KEY in value:
        return _fraction(value[QUANTITY_KEY])
    raise ValueError(f"no such overload: expected a quantity, got {value!r}")


# -- semantic versions ---------------------------------------------------------------

_SEMVER_RE = re.compile(
    r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)"
    r"(?:-((?:0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*))*))?"
    r"(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$"
)


def _normalize_semver(text: str) -> str:
    """Kubernetes' ``semver(s, true)``: drop a leading v, fill missing parts, strip leading zeros."""
    text = text[1:] if text.startswith("v") else text
    core, sep, rest = text.partition("-")
    if not sep:
        core, sep, rest = text.partition("+")
    parts = core.split(".")
    if not 1 <= len(parts) <= 3 or not all(p.isdigit() for p in parts):
        return text
    parts = [str(int(p)) for p in parts] + ["0"] * (3 - len(parts))
    return ".".join(parts) + (sep + rest if sep else "")


def parse_semver(text: str, normalize: bool = False) -> str:
    if not isinstance(text, str):
        raise ValueError(f"semver must be a string, got {text!r}")
    candidate = _normalize_semver(text) if normalize else text
    if not _SEMVER_RE.match(candidate):
        raise ValueError(f"could not parse {text!r} as semver")
    return candidate


def semver(text: str, normalize: bool = False) -> dict[str, str]:
    return {SEMVER_KEY: parse_semver(text, normalize)}


def _semver_key(text: str) -> tuple:
    match = _SEMVER_RE.match(text)
    if not match:
        raise ValueError(f"could not parse {text!r} as semver")
    major, minor, patch, pre, _build = match.groups()
    if pre is None:
        pre_key: tuple = (1,)
    else:
        pre_key = (0,) + tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split("."))
    return (int(major), int(minor), int(patch), pre_key)


def _v(value: Any) -> tuple:
    if isinstance(value, dict) and SEMVER_KEY in value:
        return _semver_key(value[SEMVER_KEY])
    raise ValueError(f"no such overload: expected a semver, got {value!r}")


def _ordered(value: Any) -> Any:
    """The comparable form of a quantity or a semver."""
    if isinstance(value, dict) and QUANTITY_KEY in value:
        return ("q", _q(value))
    if isinstance(value, dict) and SEMVER_KEY in value:
        return ("v", _v(value))
    raise ValueError(f"no such overload: {value!r} is neither a quantity nor a semver")


def _compare(left: Any, right: Any) -> int:
    a, b = _ordered(left), _ordered(right)
    if a[0] != b[0]:
        raise ValueError("no such overload: cannot compare a quantity with a semver")
    return (a[1] > b[1]) - (a[1] < b[1])


def _checked(value: Any) -> bool:
    try:
        value()
    except ValueError:
        return False
    return True


def _as_integer(value: Any) -> int:
    number = _q(value)
    if number.denominator != 1 or not -(2**63) <= number.numerator < 2**63:
        raise ValueError("cannot convert value to integer")
    return number.numerator


def _plus(value: Any, other: Any, sign: int) -> dict[str, str]:
    delta = Fraction(other) if isinstance(other, int) and not isinstance(other, bool) else _q(other)
    return quantity_value(_q(value) + sign * delta)


# -- lists, regex, sets ----------------------------------------------------------------


def _is_sorted(items: list) -> bool:
    return all(items[i] <= items[i + 1] for i in range(len(items) - 1))


def _sum(items: list) -> Any:
    if items and all(isinstance(i, dict) and QUANTITY_KEY in i for i in items):
        return quantity_value(sum((_q(i) for i in items), Fraction(0)))
    return sum(items) if items else 0


def _min(items: list) -> Any:
    if not items:
        raise ValueError("min called on empty list")
    return min(items, key=_sort_key)


def _max(items: list) -> Any:
    if not items:
        raise ValueError("max called on empty list")
    return max(items, key=_sort_key)


def _sort_key(value: Any) -> Any:
    return _ordered(value) if isinstance(value, dict) else value


def _same(left: Any, right: Any) -> bool:
    """CEL equality of two attribute values: a bool is never equal to a number."""
    if isinstance(left, bool) != isinstance(right, bool):
        return False
    return left == right


def _includes(target: Any, value: Any) -> bool:
    """Kubernetes' ``<attribute>.includes(<value>)`` (DRAListTypeAttributes): membership in a
    list attribute, equality with a scalar one; longer lists than a device may hold are an error."""
    if isinstance(target, list):
        limit = dra.LIMITS["device_max_attribute_values"]
        if len(target) > limit:
            raise ValueError(f"'includes' function cannot be applied to lists longer than {limit} values")
        return any(_same(item, value) for item in target)
    return _same(target, value)


@functools.lru_cache(maxsize=256)
def _regex(pattern: str) -> re.Pattern:
    return re.compile(pattern)


def _find(text: str, pattern: str) -> str:
    match = _regex(pattern).search(text)
    return match.group(0) if match else ""


def _find_all(text: str, pattern: str, limit: int = -1) -> list:
    found = [m.group(0) for m in _regex(pattern).finditer(text)]
    return found if limit < 0 else found[:limit]


# -- the environment ---------------------------------------------------------------------


def _declarations() -> list:
    t = _cel.Type
    obj = t.Map(t.STRING, t.DYN)  # quantity and semver values
    dyn_list = t.List(t.DYN)
    kinds = {"int": t.INT, "string": t.STRING, "bool": t.BOOL, "semver": obj, "list": dyn_list}

    def fn(name: str, *overloads: Any) -> Any:
        return _cel.FunctionDecl(name, list(overloads))

    def ov(oid: str, ret: Any, params: list, impl: Any, member: bool = False) -> Any:
        return _cel.Overload(oid, ret, params, is_member=member, impl=impl)

    return [
        fn("quantity", ov("k8s_quantity_string", obj, [t.STRING], quantity)),
        fn(
            "isQuantity",
            ov("k8s_is_quantity_string", t.BOOL, [t.STRING], lambda s: _checked(lambda: parse_quantity(s))),
        ),
        fn(
            "semver",
            ov("k8s_semver_string", obj, [t.STRING], semver),
            ov("k8s_semver_string_bool", obj, [t.STRING, t.BOOL], semver),
        ),
        fn(
            "isSemver",
            ov("k8s_is_semver_string", t.BOOL, [t.STRING], lambda s: _checked(lambda: parse_semver(s))),
            ov(
                "k8s_is_semver_string_bool",
                t.BOOL,
                [t.STRING, t.BOOL],
                lambda s, n: _checked(lambda: parse_semver(s, n)),
            ),
        ),
        fn("compareTo", ov("k8s_compare_to", t.INT, [obj, obj], _compare, True)),
        fn("isGreaterThan", ov("k8s_is_greater_than", t.BOOL, [obj, obj], lambda a, b: _compare(a, b) > 0, True)),
        fn("isLessThan", ov("k8s_is_less_than", t.BOOL, [obj, obj], lambda a, b: _compare(a, b) < 0, True)),
        fn("sign", ov("k8s_quantity_sign", t.INT, [obj], lambda q: (_q(q) > 0) - (_q(q) < 0), True)),
        fn("isInteger", ov("k8s_quantity_is_integer", t.BOOL, [obj], lambda q: _q(q).denominator == 1, True)),
        fn("asInteger", ov("k8s_quantity_as_integer", t.INT, [obj], _as_integer, True)),
        fn("asApproximateFloat", ov("k8s_quantity_as_float", t.DOUBLE, [obj], lambda q: float(_q(q)), True)),
        fn(
            "add",
            ov("k8s_quantity_add_quantity", obj, [obj, obj], lambda a, b: _plus(a, b, 1), True),
            ov("k8s_quantity_add_int", obj, [obj, t.INT], lambda a, b: _plus(a, b, 1), True),
        ),
        fn(
            "sub",
            ov("k8s_quantity_sub_quantity", obj, [obj, obj], lambda a, b: _plus(a, b, -1), True),
            ov("k8s_quantity_sub_int", obj, [obj, t.INT], lambda a, b: _plus(a, b, -1), True),
        ),
        fn("major", ov("k8s_semver_major", t.INT, [obj], lambda v: _v(v)[0], True)),
        fn("minor", ov("k8s_semver_minor", t.INT, [obj], lambda v: _v(v)[1], True)),
        fn("patch", ov("k8s_semver_patch", t.INT, [obj], lambda v: _v(v)[2], True)),
        fn("isSorted", ov("k8s_list_is_sorted", t.BOOL, [dyn_list], _is_sorted, True)),
        fn("sum", ov("k8s_list_sum", t.DYN, [dyn_list], _sum, True)),
        fn("min", ov("k8s_list_min", t.DYN, [dyn_list], _min, True)),
        fn("max", ov("k8s_list_max", t.DYN, [dyn_list], _max, True)),
        fn("find", ov("k8s_string_find", t.STRING, [t.STRING, t.STRING], _find, True)),
        fn(
            "findAll",
            ov("k8s_string_find_all", t.List(t.STRING), [t.STRING, t.STRING], _find_all, True),
            ov("k8s_string_find_all_n", t.List(t.STRING), [t.STRING, t.STRING, t.INT], _find_all, True),
        ),
        # Kubernetes declares includes(dyn, dyn); this runtime dispatches on declared types, so
        # one overload per kind of attribute and of value
        fn(
            "includes",
            *(
                ov(f"dra_includes_{target}_{value}", t.BOOL, [kinds[target], kinds[value]], _includes, True)
                for target in kinds
                for value in kinds
                if value != "list"
            ),
        ),
        fn("sets.contains", ov("k8s_sets_contains", t.BOOL, [dyn_list, dyn_list], lambda a, b: all(x in a for x in b))),
        fn(
            "sets.equivalent",
            ov(
                "k8s_sets_equivalent",
                t.BOOL,
                [dyn_list, dyn_list],
                lambda a, b: all(x in b for x in a) and all(x in a for x in b),
            ),
        ),
        fn(
            "sets.intersects",
            ov("k8s_sets_intersects", t.BOOL, [dyn_list, dyn_list], lambda a, b: any(x in b for x in a)),
        ),
    ]


@functools.lru_cache(maxsize=1)
def environment() -> Any:
    """The CEL environment of DRA selectors (one per process)."""
    if _cel is None:
        raise CelError(f"the Python package cel-expr-python is needed on the controller: {CEL_IMPORT_ERROR}")
    return _cel.NewEnv(
        variables={"device": _cel.Type.Map(_cel.Type.STRING, _cel.Type.DYN)},
        extensions=[_ext_strings.ExtStrings()],
        functions=_declarations(),
    )


# -- static checks ------------------------------------------------------------------------

# Known attributes per domain, with their value types, for the access checks.
KNOWN_ATTRIBUTES = {
    dra.STANDARD_DOMAIN: {"pcieRoot": "string", "pciBusID": "string", "numaNode": "int"},
    dra.DRIVER_NAME: {
        "kind": "string",
        "vendorID": "string",
        "deviceID": "string",
        "model": "string",
        "driver": "string",
        "pcieSwitch": "string",
        "gpuIndex": "int",
        "minor": "int",
        "uuid": "string",
        "card": "string",
        "netdev": "string",
        "rdma": "bool",
        "rdmaDevice": "string",
        "linkSpeed": "int",
        "linkType": "string",
        "sriovRole": "string",
        "sriovParent": "string",
        "sriovNumVFs": "int",
        "numaNodeInferred": "bool",
        dra.RAIL_ATTRIBUTE: "int",
        dra.GPUDIRECT_ATTRIBUTE: "bool",
        # a MIG device's (dra/mig.py): its profile, placement, parent GPU and (static) its own MIG UUID
        "profile": "string",
        "placementStart": "int",
        "placementSize": "int",
        "parentUUID": "string",
        "migUUID": "string",
    },
}
KNOWN_CAPACITIES = {dra.DRIVER_NAME: {"memory", "bandwidth"}}

_DEVICE_FIELD_RE = re.compile(r"\bdevice\s*\.\s*([A-Za-z_][A-Za-z0-9_]*)")
_ACCESS_RE = re.compile(
    r"\bdevice\s*\.\s*(attributes|capacity)\s*\[\s*(\"[^\"]*\"|'[^']*')\s*\]"
    r"(?:\s*\.\s*([A-Za-z_][A-Za-z0-9_]*)|\s*\[\s*(\"[^\"]*\"|'[^']*')\s*\])?"
)
_COMPARE_LITERAL_RE = re.compile(r"^\s*(==|!=)\s*(\"[^\"]*\"|'[^']*'|-?[0-9]+\b|true\b|false\b)")


def accesses(expression: str) -> list[tuple[str, str, str | None, int]]:
    """``(field, domain, id or None, end offset)`` of every literal attribute/capacity access."""
    found = []
    for match in _ACCESS_RE.finditer(expression):
        ident = match.group(3) or (match.group(4)[1:-1] if match.group(4) else None)
        found.append((match.group(1), match.group(2)[1:-1], ident, match.end()))
    return found


def referenced_domains(expressions: Iterable[str]) -> set[str]:
    """Domains that expressions index ``device.attributes`` / ``device.capacity`` with."""
    return {access[1] for expression in expressions for access in accesses(expression)}


def _literal_type(literal: str) -> str:
    if literal[0] in "\"'":
        return "string"
    if literal in ("true", "false"):
        return "bool"
    return "int"


def check_expression(expression: str, known: dict[str, dict[str, str]] | None = None) -> list[str]:
    """Problems of a selector expression; empty when it compiles and passes the checks."""
    problems = []
    limit = dra.LIMITS["cel_expression_max_length"]
    if len(expression) > limit:
        problems.append(f"expression is {len(expression)} characters long, limit {limit}")
    try:
        compiled = environment().compile(expression)
    except RuntimeError as exc:
        return problems + [f"does not compile: {_clean(str(exc))}"]
    result = compiled.return_type()
    if result not in (_cel.Type.BOOL, _cel.Type.DYN):
        problems.append(f"must evaluate to bool, but its type is {result.name()}")
    for match in _DEVICE_FIELD_RE.finditer(expression):
        if match.group(1) not in DEVICE_FIELDS:
            problems.append(f"undefined field {match.group(1)!r} of device (fields: {', '.join(DEVICE_FIELDS)})")
    catalogue = KNOWN_ATTRIBUTES if known is None else known
    for field, domain, ident, end in accesses(expression):
        if not dra.is_dns_subdomain(domain):
            problems.append(f"device.{field}[{domain!r}]: the domain is not a DNS subdomain, no device can have it")
            continue
        if ident is None:
            continue
        if field == "capacity":
            if domain in KNOWN_CAPACITIES and ident not in KNOWN_CAPACITIES[domain]:
                problems.append(
                    f"device.capacity[{domain!r}].{ident}: no {domain} device has this capacity "
                    f"(known: {', '.join(sorted(KNOWN_CAPACITIES[domain]))}); evaluating it aborts allocation"
                )
            continue
        types = catalogue.get(domain)
        if types is None:
            continue
        if ident not in types:
            problems.append(
                f"device.attributes[{domain!r}].{ident}: no {domain} device has this attribute; "
                "evaluating it aborts allocation"
            )
            continue
        compared = _COMPARE_LITERAL_RE.match(expression[end:])
        if compared and _literal_type(compared.group(2)) != types[ident]:
            problems.append(
                f"device.attributes[{domain!r}].{ident} is {_article(types[ident])} but is compared with "
                f"{compared.group(2)}: the comparison is never true"
            )
    return problems


def _article(kind: str) -> str:
    return ("an " if kind[0] in "aeiou" else "a ") + kind


def _clean(message: str) -> str:
    return " ".join(line.strip() for line in message.splitlines() if line.strip() and not line.strip().startswith("|"))


# -- evaluation --------------------------------------------------------------------------------


class Selector:
    """A compiled selector whose results are memoised on what it reads.

    When every use of ``device`` in the expression is a literal access
    (``device.driver``, ``device.attributes["d"].id``, ``device.capacity["d"].id``),
    the result depends only on those values, so devices that agree on them
    share one evaluation.
    """

    def __init__(self, expression: str) -> None:
        self.expression = expression
        try:
            self.program = environment().compile(expression)
        except RuntimeError as exc:
            raise CelError(f"does not compile: {_clean(str(exc))}") from None
        self.reads = self._reads(expression)
        self.memo: dict[tuple, tuple[bool, str | None]] = {}
        self.keyed_memo: dict[tuple, tuple[bool, str | None]] = {}

    @staticmethod
    def _reads(expression: str) -> list[tuple[str, str, str]] | None:
        """The values the expression reads, or None when they cannot be told statically."""
        reads = []
        covered = set()
        for match in _ACCESS_RE.finditer(expression):
            if match.group(3) is None and match.group(4) is None:
                return None
            ident = match.group(3) or match.group(4)[1:-1]
            reads.append((match.group(1), match.group(2)[1:-1], ident))
            covered.add(match.start())
        for match in _DEVICE_FIELD_RE.finditer(expression):
            if match.group(1) in ("driver", "allowMultipleAllocations"):
                reads.append((match.group(1), "", ""))
            elif match.start() not in covered:
                return None
        if re.search(r"\bdevice\b(?!\s*\.)", expression):
            return None  # the whole device is used (e.g. passed to a function)
        return reads

    def evaluate(self, device: dict[str, Any]) -> tuple[bool, str | None]:
        """``(matches, error)`` for one planner device (see :func:`cel_device`)."""
        if self.reads is not None:
            key = tuple(_read(device, read) for read in self.reads)
            cached = self.memo.get(key)
            if cached is None:
                cached = self._run(device)
                self.memo[key] = cached
            return cached
        return self._run(device)

    def evaluate_keyed(self, key: tuple, view: Callable[[], dict[str, Any]]) -> tuple[bool, str | None]:
        """:meth:`evaluate` with the memo key computed by the caller from the values in :attr:`reads`.

        ``view`` builds the CEL view (:func:`cel_device`) only when the key was not seen yet.
        """
        cached = self.keyed_memo.get(key)
        if cached is None:
            cached = self.keyed_memo[key] = self._run(view())
        return cached

    def _run(self, device: dict[str, Any]) -> tuple[bool, str | None]:
        activation = device.get("_activation")
        if activation is None:
            activation = device["_activation"] = environment().Activation({"device": device["cel"]})
        result = self.program.eval(activation)
        kind = result.type()
        if kind == _cel.Type.BOOL:
            return bool(result.value()), None
        if kind == _cel.Type.ERROR:
            return False, str(result.value())
        return False, f"expression must evaluate to bool, got {kind.name()}"


_MISSING = object()
MISSING = _MISSING  # what a read of an absent attribute, capacity or field gives in memo keys


def _read(device: dict[str, Any], read: tuple[str, str, str]) -> Any:
    field, domain, ident = read
    if field in ("driver", "allowMultipleAllocations"):
        return device["cel"].get(field, _MISSING)
    value = device["cel"][field].get(domain, _MISSING)
    if value is _MISSING:
        return _MISSING
    value = value.get(ident, _MISSING)
    if isinstance(value, list):  # a list-typed attribute
        return tuple(tuple(sorted(v.items())) if isinstance(v, dict) else v for v in value)
    return tuple(sorted(value.items())) if isinstance(value, dict) else value


def cel_device(device: dict[str, Any], driver: str, domains: Iterable[str] = ()) -> dict[str, Any]:
    """The CEL view of a v1 Device dict: ``{"cel": ...}`` (the activation is made on first use).

    Attribute names without a domain belong to the device's driver. ``domains``
    (the ones the selectors index) are added as empty maps when the device has
    none of them, so reading them behaves like Kubernetes' unknown domains.
    """
    attributes: dict[str, dict[str, Any]] = {}
    for name, value in (device.get("attributes") or {}).items():
        domain, ident = dra.split_qualified_name(name, driver)
        ((kind, raw),) = value.items()
        if kind == "version":
            raw = semver(raw)
        elif kind == "versions":
            raw = [semver(item) for item in raw]
        elif kind in dra.LIST_VALUE_FIELDS:
            raw = list(raw)
        attributes.setdefault(domain, {})[ident] = raw
    capacity: dict[str, dict[str, Any]] = {}
    for name, value in (device.get("capacity") or {}).items():
        domain, ident = dra.split_qualified_name(name, driver)
        capacity.setdefault(domain, {})[ident] = quantity(str(value.get("value")))
    for domain in domains:
        attributes.setdefault(domain, {})
        capacity.setdefault(domain, {})
    view = {
        "driver": driver,
        "attributes": attributes,
        "capacity": capacity,
        "allowMultipleAllocations": bool(device.get("allowMultipleAllocations")),
    }
    return {"cel": view}
