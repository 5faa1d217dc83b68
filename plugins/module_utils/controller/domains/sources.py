# SPDX-License-Identifier: Apache-2.0
"""Each node's domains read from what the cluster publishes: node labels and DRA device attributes.

A site whose levels name a ``source`` or a preset
(:mod:`controller.domains.level_specs`) reads them from the cluster's Node
and ResourceSlice objects, from where ``aligned_dra_placement_cluster`` says:

``{source: cluster, kubeconfig, context}`` (the API server, through the
``kubernetes`` client) or ``{source: files, node_files: [...], slice_files:
[...]}`` (YAML or JSON files: documents, lists or ``List`` objects, as
``kubectl get nodes -o yaml`` writes them; for GitOps sites and tests).

- :func:`check_cluster_setting` checks that setting against the levels;
- :func:`load_files` reads the files, :func:`api_client` and
  :func:`read_cluster` the API server (a thin list of Nodes and
  ResourceSlices through an already-built client); :func:`read_objects`
  does what the setting says (the placement filter and the validation);
- :func:`sourced_placement` gives the site placement
  :func:`levels.site_placement` gives for the inventory form
  (``{"levels", "domains", "node_names"}``, plus ``sources``: every level's
  entry, which :func:`levels.node_labels` reads to write no label the cluster
  already has), with every problem, each naming host (and its node where the
  names differ), level and value: a node in scope without a value (for
  ``nvidia.com/gpu.clique``: the NVLink fabric is not ready on it), a value
  that is not a label value (over 63 characters: device attributes may hold
  64), devices of one node disagreeing on an attribute, a domain inside two
  domains of the level above (unless the level composes ``parent.child``),
  and levels whose domains nest the other way round (fine before coarse).

A device attribute is the node's when every device of that driver on the
node that carries it says the same (devices without it, such as NICs the
cloud gives no topology, are passed over); only the newest generation of each
pool counts, and only slices of one node (``spec.nodeName``).

Controller-side; no Ansible imports.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from ansible_collections.aligned.dra.plugins.module_utils.controller.domains import level_specs, presets, shared
from ansible_collections.aligned.dra.plugins.module_utils.controller.inputs import site as inputs
from ansible_collections.aligned.dra.plugins.module_utils.dra.labels import label_value_problem

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

CLUSTER_VARIABLE = "aligned_dra_placement_cluster"
CLUSTER_KEYS = ("source", "kubeconfig", "context", "node_files", "slice_files")
CLUSTER_SOURCES = ("cluster", "files")
LABEL_VALUE_MAX = 63
NOT_SET = "(not set)"
NOT_READ = "(not read)"
_FABRIC_NOT_READY = f"the NVLink fabric is not ready on this node ({presets.CLIQUE_LABEL} is set once it is)"


@dataclass(frozen=True)
class Needs:
    """Which of the cluster's objects the levels read."""

    nodes: bool
    slices: bool

    @property
    def any(self) -> bool:
        return self.nodes or self.slices


def needs(specs: list[dict[str, Any]]) -> Needs:
    """What the checked levels read: Nodes for node labels, ResourceSlices for device attributes."""
    kinds = {spec["source"] for spec in specs}
    return Needs(presets.NODE_LABEL in kinds, presets.DEVICE_ATTRIBUTE in kinds)


# -- where the objects come from -----------------------------------------------------------------


