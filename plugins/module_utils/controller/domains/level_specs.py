# SPDX-License-Identifier: Apache-2.0
"""Placement levels read from the cluster or named by a preset: the level entries, checked.

``aligned_dra_placement_levels`` takes, besides the inventory form
(``[{name, label}]``, :func:`levels.check_levels`), two forms:

- a list whose entries name a ``source``: ``inventory`` (the default: the
  node's domain comes from ``aligned_dra_placement``, written as node label
  ``label``), ``node_label`` (``key``: the label the cluster's Node objects
  already carry; used as it is, no label written) or ``device_attribute``
  (``driver``, ``attribute``: the value every device of that driver on the
  node carries in its ResourceSlices, written as node label ``label``,
  default ``aligned.dev/<name>``). ``compose: true`` makes the level's
  domain ``<parent domain>.<value>`` (for values that are unique only
  inside their parent), written as node label ``label`` (default
  ``aligned.dev/<name>``) since a scheduler sees one key;
- a mapping ``{preset, levels, drop, nvlink}``: ``preset`` names a provider's
  stack (:data:`presets.PRESETS`); ``levels`` entries override the preset's
  level of the same name (their keys replace the preset's; a new ``source``
  drops the preset's ``key``, ``driver`` and ``attribute``) or add a level
  (after the level named by ``after``, else after the preset's levels);
  ``drop`` lists preset levels left out; ``nvlink: true`` adds level
  ``nvlink`` read from ``nvidia.com/gpu.clique`` (after the preset's
  ``NVLINK_AFTER`` level, else last), and ``nvlink: {...}`` a level entry
  merged over that one (another key or source, ``name``, ``after``,
  ``compose``).

:func:`check_level_specs` checks either form into full level entries
``{"name", "label", "source", "key" | "driver", "attribute", "compose",
"written", "nvlink"}`` (raises :class:`shared.PlacementError` naming the
field); :func:`levels_of` gives the ``[{name, label}]`` every consumer of the
levels reads. Levels listed fine before coarse where the providers' keys say
so (:func:`presets.known_rank`) are refused here; the nodes' values find the
rest (:mod:`controller.domains.sources`).

Controller-side; no Ansible imports.
"""

from __future__ import annotations

import re

from ansible_collections.aligned.dra.plugins.module_utils.controller.domains import presets
from ansible_collections.aligned.dra.plugins.module_utils.controller.domains.shared import (
    LEVELS_VARIABLE,
    MAX_LEVELS,
    PlacementError,
    check_name_label,
    did_you_mean,
)
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra
from ansible_collections.aligned.dra.plugins.module_utils.dra.labels import is_label_name

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

SOURCES = (presets.INVENTORY, presets.NODE_LABEL, presets.DEVICE_ATTRIBUTE)
ENTRY_KEYS = ("name", "label", "source", "key", "driver", "attribute", "compose")
OWN_LABEL_PREFIX = "aligned.dev/"
# Keys of these forms: a level entry that has one of SOURCE_KEYS, or a mapping with one of PRESET_KEYS,
# is read from the cluster or named by a preset instead of the inventory (levels.is_sourced).
SOURCE_KEYS = ("source", "key", "driver", "attribute", "compose")
PRESET_KEYS = ("preset", "levels", "drop", "nvlink")
_BY_SOURCE = {
    presets.INVENTORY: ("label",),
    presets.NODE_LABEL: ("key",),
    presets.DEVICE_ATTRIBUTE: ("driver", "attribute"),
}
_SOURCE_ONLY = ("key", "driver", "attribute")
# A DRA attribute name: [DNS subdomain/]C identifier of at most 32 characters.
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,31}$")


