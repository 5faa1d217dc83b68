# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""What the controller needs for a run, and whether it has it.

The one list of the collection's run-time dependencies: ``requirements.txt``
(pip) and ``galaxy.yml`` (collections) say the same, and a test keeps them in
step with :data:`PYTHON` and :data:`COLLECTIONS`. Which of them a run needs
depends on its settings (:func:`features`): rendering and planning claims
needs CEL and the Kubernetes schemas, anything that talks to a cluster needs
the ``kubernetes`` client and ``kubernetes.core``, reading GPU use from
Prometheus needs ``requests``, host-mode driver installs build wheels with the
controller's pip.

Standard library only: the preflight module imports it before anything else
can fail on a missing package.
"""

from __future__ import annotations

import importlib.util
import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping
    from typing import Any

try:
    from importlib import metadata as _metadata
except ImportError:  # pragma: no cover - Python < 3.8
    _metadata = None

# feature -> what it is, in the words of the error message
FEATURES = {
    "render": "rendering, validating and planning DeviceClasses and claim templates (claims, teams, utilization, placement, what_if)",
    "cluster": "talking to a Kubernetes API server (apply, plan from the cluster, utilization, drain)",
    "wheelhouse": "building the driver's wheelhouse on the controller (host-mode driver install)",
    "prometheus": "reading GPU use from Prometheus's HTTP API (utilization, aligned_dra_usage.prometheus)",
}

# Python distributions: name, import name, version specifier, features, interpreter.
# "modules": the interpreter that runs the collection's modules on localhost;
# "playbook": the interpreter running ansible-playbook itself.
PYTHON = (
    {
        "name": "cel-expr-python",
        "import": "cel_expr_python",
        "version": ">=0.1.3",
        "features": ["render"],
        "interpreter": "modules",
    },
    {
        "name": "kubernetes-validate",
        "import": "kubernetes_validate",
        # Raised to the newest minor of the run's sites (see requirements_for).
        "version": ">=1.34.0",
        "features": ["render"],
        "interpreter": "modules",
    },
    {
        "name": "kubernetes",
        "import": "kubernetes",
        # ResourceV1Api (resource.k8s.io/v1) first shipped in 34.1.0.
        "version": ">=34.1.0",
        "features": ["cluster"],
        "interpreter": "modules",
    },
    {
        "name": "requests",
        "import": "requests",
        # The HTTP client of the usage source's Prometheus queries (also a dependency of kubernetes).
        "version": ">=2.31",
        "features": ["prometheus"],
        "interpreter": "modules",
    },
    {
        "name": "pip",
        "import": "pip",
        "version": ">=23.0",
        "features": ["wheelhouse"],
        "interpreter": "playbook",
    },
)

COLLECTIONS = ({"name": "kubernetes.core", "version": ">=5.0.0", "features": ["cluster"]},)

ANSIBLE_CORE = ">=2.20.0"


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on", "y")
    return bool(value)


# A setting that turns a feature on: (stage, variable, role default, predicate).
_TRIGGERS = (
    ("network", "aligned_dra_kubeconfig", "", bool, "cluster"),
    ("driver", "aligned_dra_driver_kubeconfig", "", bool, "cluster"),
    ("claims", "aligned_dra_claims", {}, lambda v: True, "render"),
    ("claims", "aligned_dra_claims_apply", False, _truthy, "cluster"),
    ("claims", "aligned_dra_claims_plan_source", "topology", lambda v: v == "cluster", "cluster"),
    ("teams", "aligned_dra_teams", {}, bool, "render"),
    ("teams", "aligned_dra_teams_apply", False, _truthy, "cluster"),
    ("utilization", "aligned_dra_utilization_source", "none", lambda v: v not in ("none", ""), "render"),
    ("utilization", "aligned_dra_utilization_source", "none", lambda v: v == "cluster", "cluster"),
    (
        "utilization",
        "aligned_dra_usage",
        {},
        lambda v: isinstance(v, dict) and v.get("prometheus") not in (None, ""),
        "prometheus",
    ),
    ("placement", "aligned_dra_jobs", [], bool, "render"),
    ("placement", "aligned_dra_placement_apply", False, _truthy, "cluster"),
    ("placement", "aligned_dra_jobs_apply", False, _truthy, "cluster"),
    # levels read from the API server (the validation reads it too)
    (
        "placement",
        "aligned_dra_placement_cluster",
        None,
        lambda v: isinstance(v, dict) and v.get("source") == "cluster",
        "cluster",
    ),
    ("what_if", "aligned_dra_what_if_site", "", lambda v: True, "render"),
)

STAGES = ("network", "driver", "claims", "teams", "utilization", "placement", "replay", "what_if")

_SPEC = re.compile(r"^\s*(>=|<=|==|!=|>|<)\s*([0-9][0-9A-Za-z.+-]*)\s*$")


class PreflightError(ValueError):
    """A specifier or setting this module cannot read."""


def release(version: str) -> tuple[int, ...]:
    """The numeric release of a version string: ``"37.0.2"`` -> ``(37, 0, 2)``, ``"2.21.0rc1"`` -> ``(2, 21, 0)``."""
    parts = []
    for piece in str(version).strip().lstrip("vV").split("."):
        digits = re.match(r"\d+", piece)
        if not digits:
            break
        parts.append(int(digits.group()))
        if digits.end() != len(piece):
            break
    if not parts:
        raise PreflightError(f"version {version!r} has no numeric release")
    return tuple(parts)


def _padded(left: tuple[int, ...], right: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    width = max(len(left), len(right))
    return left + (0,) * (width - len(left)), right + (0,) * (width - len(right))


def satisfies(version: str, specifier: str) -> bool:
    """Whether ``version`` meets every clause of ``specifier`` (``">=1.2,<3"``; release numbers only)."""
    have = release(version)
    for clause in filter(None, (c.strip() for c in specifier.split(","))):
        match = _SPEC.match(clause)
        if not match:
            raise PreflightError(f"version specifier {clause!r} is not one of >=, <=, ==, !=, >, < and a version")
        op, bound = match.group(1), release(match.group(2))
        left, right = _padded(have, bound)
        ok = {
            ">=": left >= right,
            "<=": left <= right,
            "==": left == right,
            "!=": left != right,
            ">": left > right,
            "<": left < right,
        }[op]
        if not ok:
            return False
    return True


def features(hosts: Iterable[str], lookup: Callable[[str, str, Any], Any], stages: Iterable[str]) -> dict[str, str]:
    """Features a run needs -> the first setting that asks for it (``"aligned_dra_claims_apply on node-1"``).

    ``lookup(host, variable, default)`` reads one host's variable; ``stages`` are the stages the
    playbook runs. A feature is reported once, for the first host (in the given order) that needs it.
    """
    wanted = set(stages)
    unknown = wanted - set(STAGES) - {"probe", "report"}
    if unknown:
        raise PreflightError(f"unknown stage(s) {sorted(unknown)}; known: {['probe', *STAGES, 'report']}")
    found: dict[str, str] = {}
    for stage, variable, default, predicate, feature in _TRIGGERS:
        if stage not in wanted or feature in found:
            continue
        if stage == "what_if":
            found[feature] = "the what_if playbook"
            continue
        for host in hosts:
            if predicate(lookup(host, variable, default)):
                found[feature] = (
                    f"the claims stage ({host})" if variable == "aligned_dra_claims" else f"{variable} on {host}"
                )
                break
    if "driver" in wanted:
        for host in hosts:
            if (
                lookup(host, "aligned_dra_driver_state", "present") == "present"
                and lookup(host, "aligned_dra_driver_mode", "host") == "host"
                and lookup(host, "aligned_dra_driver_source", "wheelhouse") == "wheelhouse"
            ):
                found.setdefault("wheelhouse", f"aligned_dra_driver_mode host on {host}")
                break
    return found


def requirements_for(needed: Iterable[str], minors: Iterable[str] = ()) -> dict[str, list[dict[str, Any]]]:
    """The Python packages and collections the ``needed`` features ask for.

    ``minors`` are the sites' Kubernetes minors: kubernetes-validate must know the newest one's schema.
    """
    needed = set(needed)
    newest = max((release(m)[:2] for m in minors), default=None)
    python = []
    for item in PYTHON:
        if needed.intersection(item["features"]):
            item = dict(item, features=sorted(needed.intersection(item["features"])))
            if item["name"] == "kubernetes-validate" and newest is not None and newest > release("1.34"):
                item["version"] = f">={newest[0]}.{newest[1]}.0"
            python.append(item)
    collections = [
        dict(item, features=sorted(needed.intersection(item["features"])))
        for item in COLLECTIONS
        if needed.intersection(item["features"])
    ]
    return {"python": python, "collections": collections}


def installed_version(distribution: str, import_name: str) -> tuple[str | None, str | None]:
    """``(version, None)`` when the distribution is installed and importable, else ``(None, why)``."""
    if _metadata is None:  # pragma: no cover
        return None, "importlib.metadata is unavailable"
    try:
        version = _metadata.version(distribution)
    except _metadata.PackageNotFoundError:
        return None, "not installed"
    try:
        found = importlib.util.find_spec(import_name) is not None
    except (ImportError, ValueError) as exc:
        return None, f"installed ({version}) but cannot be imported: {exc}"
    if not found:
        return None, f"installed ({version}) but module {import_name} is not importable"
    return version, None


def run(items: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The ``preflight`` module's work: every entry names its ``name``, ``import`` and ``version``
    (:class:`PreflightError` says which it lacks), then :func:`check_python`."""
    items = list(items)
    for item in items:
        missing = [key for key in ("name", "import", "version") if not item.get(key)]
        if missing:
            raise PreflightError(f"entry {item!r} lacks {', '.join(missing)}")
    return check_python(items)