def check_cluster_setting(raw: Any, specs: list[dict[str, Any]], where: str = CLUSTER_VARIABLE) -> dict[str, Any]:
    """``aligned_dra_placement_cluster`` as ``{"source", "kubeconfig", "context", "node_files", "slice_files"}``.

    Raises :class:`shared.PlacementError` naming the field: not a mapping, an
    unknown key, a source other than ``cluster`` or ``files``, files with
    ``source: cluster`` or a kubeconfig with ``source: files``, and the files
    a level needs left out. Without levels read from the cluster the setting
    may be left out (then ``source`` is None).
    """
    wanted = needs(specs)
    if raw is None:
        if wanted.any:
            read = ", ".join(spec["name"] for spec in specs if spec["source"] != presets.INVENTORY)
            raise shared.PlacementError(
                f"{where}: levels {read} are read from the cluster; say where from: {{source: cluster}} "
                "(kubeconfig, context) or {source: files, node_files, slice_files}"
            )
        return {"source": None, "kubeconfig": None, "context": None, "node_files": [], "slice_files": []}
    if not isinstance(raw, dict):
        raise shared.PlacementError(f"{where}: must be a mapping with a source (got {type(raw).__name__})")
    level_specs.refuse_unknown(raw, CLUSTER_KEYS, where)
    source = raw.get("source")
    if source not in CLUSTER_SOURCES:
        hint = shared.did_you_mean(source, CLUSTER_SOURCES)
        raise shared.PlacementError(f"{where}.source: {source!r} is not cluster or files{hint}")
    out: dict[str, Any] = {"source": source}
    for key in ("kubeconfig", "context"):
        value = raw.get(key)
        if value is not None and (source != "cluster" or not isinstance(value, str) or not value):
            why = "a non-empty string" if source == "cluster" else "only for source cluster"
            raise shared.PlacementError(f"{where}.{key}: {why} (got {value!r})")
        out[key] = value
    for key, needed, what in (("node_files", wanted.nodes, "Nodes"), ("slice_files", wanted.slices, "ResourceSlices")):
        files = raw.get(key)
        if files is not None and source != "files":
            raise shared.PlacementError(f"{where}.{key}: only for source files (the cluster is read instead)")
        if source == "files" and needed and not files:
            raise shared.PlacementError(f"{where}.{key}: the levels read the {what}: list the files that hold them")
        if files is not None and (not isinstance(files, list) or not all(isinstance(f, str) and f for f in files)):
            raise shared.PlacementError(f"{where}.{key}: must be a list of file paths (got {files!r})")
        out[key] = list(files or [])
    return out


def load_files(setting: Mapping[str, Any], where: str = CLUSTER_VARIABLE) -> tuple[list[Any], list[Any]]:
    """``(nodes, slices)`` from a checked ``source: files`` setting; raises :class:`shared.PlacementError`."""
    found: dict[str, list[Any]] = {}
    for key, kind in (("node_files", "Node"), ("slice_files", "ResourceSlice")):
        field = f"{where}.{key}"
        objects: list[Any] = []
        try:
            for path in setting.get(key) or []:
                loaded = inputs.load_documents(path, field)
                for item in loaded:
                    if item.get("kind", kind) != kind:
                        raise inputs.InputError(f"{field}: {path} holds a {item.get('kind')}, not a {kind}")
                objects += loaded
            if kind == "ResourceSlice":
                inputs.check_slices(objects, field)
        except inputs.InputError as exc:
            raise shared.PlacementError(str(exc)) from None
        found[key] = objects
    return found["node_files"], found["slice_files"]


def api_client(setting: Mapping[str, Any]) -> Any:
    """A ``kubernetes`` ApiClient for a checked ``source: cluster`` setting (kubeconfig and context, else
    in-cluster, else the client's default kubeconfig)."""
    import kubernetes  # controller side, for source cluster only

    if setting.get("kubeconfig") or setting.get("context"):
        return kubernetes.config.new_client_from_config(
            config_file=setting.get("kubeconfig"), context=setting.get("context")
        )
    try:
        configuration = kubernetes.client.Configuration()
        kubernetes.config.load_incluster_config(client_configuration=configuration)
        return kubernetes.client.ApiClient(configuration)
    except kubernetes.config.ConfigException:
        return kubernetes.config.new_client_from_config()


def read_cluster(client: Any, wanted: Needs) -> tuple[list[Any] | None, list[Any] | None]:
    """``(nodes, slices)`` listed through ``client`` (None for what the levels do not read).

    The lists are read raw (``_preload_content=False``), so the objects are
    the API server's JSON, as from files. The client's errors propagate.
    """
    import kubernetes  # controller side, for source cluster only

    nodes = slices = None
    if wanted.nodes:
        response = kubernetes.client.CoreV1Api(client).list_node(_preload_content=False)
        nodes = json.loads(response.data).get("items") or []
    if wanted.slices:
        response = kubernetes.client.ResourceV1Api(client).list_resource_slice(_preload_content=False)
        slices = json.loads(response.data).get("items") or []
    return nodes, slices


