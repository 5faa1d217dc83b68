# SPDX-License-Identifier: Apache-2.0
"""A site's planner input, loaded from the options of the modules that plan (``plan``, ``jobs``).

The modules take the site's devices as probed topologies (inline, a
directory, or one file per node), or as ResourceSlices (inline or files),
plus the rendered objects and the site's rail rules. This turns those
options into what :func:`plan.plan` and :func:`jobs.place_jobs` take
(planner nodes, DeviceClasses, claim templates) and the accounting of the
nodes left out. Every problem raises :class:`InputError` whose message
names the option (and the node, the file, the path inside it), and nothing
is changed anywhere: the modules only turn it into ``fail_json``.

``params`` is the module's parameters; the options read are those of the
``plan`` module (``objects``, ``topologies``, ``topology_dir``,
``topology_files``, ``slices``, ``slice_files``, ``device_options``,
``nodes_failed``, ``node_counts``, ``rail_rules``, ``rail_rule``,
``rail_node_names``, ``rail_addresses``, ``kubernetes_version``,
``feature_gates``, ``mig``); one a module does not have reads as not given. The minor
and the gates decide whether the GPUs of probed topologies are shareable, as
the driver publishes them there (:func:`shares_gpus`); ``mig`` (node -> its
``aligned_dra_mig``) publishes the GPUs MIG takes as the driver does
(:func:`planner.nodes_from_topologies`).

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ansible_collections.aligned.dra.plugins.module_utils.controller.inputs import site as inputs
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import model_store
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import plan as planner
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import rails as plan_rails
from ansible_collections.aligned.dra.plugins.module_utils.dra import gates as dra_gates
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra
from ansible_collections.aligned.dra.plugins.module_utils.dra.cel import CelError
from ansible_collections.aligned.dra.plugins.module_utils.json_file import read_json_dir

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

InputError = inputs.InputError

# The options that give the site's devices, which the plan and jobs modules take alike (:func:`load_site`).
DEVICE_SOURCE_SPEC: dict[str, dict[str, Any]] = {
    "topologies": {"type": "dict"},
    "topology_dir": {"type": "path"},
    "topology_files": {"type": "dict"},
    "slices": {"type": "list", "elements": "dict"},
    "slice_files": {"type": "list", "elements": "path"},
    "device_options": {"type": "dict", "default": {}},
}
DEVICE_SOURCE_EXCLUSIVE = [("slices", "slice_files"), ("topologies", "topology_files")]

# options whose absence means "empty" (the plan module's defaults)
_EMPTY_DEFAULTS = {
    "device_options": dict,
    "nodes_failed": dict,
    "rail_rules": dict,
    "rail_node_names": dict,
    "rail_addresses": dict,
    "mig": dict,
}


def _option(params: Mapping[str, Any], name: str) -> Any:
    value = params.get(name)
    if value is None and name in _EMPTY_DEFAULTS:
        return _EMPTY_DEFAULTS[name]()
    return value


@dataclass
class SiteInput:
    """What the planner takes, once every option is checked.

    ``accounted``: the plan's ``nodes_failed`` and ``node_counts``
    (:func:`plan.node_accounting`); ``warnings``: the rail problems of the
    input, for the plan's ``warnings``.
    """

    nodes: dict[str, dict[str, Any]]
    classes: list[dict[str, Any]]
    templates: list[dict[str, Any]]
    accounted: dict[str, Any]
    warnings: list[str] = field(default_factory=list)


def read_topology(node: str, path: str) -> dict[str, Any]:
    """One node's topology from its file; an unreadable file names the option, the node and the file."""
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, TypeError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise InputError(f"topology_files.{node}: cannot read {path}: {reason}") from None