def levels_of(specs: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The checked levels as every consumer reads them: ``[{"name", "label"}]``, widest first."""
    return [{"name": spec["name"], "label": spec["label"]} for spec in specs]


def check_level_specs(raw: Any, where: str = LEVELS_VARIABLE) -> list[dict[str, Any]]:
    """The full level entries of ``raw`` (either form), widest first; raises :class:`PlacementError`."""
    nvlink: set[int] = set()
    if isinstance(raw, dict):
        entries, paths, nvlink = _expand_preset(raw, where)
    elif isinstance(raw, list):
        entries, paths = list(raw), [f"{where}[{index}]" for index in range(len(raw))]
    else:
        raise PlacementError(f"{where}: must be a list of levels or a mapping with a preset (got {type(raw).__name__})")
    if len(entries) > MAX_LEVELS:
        raise PlacementError(
            f"{where}: {len(entries)} levels; at most {MAX_LEVELS} (Kueue's Topology takes 16 with "
            "kubernetes.io/hostname, the implied last level)"
        )
    names: dict[str, int] = {}
    labels: dict[str, int] = {}
    specs = []
    for index, (entry, at) in enumerate(zip(entries, paths)):
        spec = _check_entry(entry, at, first=index == 0, nvlink=index in nvlink)
        check_name_label(at, spec["name"], spec["label"], names, labels)
        names[spec["name"]] = labels[spec["label"]] = index
        specs.append(spec)
    _check_order(specs, paths)
    return specs


def refuse_unknown(raw: dict[str, Any], known: tuple[str, ...], at: str, hints: tuple[str, ...] = ()) -> None:
    """Raise :class:`PlacementError` for the first key of ``raw`` not in ``known``, with the closest one."""
    unknown = sorted(set(raw) - set(known), key=str)
    if unknown:
        hint = did_you_mean(unknown[0], hints or known)
        raise PlacementError(f"{at}: unknown key {unknown[0]!r}{hint} (known: {', '.join(known)})")


# -- the preset form ------------------------------------------------------------------------------


def _expand_preset(raw: dict[str, Any], where: str) -> tuple[list[Any], list[str], set[int]]:
    """The level entries a preset mapping stands for, the field each comes from, and the NVLink level's index."""
    refuse_unknown(raw, PRESET_KEYS, where)
    name = raw.get("preset")
    if name not in presets.PRESETS:
        hint = did_you_mean(name, presets.PRESETS)
        raise PlacementError(f"{where}.preset: {name!r} is not a preset{hint} (presets: {', '.join(presets.PRESETS)})")
    entries = presets.preset_levels(name)
    paths = [f"{where} (preset {name}, level {entry['name']})" for entry in entries]
    drop = raw.get("drop") or []
    if not isinstance(drop, list):
        raise PlacementError(f"{where}.drop: must be a list of level names of preset {name}")
    known = [entry["name"] for entry in entries]
    for index, gone in enumerate(drop):
        if gone not in known:
            hint = did_you_mean(gone, known)
            raise PlacementError(f"{where}.drop[{index}]: preset {name} has no level {gone!r}{hint}")
    kept = [(entry, path) for entry, path in zip(entries, paths) if entry["name"] not in drop]
    overrides = raw.get("levels") or []
    if not isinstance(overrides, list):
        raise PlacementError(f"{where}.levels: must be a list of level entries (got {type(overrides).__name__})")
    added = []
    for index, entry in enumerate(overrides):
        at = f"{where}.levels[{index}]"
        if not isinstance(entry, dict):
            raise PlacementError(f"{at}: must be a mapping with a name (got {type(entry).__name__})")
        position = next((i for i, (level, _path) in enumerate(kept) if level["name"] == entry.get("name")), None)
        if position is None:
            added.append((dict(entry), at))
            continue
        if "after" in entry:
            raise PlacementError(f"{at}.after: {entry['name']} is a level of preset {name}; it keeps its place")
        kept[position] = (_merge(kept[position][0], entry), at)
    nvlink = _nvlink_entry(raw.get("nvlink"), f"{where}.nvlink", name)
    if nvlink is not None:
        added.append(nvlink)
    for entry, at in added:
        _insert(kept, entry, at)
    marked = {index for index, (entry, _path) in enumerate(kept) if nvlink is not None and entry is nvlink[0]}
    return [entry for entry, _path in kept], [path for _entry, path in kept], marked


def _merge(level: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """A level entry with ``override``'s keys; a new ``source`` drops the old source's keys."""
    merged = dict(level)
    if override.get("source", level.get("source")) != level.get("source"):
        for key in _SOURCE_ONLY:
            merged.pop(key, None)
    merged.update(override)
    return merged


def _nvlink_entry(value: Any, at: str, preset: str) -> tuple[dict[str, Any], str] | None:
    """The level ``nvlink: true`` or ``nvlink: {...}`` adds, placed by ``after`` (a preset's default)."""
    if value is None or value is False:
        return None
    entry: dict[str, Any] = {"name": presets.NVLINK_LEVEL, "source": presets.NODE_LABEL, "key": presets.CLIQUE_LABEL}
    after = presets.NVLINK_AFTER.get(preset)
    if after is not None:
        entry["after"] = after
    if value is True:
        return entry, at
    if not isinstance(value, dict):
        raise PlacementError(f"{at}: must be true or a level entry (got {type(value).__name__})")
    return _merge(entry, value), at


def _insert(kept: list[tuple[dict[str, Any], str]], entry: dict[str, Any], at: str) -> None:
    """Add ``entry`` after the level its ``after`` names, else last (``entry`` itself, without ``after``)."""
    after = entry.pop("after", None)
    if after is None:
        kept.append((entry, at))
        return
    names = [level["name"] for level, _path in kept]
    if after not in names:
        raise PlacementError(f"{at}.after: no level {after!r}{did_you_mean(after, names)} (levels: {', '.join(names)})")
    kept.insert(names.index(after) + 1, (entry, at))


# -- one entry ------------------------------------------------------------------------------------


def _check_entry(entry: Any, at: str, first: bool, nvlink: bool = False) -> dict[str, Any]:
    """One level entry, checked, with its defaults (``nvlink``: the level ``nvlink`` of a preset adds)."""
    if not isinstance(entry, dict):
        raise PlacementError(f"{at}: must be a mapping with a name (got {type(entry).__name__})")
    if "after" in entry:
        raise PlacementError(f"{at}.after: only for a level added to a preset (in a list, the order is the list's)")
    refuse_unknown(entry, ENTRY_KEYS, at)
    source = entry.get("source", presets.INVENTORY)
    if source not in SOURCES:
        hint = did_you_mean(source, SOURCES)
        raise PlacementError(f"{at}.source: {source!r} is not a source{hint} (sources: {', '.join(SOURCES)})")
    compose = entry.get("compose", False)
    if not isinstance(compose, bool):
        raise PlacementError(f"{at}.compose: must be true or false (got {compose!r})")
    if compose and first:
        raise PlacementError(f"{at}.compose: the widest level has no level above to compose its domain with")
    for key in _SOURCE_ONLY:
        if key in entry and key not in _BY_SOURCE[source]:
            raise PlacementError(f"{at}.{key}: not a key of source {source} (it takes {', '.join(_BY_SOURCE[source])})")
    read: dict[str, Any] = {"source": source}
    if source == presets.NODE_LABEL:
        read["key"] = _label_key(entry.get("key"), f"{at}.key")
    elif source == presets.DEVICE_ATTRIBUTE:
        read["driver"], read["attribute"] = _attribute(entry.get("driver"), entry.get("attribute"), at)
    read["written"] = source != presets.NODE_LABEL or compose
    key = presets.source_key(read)
    return {
        "name": entry.get("name"),
        "label": _label_of(entry, read, at),
        **read,
        "compose": compose,
        "nvlink": nvlink or key == presets.CLIQUE_LABEL or key in presets.NVLINK_ATTRIBUTES,
    }


def _label_key(key: Any, at: str) -> str:
    if not isinstance(key, str) or not is_label_name(key):
        raise PlacementError(f"{at}: {key!r} is not a label key ([DNS subdomain/]name)")
    return key


def _attribute(driver: Any, attribute: Any, at: str) -> tuple[str, str]:
    """A device attribute level's driver (a DNS subdomain) and attribute (``[domain/]identifier``)."""
    if not isinstance(driver, str) or not dra.is_dns_subdomain(driver):
        raise PlacementError(f"{at}.driver: {driver!r} is not a driver name (a DNS subdomain, e.g. dra.net)")
    domain, _sep, name = attribute.rpartition("/") if isinstance(attribute, str) else ("", "", None)
    if not isinstance(name, str) or not _IDENTIFIER.match(name) or (domain and not dra.is_dns_subdomain(domain)):
        raise PlacementError(
            f"{at}.attribute: {attribute!r} is not a device attribute name ([DNS subdomain/]identifier of at "
            "most 32 letters, digits and '_', e.g. gce.dra.net/block)"
        )
    return driver, attribute


def _label_of(entry: dict[str, Any], spec: dict[str, Any], at: str) -> Any:
    """The node label the schedulers read: the cluster's key, or the one the collection writes."""
    label = entry.get("label")
    if not spec["written"]:
        if label is not None and label != spec["key"]:
            raise PlacementError(
                f"{at}.label: {label!r}: a level read from node label {spec['key']} is used as it is (no label "
                "is written); leave label out, or set compose: true to write a label of the collection's"
            )
        return spec["key"]
    if label is None:
        if spec["source"] == presets.INVENTORY:
            return None  # refused by the name and label check, as in the inventory form
        label = OWN_LABEL_PREFIX + str(entry.get("name"))
    if label in presets.provider_keys() or label == spec.get("key"):
        raise PlacementError(f"{at}.label: {label!r} is a provider's label; the collection never writes it")
    return label


# -- order ----------------------------------------------------------------------------------------


def _check_order(specs: list[dict[str, Any]], paths: list[str]) -> None:
    """Levels of one provider stack listed fine before coarse (its keys say which is coarser)."""
    finest: dict[str, tuple[int, int]] = {}  # per family: the finest level so far (index, rank)
    for index, spec in enumerate(specs):
        known = presets.known_rank(presets.source_key(spec))
        if known is None:
            continue
        family, rank, chain = known
        if family in finest and finest[family][1] > rank:
            earlier = specs[finest[family][0]]
            raise PlacementError(
                f"{paths[index]}: level {spec['name']} ({presets.source_key(spec)}) is coarser than level "
                f"{earlier['name']} ({presets.source_key(earlier)}) listed before it; levels go coarse → fine "
                f"({chain})"
            )
        finest[family] = (index, rank)