def read_objects(
    raw_setting: Any, specs: list[dict[str, Any]], where: str = CLUSTER_VARIABLE
) -> tuple[list[Any] | None, list[Any] | None]:
    """``(nodes, slices)`` the checked levels read, from where ``aligned_dra_placement_cluster`` says.

    Levels of the inventory only: ``(None, None)``, nothing read. Raises
    :class:`shared.PlacementError` naming the setting: a bad setting, a file
    that cannot be read, an API server that cannot be reached or refuses.
    """
    setting = check_cluster_setting(raw_setting, specs, where)
    wanted = needs(specs)
    if not wanted.any:
        return None, None
    if setting["source"] == "files":
        nodes, slices = load_files(setting, where)
        return (nodes if wanted.nodes else None), (slices if wanted.slices else None)
    try:
        return read_cluster(api_client(setting), wanted)
    except Exception as exc:  # the client's errors: configuration, connection, HTTP status
        reason = " ".join(str(exc).split())[:300] or type(exc).__name__
        raise shared.PlacementError(f"{where}: cannot read the cluster's Nodes and ResourceSlices: {reason}") from None


# -- the cluster's objects, by node ---------------------------------------------------------------


class ClusterIndex:
    """Node labels by node name, and devices by (node, driver): the newest generation of each pool."""

    def __init__(self, nodes: list[Any] | None, slices: list[Any] | None) -> None:
        self.nodes_read = nodes is not None
        self.slices_read = slices is not None
        self.labels: dict[str, dict[str, Any]] = {}
        for node in nodes or []:
            meta = (node.get("metadata") or {}) if isinstance(node, dict) else {}
            if isinstance(meta.get("name"), str):
                self.labels[meta["name"]] = meta.get("labels") or {}
        self.devices: dict[tuple[str, str], list[dict[str, Any]]] = {}
        newest: dict[tuple[Any, Any], int] = {}
        local = []
        for item in slices or []:
            spec = (item.get("spec") or {}) if isinstance(item, dict) else {}
            pool = spec.get("pool") or {}
            key = (spec.get("driver"), pool.get("name"))
            generation = pool.get("generation") or 0
            newest[key] = max(newest.get(key, generation), generation)
            if isinstance(spec.get("nodeName"), str) and isinstance(spec.get("driver"), str):
                local.append((key, generation, spec))
        for key, generation, spec in local:
            if generation == newest[key]:
                found = self.devices.setdefault((spec["nodeName"], spec["driver"]), [])
                found += [device for device in spec.get("devices") or [] if isinstance(device, dict)]


def _attribute_value(device: Mapping[str, Any], driver: str, name: str) -> Any:
    """The device's attribute ``name`` (qualified), also where the slice writes it without the driver's domain."""
    attributes = device.get("attributes") or {}
    found = attributes.get(name)
    if found is None and name.startswith(driver + "/"):
        found = attributes.get(name[len(driver) + 1 :])
    return found


def _attribute_text(value: Any) -> tuple[str | None, str | None]:
    """``(value as a domain, None)`` or ``(None, why not)`` for one DRA attribute value."""
    if not isinstance(value, dict):
        return None, f"{value!r} is not a device attribute value"
    for kind in ("string", "version"):
        if isinstance(value.get(kind), str):
            return value[kind], None
    if isinstance(value.get("int"), int) and not isinstance(value.get("int"), bool):
        return str(value["int"]), None
    return None, f"{json.dumps(value, sort_keys=True)} is not a string, int or version attribute"


# -- reading one host ------------------------------------------------------------------------------


def describe(spec: Mapping[str, Any]) -> str:
    """Where a level is read from, as messages and the report say it."""
    if spec["source"] == presets.NODE_LABEL:
        return f"node label {spec['key']}"
    if spec["source"] == presets.DEVICE_ATTRIBUTE:
        return f"device attribute {presets.source_key(spec)} of driver {spec['driver']}"
    return f"{shared.PLACEMENT_VARIABLE}.{spec['name']}"


def _field(spec: Mapping[str, Any], host: str, node: str) -> str:
    if spec["source"] == presets.INVENTORY:
        return describe(spec)
    of_node = "" if node == host else f" of node {node}"
    return f"level {spec['name']} ({describe(spec)}{of_node})"


def _missing_reason(spec: Mapping[str, Any], names: str) -> str:
    if spec["nvlink"]:
        return _FABRIC_NOT_READY
    if spec["source"] == presets.INVENTORY:
        return f"every host needs a domain at every level (levels: {names})"
    return f"every node in scope needs a value at every level (levels: {names})"


