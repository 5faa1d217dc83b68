# SPDX-License-Identifier: Apache-2.0
"""The site inputs: which site and Kubernetes node a host is, and shape checks of the modules' free-form inputs.

A host's site (``aligned_dra_site``; :func:`site_of`) and its Kubernetes
node name (``aligned_dra_driver_node_name``; :func:`kubernetes_node_name`)
are read here, and only here, so the validation, the rails, the summaries and
the placement group hosts and key per-node settings the same way.

A site's settings are those of its first host (the site group's group_vars),
else the caller's default, never another host's: :func:`read_site_settings`
reads them, for the ``aligned.dra.site_settings`` lookup, by names it knows
(:data:`SITE_SETTINGS`, :data:`RUN_FACTS`).

Modules take Kubernetes objects (ResourceSlices, ResourceClaims,
DeviceClasses, claim templates) and probed topologies as plain lists and
dicts. The libraries that use them read nested keys and expect mappings and
lists where the API has them. These checks run first and raise
:class:`InputError` whose message names the option and the path inside it
(``slices[2].spec.devices[0].attributes: must be a mapping``), so a wrong
input fails cleanly instead of deep inside the planner.

Only the keys the libraries read are checked, and only their container types
and the names they need; full schema validation is the job of the rendering
path (``claims.validate``).

No Ansible imports; Python >= 3.9.
"""

from __future__ import annotations

from dataclasses import dataclass, field

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Collection, Mapping, Sequence
    from typing import Any


SITE_VARIABLE = "aligned_dra_site"
# The roles' default site (aligned_dra_site in their defaults): a host that sets none is in it.
DEFAULT_SITE = "default"
# Where a host's Kubernetes node name is set: the name the driver publishes under, which the
# driver's rails file, a per-node rail map (aligned_dra_rails.nodes) and the placement are keyed by.
NODE_NAME_VARIABLE = "aligned_dra_driver_node_name"
NODE_NAME_SETTINGS = (NODE_NAME_VARIABLE,)


class InputError(ValueError):
    """A free-form input has the wrong shape; the message names where."""


# The settings a stage reads once per site, from the site's first host: each is documented in the
# meta/argument_specs.yml of a role that reads it.
SITE_SETTINGS = (
    "aligned_dra_claims",
    "aligned_dra_claims_plan_source",
    "aligned_dra_claims_tolerations",
    "aligned_dra_device_options",
    "aligned_dra_feature_gates",
    "aligned_dra_fractional_burst",
    "aligned_dra_jobs",
    "aligned_dra_kubernetes_version",
    "aligned_dra_output_dir",
    "aligned_dra_placement_levels",
    "aligned_dra_rails",
    "aligned_dra_replay",
    "aligned_dra_teams",
    "aligned_dra_usage",
    "aligned_dra_utilization_claim_files",
    "aligned_dra_utilization_context",
    "aligned_dra_utilization_kubeconfig",
    "aligned_dra_utilization_slice_files",
    "aligned_dra_utilization_source",
)
# Facts an earlier stage of the run sets on the hosts, read for a site as its settings are: the sites
# the utilization stage measured in this run.
RUN_FACTS = ("aligned_dra_utilization_measured",)


class SiteSettingError(ValueError):
    """A site setting that is not known, or that is set nowhere; the message names it."""


@dataclass(frozen=True)
class Caller:
    """Where a site's settings are read: the task's values and whose they are.

    ``values`` are the variables the task sees (its role's defaults, the
    play's vars, and the inventory and facts of ``host``, the host it runs
    for); ``own`` names those whose value there is ``host``'s own inventory or
    fact value (:func:`own_names`); ``in_site`` says whether ``host`` is of
    the site; ``role_defaults`` are the calling role's defaults, None outside
    a role.
    """

    values: Mapping[str, Any]
    host: str = ""
    own: Collection[str] = field(default_factory=frozenset)
    in_site: bool = False
    role_defaults: Mapping[str, Any] | None = None


def own_names(names: Sequence[str], values: Mapping[str, Any], host_own: Mapping[str, Any]) -> frozenset[str]:
    """The ``names`` whose value in ``values`` (raw) is the host's own: its inventory or facts (``host_own``,
    raw) set it to the same value. A play's or role's value equal to the host's counts as the host's."""
    return frozenset(name for name in names if name in values and name in host_own and values[name] == host_own[name])


def _fallback(name: str, host: str, caller: Caller) -> Any:
    """The value of ``name``, which the site's first host ``host`` does not set, for ``caller``."""
    values = caller.values
    if name in values and name not in caller.own:
        return values[name]
    if caller.role_defaults is not None:
        if name in caller.role_defaults:
            return caller.role_defaults[name]
    elif name in values and caller.in_site:
        return values[name]
    if name in values:
        raise SiteSettingError(
            f"site settings: {name} is not set on {host} (the site's first host) and has no default here; "
            f"the value here is {caller.host}'s own (its inventory or facts), not the site's: set {name} for "
            "the site (its group_vars) or pass defaults="
        )
    raise SiteSettingError(
        f"site settings: {name} is set neither on {host} (the site's first host) nor here "
        "(no default of the role or the play)"
    )