def topology_source(params: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None, str]:
    """``(topologies, topology_files, option)``: the site's topologies without its failed nodes (from
    ``topology_files``, only which nodes: they are read one at a time), and the option that gave them."""
    failed = _option(params, "nodes_failed")
    topologies = params.get("topologies")
    files = params.get("topology_files")
    topology_field = "topologies" if topologies is not None else "topology_dir"
    if files is not None:
        topology_field = "topology_files"
        # read one node at a time, later: here only which nodes they are
        topologies = {str(name): None for name in files if name not in failed}
    elif topologies is None:
        try:
            topologies = read_json_dir(params.get("topology_dir")) if params.get("topology_dir") else {}
        except ValueError as exc:
            raise InputError(f"topology_dir: {exc}") from None
    # a failed node is never planned on, whatever facts or file (of an earlier run) it has
    topologies = {name: t for name, t in topologies.items() if name not in failed}
    return topologies, files, topology_field


def checked_inputs(
    params: Mapping[str, Any], topologies: dict[str, Any], files: dict[str, Any] | None, topology_field: str
) -> tuple[dict[str, Any], list[dict[str, Any]] | None]:
    """``(topologies, slices)`` once the objects, topologies and slices are checked; slice files are read here."""
    slices = params.get("slices")
    slice_files = params.get("slice_files")
    inputs.check_objects(params.get("objects"), "objects")
    if files is None:
        inputs.check_topologies(topologies, topology_field)
    elif slices is not None or slice_files:
        # slices: the topologies only add the levels; all of them are read here
        topologies = {node: read_topology(node, files[node]) for node in sorted(topologies)}
        inputs.check_topologies(topologies, topology_field)
    if slice_files:
        slices = []
        for path in slice_files:
            slices.extend(inputs.load_documents(path, "slice_files"))
    if slices is not None:
        inputs.check_slices(slices, "slice_files" if slice_files else "slices")
    return topologies, slices