def _read_label(spec: Mapping[str, Any], node: str, index: ClusterIndex) -> tuple[Any, str | None, str | None]:
    """``(value, shown, why not)`` of a node label level on ``node``."""
    if not index.nodes_read:
        return None, NOT_READ, f"the cluster's Nodes were not read ({CLUSTER_VARIABLE})"
    if node not in index.labels:
        return None, "(no such Node)", f"the cluster has no Node {node} ({inputs.NODE_NAME_VARIABLE} names it)"
    value = index.labels[node].get(spec["key"])
    return (None, NOT_SET, "") if value in (None, "") else (value, None, None)


def _read_attribute(spec: Mapping[str, Any], node: str, index: ClusterIndex) -> tuple[Any, str | None, str | None]:
    """``(value, shown, why not)`` of a device attribute level on ``node``: every device that has it agrees."""
    driver = spec["driver"]
    if not index.slices_read:
        return None, NOT_READ, f"the cluster's ResourceSlices were not read ({CLUSTER_VARIABLE})"
    devices = index.devices.get((node, driver))
    if not devices:
        return None, "(no devices)", f"the node publishes no device of driver {driver} in a ResourceSlice"
    name = presets.source_key(spec) or ""
    said: dict[str, list[str]] = {}
    for device in devices:
        raw = _attribute_value(device, driver, name)
        if raw is None:
            continue
        text, why = _attribute_text(raw)
        if why:
            return None, shared.shown(raw), f"device {device.get('name')}: {why}"
        said.setdefault(str(text), []).append(str(device.get("name")))
    if not said:
        return None, NOT_SET, ""
    if len(said) > 1:
        parts = "; ".join(f"{', '.join(sorted(devs))} {value!r}" for value, devs in sorted(said.items()))
        reason = f"the devices of driver {driver} on the node disagree ({parts}); a node is in one domain"
        return None, shared.shown(sorted(said)), reason
    return next(iter(said)), None, None


def _value_problem(value: Any) -> str | None:
    """Why ``value`` cannot be a domain (a node label value), or None."""
    if isinstance(value, str) and len(value) > LABEL_VALUE_MAX:
        return (
            f"{len(value)} characters: a node label value holds at most {LABEL_VALUE_MAX} (a device attribute may "
            "hold 64)"
        )
    return label_value_problem(value)


def _inventory_problems(
    host: str, raw: Any, specs: list[dict[str, Any]], names: str
) -> tuple[dict[str, Any], list[shared.HostProblem]]:
    """The host's ``aligned_dra_placement`` where some levels are read from the cluster."""
    if raw is None:
        raw = {}
    field = shared.PLACEMENT_VARIABLE
    if not isinstance(raw, dict):
        return {}, [shared.HostProblem(host, field, shared.shown(raw), "must map each level name to the host's domain")]
    by_name = {spec["name"]: spec for spec in specs}
    problems = []
    for key in sorted(set(raw) - {s["name"] for s in specs if s["source"] == presets.INVENTORY}, key=str):
        if key in by_name:
            reason = f"level {key} is read from the {describe(by_name[key])}; leave it out of {field}"
        else:
            reason = f"the site declares no level {key!r}{shared.did_you_mean(key, by_name)} (levels: {names})"
        problems.append(shared.HostProblem(host, f"{field}.{key}", shared.shown(raw[key]), reason))
    return raw, problems


def _host_row(
    host: str, node: str, raw: Any, specs: list[dict[str, Any]], index: ClusterIndex
) -> tuple[dict[str, Any], list[shared.HostProblem]]:
    """One host's domain per level (None where missing or wrong), composed where a level says so."""
    names = ", ".join(spec["name"] for spec in specs)
    own, problems = _inventory_problems(host, raw, specs, names)
    row: dict[str, Any] = {}
    parent: Any = None
    for spec in specs:
        field = _field(spec, host, node)
        if spec["source"] == presets.INVENTORY:
            value = own.get(spec["name"])
            shown, why = (NOT_SET, "") if value is None else (None, None)
        elif spec["source"] == presets.NODE_LABEL:
            value, shown, why = _read_label(spec, node, index)
        else:
            value, shown, why = _read_attribute(spec, node, index)
        if why is not None:
            problems.append(shared.HostProblem(host, field, str(shown), why or _missing_reason(spec, names)))
            value = None
        elif spec["compose"]:
            value = None if parent is None else f"{parent}.{value}"
        if value is not None:
            problem = _value_problem(value)
            if problem:
                composed = " (composed parent.child)" if spec["compose"] else ""
                problems.append(shared.HostProblem(host, field, shared.shown(value), problem + composed))
                value = None
        row[spec["name"]] = parent = value
    return row, problems