def read_site_settings(
    names: Sequence[str],
    host: str,
    host_vars: Mapping[str, Any],
    context: Caller | Mapping[str, Any],
    defaults: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The settings ``names`` of the site whose first host is ``host``, as ``{name: value}`` in their order.

    A setting's value is ``host``'s (``host_vars``: its inventory, where the
    site group's group_vars are) when it has one, null included. Else
    ``defaults[name]`` when the caller gives one. Else the caller's
    (``context``, a :class:`Caller`; a plain mapping is a caller's values)
    own value - the role's default, the play's or the role's vars - unless
    that is the inventory or fact value of the host the task runs for (a
    host of another site, whose group_vars would leak into this one): then
    the role's default (``role_defaults``); outside a role, that host's value
    only when it is of the site. A name that is not in :data:`SITE_SETTINGS`
    or :data:`RUN_FACTS`, asked twice, a default for a name not asked for, a
    setting with no value anywhere and one whose only value is another
    site's host's raise :class:`SiteSettingError` naming it.
    """
    if isinstance(names, (str, bytes)):
        raise SiteSettingError(f"site settings: names must be a list of setting names (got {names!r})")
    known = SITE_SETTINGS + RUN_FACTS
    unknown = [name for name in names if name not in known]
    if unknown:
        raise SiteSettingError(
            f"site settings: unknown setting {', '.join(repr(name) for name in unknown)} (known: {', '.join(known)})"
        )
    twice = sorted({name for name in names if list(names).count(name) > 1})
    if twice:
        raise SiteSettingError(f"site settings: {', '.join(twice)} asked more than once")
    defaults = {} if defaults is None else defaults
    stray = sorted(name for name in defaults if name not in names)
    if stray:
        raise SiteSettingError(f"site settings: a default for {', '.join(stray)}, which is not asked for")
    caller = context if isinstance(context, Caller) else Caller(context)
    settings: dict[str, Any] = {}
    for name in names:
        if name in host_vars:
            settings[name] = host_vars[name]
        elif name in defaults:
            settings[name] = defaults[name]
        else:
            settings[name] = _fallback(name, host, caller)
    return settings


def site_of(settings: Mapping[str, Any]) -> str:
    """The site of a host with these variables: its ``aligned_dra_site``, :data:`DEFAULT_SITE` when unset, null or empty."""
    return str(settings.get(SITE_VARIABLE) or DEFAULT_SITE)


def kubernetes_node_name(host: str, settings: Mapping[str, Any]) -> str:
    """The Kubernetes node name of ``host``: the first of :data:`NODE_NAME_SETTINGS` set, else the host."""
    for name in NODE_NAME_SETTINGS:
        value = settings.get(name)
        if isinstance(value, str) and value:
            return value
    return host


def _mapping(value: Any, where: str, optional: bool = True) -> dict[str, Any]:
    if value is None and optional:
        return {}
    if not isinstance(value, dict):
        raise InputError(f"{where}: must be a mapping (got {type(value).__name__})")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InputError(f"{where}: must be a list (got {type(value).__name__})")
    return value


def _mappings(value: Any, where: str) -> list[dict[str, Any]]:
    items = _list(value, where)
    for index, item in enumerate(items):
        _mapping(item, f"{where}[{index}]", optional=False)
    return items


def _name(meta: dict[str, Any], where: str) -> None:
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise InputError(f"{where}.metadata.name: must be a non-empty string (got {name!r})")


def _selectors(value: Any, where: str) -> None:
    for index, selector in enumerate(_mappings(value, where)):
        cel = _mapping(selector.get("cel"), f"{where}[{index}].cel")
        expression = cel.get("expression")
        if not isinstance(expression, str):
            raise InputError(f"{where}[{index}].cel.expression: must be a string (got {expression!r})")


def _object(item: Any, where: str) -> tuple[dict[str, Any], dict[str, Any]]:
    obj = _mapping(item, where, optional=False)
    kind = obj.get("kind")
    if kind is not None and not isinstance(kind, str):
        raise InputError(f"{where}.kind: must be a string (got {kind!r})")
    meta = _mapping(obj.get("metadata"), f"{where}.metadata")
    spec = _mapping(obj.get("spec"), f"{where}.spec")
    _mapping(obj.get("status"), f"{where}.status")
    return meta, spec


def check_classes(items: Any, field: str) -> None:
    """DeviceClasses: a name and CEL selectors."""
    for index, item in enumerate(_list(items, field)):
        where = f"{field}[{index}]"
        meta, spec = _object(item, where)
        _name(meta, where)
        _selectors(spec.get("selectors"), f"{where}.spec.selectors")


def _requests(devices: dict[str, Any], where: str) -> None:
    for index, request in enumerate(_mappings(devices.get("requests"), f"{where}.requests")):
        at = f"{where}.requests[{index}]"
        alternatives = [(f"{at}.exactly", request.get("exactly"))] if request.get("exactly") is not None else []
        for sub_index, sub in enumerate(_mappings(request.get("firstAvailable"), f"{at}.firstAvailable")):
            alternatives.append((f"{at}.firstAvailable[{sub_index}]", sub))
        for sub_where, sub in alternatives:
            sub = _mapping(sub, sub_where, optional=False)
            name = sub.get("deviceClassName")
            if name is not None and not isinstance(name, str):
                raise InputError(f"{sub_where}.deviceClassName: must be a string (got {name!r})")
            _selectors(sub.get("selectors"), f"{sub_where}.selectors")
            _mappings(sub.get("tolerations"), f"{sub_where}.tolerations")
            _mapping(sub.get("capacity"), f"{sub_where}.capacity")
    for index, constraint in enumerate(_mappings(devices.get("constraints"), f"{where}.constraints")):
        at = f"{where}.constraints[{index}]"
        for key in ("matchAttribute", "distinctAttribute"):
            if constraint.get(key) is not None and not isinstance(constraint[key], str):
                raise InputError(f"{at}.{key}: must be a string (got {constraint[key]!r})")
        for name in _list(constraint.get("requests"), f"{at}.requests"):
            if not isinstance(name, str):
                raise InputError(f"{at}.requests: {name!r} is not a request name")


def check_objects(items: Any, field: str) -> None:
    """Rendered objects to plan: DeviceClasses, ResourceClaimTemplates and ResourceClaims."""
    for index, item in enumerate(_list(items, field)):
        where = f"{field}[{index}]"
        meta, spec = _object(item, where)
        kind = item.get("kind")
        if kind == "DeviceClass":
            _name(meta, where)
            _selectors(spec.get("selectors"), f"{where}.spec.selectors")
        elif kind in ("ResourceClaimTemplate", "ResourceClaim"):
            _name(meta, where)
            if kind == "ResourceClaimTemplate":
                spec = _mapping(spec.get("spec"), f"{where}.spec.spec")
                where = f"{where}.spec"
            _requests(_mapping(spec.get("devices"), f"{where}.spec.devices"), f"{where}.spec.devices")


def check_slices(items: Any, field: str) -> None:
    """ResourceSlices: node, driver, pool, devices with their attributes and capacity."""
    for index, item in enumerate(_list(items, field)):
        where = f"{field}[{index}]"
        meta, spec = _object(item, where)
        for key in ("nodeName", "driver"):
            if spec.get(key) is not None and not isinstance(spec[key], str):
                raise InputError(f"{where}.spec.{key}: must be a string (got {spec[key]!r})")
        pool = _mapping(spec.get("pool"), f"{where}.spec.pool")
        generation = pool.get("generation")
        if generation is not None and (isinstance(generation, bool) or not isinstance(generation, int)):
            raise InputError(f"{where}.spec.pool.generation: must be an integer (got {generation!r})")
        for set_index, counter_set in enumerate(_mappings(spec.get("sharedCounters"), f"{where}.spec.sharedCounters")):
            at = f"{where}.spec.sharedCounters[{set_index}]"
            for name, counter in _mapping(counter_set.get("counters"), f"{at}.counters").items():
                _mapping(counter, f"{at}.counters.{name}", optional=False)
        for dev_index, device in enumerate(_mappings(spec.get("devices"), f"{where}.spec.devices")):
            at = f"{where}.spec.devices[{dev_index}]"
            if not isinstance(device.get("name"), str) or not device.get("name"):
                raise InputError(f"{at}.name: must be a non-empty string (got {device.get('name')!r})")
            for key in ("attributes", "capacity"):
                for name, value in _mapping(device.get(key), f"{at}.{key}").items():
                    _mapping(value, f"{at}.{key}.{name}", optional=False)
            for key in ("consumesCounters", "taints"):
                _mappings(device.get(key), f"{at}.{key}")


def check_claims(items: Any, field: str) -> None:
    """ResourceClaims: name, namespace, requests and the allocation in their status."""
    for index, item in enumerate(_list(items, field)):
        where = f"{field}[{index}]"
        meta, spec = _object(item, where)
        _name(meta, where)
        namespace = meta.get("namespace")
        if namespace is not None and not isinstance(namespace, str):
            raise InputError(f"{where}.metadata.namespace: must be a string (got {namespace!r})")
        _requests(_mapping(spec.get("devices"), f"{where}.spec.devices"), f"{where}.spec.devices")
        status = _mapping(item.get("status"), f"{where}.status")
        _mappings(status.get("reservedFor"), f"{where}.status.reservedFor")
        allocation = _mapping(status.get("allocation"), f"{where}.status.allocation")
        devices = _mapping(allocation.get("devices"), f"{where}.status.allocation.devices")
        for res_index, result in enumerate(
            _mappings(devices.get("results"), f"{where}.status.allocation.devices.results")
        ):
            at = f"{where}.status.allocation.devices.results[{res_index}]"
            for key in ("driver", "pool", "device", "request"):
                if result.get(key) is not None and not isinstance(result[key], str):
                    raise InputError(f"{at}.{key}: must be a string (got {result[key]!r})")
            _mapping(result.get("consumedCapacity"), f"{at}.consumedCapacity")
            _list(result.get("consumers"), f"{at}.consumers")


def check_topologies(items: Any, field: str) -> None:
    """Probed topologies keyed by node: devices with a PCI address and kind, links, RDMA devices."""
    for node, topology in _mapping(items, field).items():
        where = f"{field}.{node}"
        topology = _mapping(topology, where, optional=False)
        for index, device in enumerate(_mappings(topology.get("devices"), f"{where}.devices")):
            at = f"{where}.devices[{index}]"
            for key in ("pci_address", "kind"):
                if not isinstance(device.get(key), str):
                    raise InputError(f"{at}.{key}: must be a string (got {device.get(key)!r})")
            numa = device.get("numa_node")
            if numa is not None and (isinstance(numa, bool) or not isinstance(numa, int)):
                raise InputError(f"{at}.numa_node: must be an integer or null (got {numa!r})")
            for key in ("netdevs", "rdma_devices", "bridges", "switches"):
                _list(device.get(key), f"{at}.{key}")
            _mappings(device.get("netdevs"), f"{at}.netdevs")
            for key in ("sriov", "gpu", "link"):
                _mapping(device.get(key), f"{at}.{key}")
        for gpu, row in _mapping(topology.get("links"), f"{where}.links").items():
            _mapping(row, f"{where}.links.{gpu}", optional=False)
        for index, rdma in enumerate(_mappings(topology.get("rdma_devices"), f"{where}.rdma_devices")):
            _mappings(rdma.get("ports"), f"{where}.rdma_devices[{index}].ports")
        for gpu, nearest in _mapping(topology.get("nearest_nics"), f"{where}.nearest_nics").items():
            _mapping(nearest, f"{where}.nearest_nics.{gpu}", optional=False)
        _mappings(topology.get("numa_nodes"), f"{where}.numa_nodes")
        _list(topology.get("warnings"), f"{where}.warnings")


def load_documents(path: str, field: str) -> list[Any]:
    """The objects of a YAML or JSON file: documents, lists of objects, or ``List`` objects.

    Raises :class:`InputError` naming ``field`` and the file when it cannot be
    read or parsed, or holds something other than objects.
    """
    import json

    import yaml  # controller side: PyYAML comes with ansible-core

    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        # libyaml's loader where PyYAML was built with it: three times faster on a dump of 1,000 Nodes
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        docs = [json.loads(text)] if path.endswith(".json") else [d for d in yaml.load_all(text, Loader=loader) if d]
    except (OSError, ValueError, yaml.YAMLError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc).splitlines()[0]
        raise InputError(f"{field}: cannot read {path}: {reason}") from None
    found: list[Any] = []
    for doc in docs:
        if isinstance(doc, dict) and str(doc.get("kind", "")).endswith("List"):
            items = doc.get("items") or []
            if not isinstance(items, list):
                raise InputError(f"{field}: {path}: 'items' of a {doc['kind']} must be a list")
            found.extend(items)
        elif isinstance(doc, list):
            found.extend(doc)
        else:
            found.append(doc)
    for item in found:
        if not isinstance(item, dict):
            raise InputError(f"{field}: {path} holds {type(item).__name__} {item!r:.40}, not a Kubernetes object")
    return found


def check_plan(plan: Any, field: str) -> None:
    """A ``plan.json`` as other modules read it: templates with levels, classes with device counts."""
    plan = _mapping(plan, field, optional=False)
    for index, template in enumerate(_mappings(plan.get("templates"), f"{field}.templates")):
        level = template.get("aligned_level")
        if level is not None and not isinstance(level, str):
            raise InputError(f"{field}.templates[{index}].aligned_level: must be a level name (got {level!r})")
    for name, entry in _mapping(plan.get("classes"), f"{field}.classes").items():
        devices = _mapping(entry, f"{field}.classes.{name}", optional=False).get("devices")
        if devices is not None and (isinstance(devices, bool) or not isinstance(devices, int) or devices < 0):
            raise InputError(f"{field}.classes.{name}.devices: must be a device count (got {devices!r})")