def compiled_objects(objects: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(classes, templates)`` of the objects, which compile on their own first so that their errors name the option."""
    classes = [o for o in objects if o.get("kind") == "DeviceClass"]
    templates = [o for o in objects if o.get("kind") in ("ResourceClaimTemplate", "ResourceClaim")]
    try:
        compiler = planner.Compiler(classes)
        for template in templates:
            compiler.template(template)
    except (planner.PlanError, CelError) as exc:
        raise InputError(f"objects: {exc}") from None
    return classes, templates


def check_required(required: Iterable[str], templates: list[dict[str, Any]]) -> None:
    """Refuse required templates that ``objects`` does not hold, naming both options, before any node is read."""
    given = {(t.get("metadata") or {}).get("name") for t in templates}
    missing = sorted(set(required) - given)
    if missing:
        raise InputError(
            f"required: required templates that are not given: {', '.join(missing)} (not among the templates of objects)"
        )


def rails_of(
    params: Mapping[str, Any], rules: Mapping[str, Any], topologies: Mapping[str, Any], problems: list[str]
) -> dict[str, dict[str, int]]:
    """``{node: {PCI address: rail}}`` of the nodes with a rule and a topology; their problems added to ``problems``."""
    names = _option(params, "rail_node_names")
    addresses = _option(params, "rail_addresses")
    found = {}
    for node, topology in topologies.items():
        rails, node_problems = plan_rails.node_rails(
            node, topology, rules.get(node), names.get(node), addresses.get(node)
        )
        if rails:
            found[node] = rails
        problems.extend(f"rails: {problem}" for problem in node_problems)
    return found


def shares_gpus(params: Mapping[str, Any]) -> bool:
    """Whether the site's GPUs are published shareable: its minor serves consumable capacity
    (:func:`dra_gates.shares_gpus`, with ``feature_gates``); False without ``kubernetes_version``."""
    version = params.get("kubernetes_version")
    if not version:
        return False
    try:
        return dra_gates.shares_gpus(str(version), params.get("feature_gates") or None)
    except dra.DeviceModelError as exc:
        raise InputError(str(exc)) from None


def planner_nodes(
    params: Mapping[str, Any],
    slices: list[dict[str, Any]] | None,
    topologies: dict[str, Any],
    files: dict[str, Any] | None,
    topology_field: str,
    rules: Mapping[str, Any],
    problems: list[str],
) -> dict[str, dict[str, Any]]:
    """The planner's nodes, from the slices or else the topologies (topology files read one node at a time).

    ``rules``: each node's rail rule; the rail problems found go into ``problems``. GPUs of
    topologies are shareable where the site's minor serves consumable capacity (:func:`shares_gpus`).
    """
    if slices is None and not topologies:
        raise InputError("topologies, topology_files, topology_dir, slices or slice_files must give the site's devices")
    options = _option(params, "device_options")
    shareable = shares_gpus(params) if slices is None else False
    mig = mig_settings(params)
    try:
        if slices is not None:
            rails = rails_of(params, rules, topologies or {}, problems)
            return planner.nodes_from_slices(slices, topologies, rails, mig=mig)
        if files is None:
            rails = rails_of(params, rules, topologies, problems)
            return planner.nodes_from_topologies(topologies, options, rails=rails, shareable_gpus=shareable, mig=mig)
        # built by an earlier stage of this run from the same files and options (model_store): taken
        name = model_store.key({n: _option(params, n) for n in model_store.BUILT_FROM}, files, topologies)
        kept = model_store.take(name)
        if kept is not None:
            problems.extend(kept["problems"])
            return kept["nodes"]
        nodes = {}
        shared: dict[tuple, Any] = {}  # attribute values the site's nodes repeat, held once
        found: list[str] = []
        for node in sorted(topologies):
            one = {node: read_topology(node, files[node])}
            inputs.check_topologies(one, topology_field)
            rails = rails_of(params, rules, one, found)
            nodes.update(
                planner.nodes_from_topologies(
                    one, options, shared=shared, rails=rails, shareable_gpus=shareable, mig=mig
                )
            )
        problems.extend(found)
        model_store.keep(name, {"nodes": nodes, "problems": found})
        return nodes
    except (planner.PlanError, dra.DeviceModelError) as exc:
        message = str(exc)
        source = ("slice_files" if params.get("slice_files") else "slices") if slices is not None else topology_field
        raise InputError(
            message if message.startswith(("device_options", "mig.")) else f"{source}: {message}"
        ) from None


def mig_settings(params: Mapping[str, Any]) -> dict[str, Any]:
    """``mig`` (node -> its ``aligned_dra_mig``, as the filter ``aligned.dra.mig_settings`` builds it), checked
    to be a mapping of mappings; ``{}`` when not given (no MIG)."""
    mig = _option(params, "mig")
    if not isinstance(mig, dict):
        raise InputError(f"mig: a mapping of node to its aligned_dra_mig, not {type(mig).__name__}")
    for node, settings in mig.items():
        if settings is not None and not isinstance(settings, dict):
            raise InputError(f"mig.{node}: aligned_dra_mig must be a mapping, not {type(settings).__name__}")
    return mig


def load_site(params: Mapping[str, Any], required: Iterable[str] | None = None) -> SiteInput:
    """Every input of the site, checked in order: the topologies' source, the nodes' accounting, the
    objects and devices' shapes, the objects compiled, ``required`` (templates that must be given; not
    checked when None), the rail rules, then the planner's nodes."""
    topologies, files, topology_field = topology_source(params)
    try:
        accounted = planner.node_accounting(
            sorted(topologies), _option(params, "nodes_failed"), params.get("node_counts")
        )
    except planner.PlanError as exc:
        raise InputError(str(exc)) from None
    topologies, slices = checked_inputs(params, topologies, files, topology_field)
    classes, templates = compiled_objects(params.get("objects") or [])
    if required is not None:
        check_required(required, templates)
    try:
        rules = plan_rails.node_rules(topologies, _option(params, "rail_rules"), params.get("rail_rule"))
    except planner.PlanError as exc:
        raise InputError(str(exc)) from None
    problems: list[str] = []
    nodes = planner_nodes(params, slices, topologies, files, topology_field, rules, problems)
    return SiteInput(nodes, classes, templates, accounted, problems)