# -- the site --------------------------------------------------------------------------------------


def _nesting(specs: list[dict[str, Any]], domains: dict[str, dict[str, Any]]) -> list[shared.HostProblem]:
    """A domain in two domains of the level above, or levels whose domains nest the other way round."""
    problems = []
    for upper, lower in zip(specs, specs[1:]):
        if lower["compose"]:
            continue  # parent.child: inside one parent by construction
        up, low = upper["name"], lower["name"]
        parents: dict[str, dict[str, list[str]]] = {}
        children: dict[str, set[str]] = {}
        for host, row in domains.items():
            if row[up] is not None and row[low] is not None:
                parents.setdefault(row[low], {}).setdefault(row[up], []).append(host)
                children.setdefault(row[up], set()).add(row[low])
        split = {domain: by for domain, by in parents.items() if len(by) > 1}
        if not split:
            continue
        if all(len(inside) == 1 for inside in children.values()) and len(children) > len(parents):
            reason = (
                f"the levels are not coarse → fine: each of the {len(children)} {up} domains sits inside one of the "
                f"{len(parents)} {low} domains; list {low} before {up}"
            )
            shown = f"{up} ({describe(upper)}) before {low} ({describe(lower)})"
            hosts = sorted(domains)
            problems += [shared.HostProblem(host, f"{shared.LEVELS_VARIABLE}", shown, reason) for host in hosts]
            continue
        for domain, by_parent in sorted(split.items()):
            where = " and ".join(f"{up} {p} ({shared.who(hosts)})" for p, hosts in sorted(by_parent.items()))
            reason = (
                f"{low} {domain} is in {where}; a domain sits inside one domain of the level above (where {low} "
                f"values are unique only inside their {up}, set compose: true on level {low})"
            )
            for hosts in by_parent.values():
                problems += [shared.HostProblem(h, f"level {low} ({describe(lower)})", domain, reason) for h in hosts]
    return problems


def sourced_placement(
    levels: Any,
    per_host: Mapping[str, Any],
    node_names: Mapping[str, str],
    nodes: list[Any] | None = None,
    slices: list[Any] | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """The site placement of levels in the preset or source form, and its problems (sentences).

    ``levels`` as the inventory gives them (:func:`level_specs.check_level_specs`
    raises :class:`shared.PlacementError` for bad ones); ``per_host`` each
    host's ``aligned_dra_placement`` (the inventory levels' domains);
    ``node_names`` ``{host: Kubernetes node name}`` (the host where none);
    ``nodes`` and ``slices`` the cluster's Node and ResourceSlice objects
    (None: not read, a problem for every level that reads them). Returns
    ``({"levels", "domains", "node_names", "sources"}, problems)`` with
    ``levels``, ``domains`` and ``node_names`` as :func:`levels.site_placement`
    gives them, ``sources`` the full level entries.
    """
    result, found = sourced_problems(levels, per_host, node_names, nodes, slices)
    return result, shared.group_problems(found)


def sourced_problems(
    levels: Any,
    per_host: Mapping[str, Any],
    node_names: Mapping[str, str],
    nodes: list[Any] | None = None,
    slices: list[Any] | None = None,
) -> tuple[dict[str, Any], list[shared.HostProblem]]:
    """:func:`sourced_placement` with its problems one per host (the validation's form)."""
    specs = level_specs.check_level_specs(levels)
    index = ClusterIndex(nodes, slices)
    names = {host: str(node_names.get(host) or host) for host in per_host}
    domains: dict[str, dict[str, Any]] = {}
    found: list[shared.HostProblem] = []
    for host in sorted(per_host):
        domains[host], problems = _host_row(host, names[host], per_host[host], specs, index)
        found += problems
    found += _nesting(specs, domains)
    if specs:
        found += shared.node_name_problems(names)
    return {"levels": level_specs.levels_of(specs), "domains": domains, "node_names": names, "sources": specs}, found