def check_python(items: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each required package with ``found`` (version or None) and ``problem`` (None when satisfied)."""
    results = []
    for item in items:
        version, why = installed_version(item["name"], item["import"])
        problem = why
        if version is not None and not satisfies(version, item["version"]):
            problem = f"version {version} does not satisfy {item['version']}"
        results.append(dict(item, found=version, problem=problem))
    return results


def check_collection(item: Mapping[str, Any], version: str | None) -> dict[str, Any]:
    """One required collection given the installed version (None: not installed)."""
    if version is None:
        problem = "not installed"
    elif version in ("", "*") or not re.match(r"\d", version):
        problem = None  # a checkout without a version (development): accept it
    elif not satisfies(version, item["version"]):
        problem = f"version {version} does not satisfy {item['version']}"
    else:
        problem = None
    return dict(item, found=version, problem=problem)


def report(
    python: Iterable[Mapping[str, Any]],
    collections: Iterable[Mapping[str, Any]],
    reasons: Mapping[str, str],
    interpreters: Mapping[str, str],
) -> str | None:
    """One message naming everything missing and the exact lines that install it; None when nothing is."""
    lines = []
    pip_lines: dict[str, list[str]] = {}
    galaxy: list[str] = []
    for item in python:
        if item.get("problem"):
            interpreter = interpreters.get(item["interpreter"], "python3")
            why = "; ".join(f"{FEATURES[f]}, asked for by {reasons.get(f, 'this playbook')}" for f in item["features"])
            lines.append(
                f"- Python package {item['name']}{item['version']} for {interpreter}: {item['problem']} (needed for {why})"
            )
            pip_lines.setdefault(interpreter, []).append(f"'{item['name']}{item['version']}'")
    for item in collections:
        if item.get("problem"):
            why = "; ".join(f"{FEATURES[f]}, asked for by {reasons.get(f, 'this playbook')}" for f in item["features"])
            lines.append(f"- collection {item['name']}{item['version']}: {item['problem']} (needed for {why})")
            galaxy.append(f"'{item['name']}:{item['version']}'")
    if not lines:
        return None
    install = [f"{interpreter} -m pip install {' '.join(pkgs)}" for interpreter, pkgs in pip_lines.items()]
    if galaxy:
        install.append(f"ansible-galaxy collection install {' '.join(galaxy)}")
    return (
        "aligned.dra preflight: the controller lacks what this run needs; nothing was changed.\n"
        + "\n".join(lines)
        + "\nInstall with:\n"
        + "\n".join(f"  {line}" for line in install)
        + "\n(offline: see docs/install.md, 'Air-gapped install')"
    )
