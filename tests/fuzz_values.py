# SPDX-License-Identifier: Apache-2.0
"""TEST FIXTURE: the argument fuzzer's vocabulary (tests/unit/plugins/modules/test_argument_fuzzing.py).

Paths into the drawn arguments, the record of what a mutation broke
(:class:`Broken`), bad values per type, the generic mutations derived from a
module's argument spec, and the claim objects and garbage the semantic
mutations share. Never shipped.
"""

from __future__ import annotations

import copy
import importlib
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import yaml
from hypothesis import strategies as st

from ansible_collections.aligned.dra.tests.plan_inputs import PAIR_NODE_TOPOLOGY as TOPOLOGY
from ansible_collections.aligned.dra.tests.plan_inputs import pair_objects

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SRIOV_LAYOUT = FIXTURES / "network" / "sriov-lab.yml"
UTILIZATION_SET = FIXTURES / "utilization" / "ai-lab"
PACKAGE = "ansible_collections.aligned.dra.plugins.modules."

# Free-form options that the module documents as a role variable; the library
# names fields inside them with that variable's name.
ALIASES = {
    "claims_render": {"settings": "aligned_dra_claims", "feature_gates": "aligned_dra_feature_gates"},
    "teams_render": {
        "claims_settings": "aligned_dra_claims",
        "settings": "aligned_dra_teams",
        "feature_gates": "aligned_dra_feature_gates",
    },
    "utilization": {"teams": "aligned_dra_teams"},
}

# Options whose default points at the live node: never dropped or nulled by a mutation.
PINNED = {
    "topology_info": {"sysfs_root", "procfs_root"},
    "rdma": {"sysfs_root", "procfs_root", "modprobe_dir", "modules_load_dir"},
    "sriov": {"sysfs_root", "procfs_root", "driver_state_dir"},
    "topology_capture": {"sysfs_root", "procfs_root"},
    "network_plan": {"sysfs_root", "procfs_root", "modprobe_dir", "modules_load_dir", "driver_state_dir"},
}


# -- the argument spec, read from the module --------------------------------------


class _Captured(Exception):
    def __init__(self, kwargs: dict[str, Any]) -> None:
        super().__init__("captured")
        self.kwargs = kwargs


def load(name: str) -> Any:
    return importlib.import_module(PACKAGE + name)


def module_spec(name: str) -> dict[str, Any]:
    """The keyword arguments the module passes to AnsibleModule."""
    module = load(name)

    def capture(*args: Any, **kwargs: Any) -> None:
        raise _Captured(kwargs)

    with mock.patch.object(module, "AnsibleModule", capture), pytest.raises(_Captured) as caught:
        module.main()
    return caught.value.kwargs


_SPECS: dict[str, dict[str, Any]] = {}


def module_spec_cache(name: str) -> dict[str, Any]:
    if name not in _SPECS:
        _SPECS[name] = module_spec(name)
    return _SPECS[name]


# -- paths in argument sets ------------------------------------------------------------


def render(path: tuple[Any, ...]) -> str:
    text = ""
    for seg in path:
        text += f"[{seg}]" if isinstance(seg, int) else (f".{seg}" if text else str(seg))
    return text


def leaf(path: tuple[Any, ...]) -> str:
    return next(str(seg) for seg in reversed(path) if not isinstance(seg, int))


def get_at(args: Any, path: tuple[Any, ...]) -> Any:
    for seg in path:
        args = args[seg]
    return args


def set_at(args: dict[str, Any], path: tuple[Any, ...], value: Any) -> None:
    get_at(args, path[:-1])[path[-1]] = value


class Broken:
    """The fields broken so far: a failure must name one of them."""

    def __init__(self, name: str) -> None:
        self.aliases = ALIASES.get(name, {})
        spec = module_spec_cache(name)["argument_spec"]
        # Options whose content has no documented suboptions (settings, objects, slices...).
        self.free_form = {k for k, e in spec.items() if e.get("type") in ("dict", "list") and "options" not in e}
        self.paths: list[tuple[Any, ...]] = []
        self.words: list[str] = []  # extra exact names (unknown keys, option pairs)

    def add(self, path: tuple[Any, ...]) -> None:
        self.paths.append(path)

    def named_by(self, msg: str, module_ran: bool) -> bool:
        if any(word in msg for word in self.words):
            return True
        for path in self.paths:
            spelled = {render(path)}
            if path and path[0] in self.aliases:
                spelled.add(render((self.aliases[path[0]], *path[1:])))
            if any(s in msg for s in spelled):
                return True
            # The entry that holds the field, and the field's name: "pfs[0]: select ... pci_address, netdev".
            entry = (
                tuple(path[: max(i for i, seg in enumerate(path) if isinstance(seg, int)) + 1])
                if any(isinstance(seg, int) for seg in path)
                else None
            )
            if entry and render(entry) in msg and leaf(path) in msg:
                return True
            if not module_ran and leaf(path) in msg:
                return True
            # What the module built from a free-form option failed its checks: the message starts
            # with the option and names the object and field it built ("settings: rendered objects...").
            if len(path) > 1 and path[0] in self.free_form and msg.startswith(f"{path[0]}: "):
                return True
        return False

    def __bool__(self) -> bool:
        return bool(self.paths or self.words)

    def __repr__(self) -> str:
        return f"Broken({[render(p) for p in self.paths] + self.words})"


# -- values -----------------------------------------------------------------------------

STRINGS = [
    "",
    " ",
    "x" * 5000,
    "ünïcødé-名前-💥",
    "nul\x00byte",
    "../../../../etc/passwd",
    "-rf",
    "line\nbreak",
    "0",
    "null",
    "{{ lookup('env', 'HOME') }}",
    "a" * 300,
    "UPPER_case",
]
INTS = [-1, 0, 1, 7, 8, 9, 4095, 4096, 65535, 65536, 2**31, 2**63, -(2**63), 2**80, "12", " 3 ", "0x10", "1e3", 1.5]
FLOATS = [0, -1, -0.5, 1e308, "nan", "inf", "-inf", 0.01, 2**80]
BOOLS = ["maybe", 2, -1, "yes", "off", "TRUE", 0]
WRONG = {
    "str": [[1, 2], {"a": 1}],
    "path": [[1, 2], {"a": 1}],
    "int": ["many", "1.5", [], {}, [1]],
    "float": ["fast", [], {}],
    "bool": ["maybe", [], {}, 2],
    "list": [{"a": 1}, 5, "a,b", {}],
    "dict": ["not a dict", "k=v", '{"json": 1}', [1, 2], 5, "[]"],
}


def paths_in(root: Path) -> list[str]:
    """Paths that all stay inside the scratch root (relative ones too: it is the cwd)."""
    return [
        str(root / "missing"),
        str(root / "missing" / "deeper"),
        str(root / "afile"),
        str(root / "afile" / "under-a-file"),
        str(root / "emptydir"),
        str(root / "emptydir" / ".." / "missing2"),
        str(root / "binary.bin"),
        str(root / "garbage.json"),
        str(root / "ünïcødé"),
        "",
        "relative/dir",
        "a" * 300,
        "nul\x00byte",
        str(root / ("b" * 300)),
    ]


def bad_value(draw, entry: dict[str, Any], root: Path) -> Any:
    kind = entry.get("type", "str")
    pools: list[list[Any]] = [WRONG.get(kind, [[1]]), [None]]
    if kind == "path":
        pools += [paths_in(root)] * 3
    elif kind == "str":
        pools.append(STRINGS)
        if "choices" in entry:
            pools.append(["bogus", str(entry["choices"][0]).upper(), ""])
    elif kind == "int":
        pools += [INTS, INTS]
    elif kind == "float":
        pools += [FLOATS, FLOATS]
    elif kind == "bool":
        pools.append(BOOLS)
    elif kind == "list":
        element = {"type": entry.get("elements", "str")}
        pools.append([[draw(st.sampled_from(pool))] for pool in (WRONG.get(element["type"], [[1]]), STRINGS)])
        if element["type"] == "path":
            pools.append([[p] for p in paths_in(root)])
        if element["type"] == "dict":
            pools.append([[{}], [{"bogus": 1}], [None], [[]], ["x"]])
        if "choices" in entry:
            pools.append([["bogus"], [str(entry["choices"][0]).lower()]])
    elif kind == "dict":
        pools.append([{}, {"bogus": 1}, {"": None}, {"ünï": "nul\x00"}, {"a": {"b": {"c": [1]}}}])
    pool = draw(st.sampled_from(pools))
    return copy.deepcopy(draw(st.sampled_from(pool)))


def generic_mutation(draw, name: str, args: dict[str, Any], spec: dict[str, Any], root: Path, broken: Broken) -> None:
    """One mutation derived from the argument spec."""
    kwargs = spec
    top = kwargs["argument_spec"]
    # Every (path, entry) that can be broken: the options, and suboptions of list elements that exist.
    targets: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    for key, entry in top.items():
        if key in PINNED.get(name, ()) and entry.get("type") == "path":
            targets.append(((key,), dict(entry, type="pinned")))
        else:
            targets.append(((key,), entry))
        if "options" in entry and isinstance(args.get(key), list):
            for index, element in enumerate(args[key]):
                if isinstance(element, dict):
                    targets.extend(((key, index, sub), subentry) for sub, subentry in entry["options"].items())
    how = draw(st.sampled_from(["value", "value", "value", "unknown", "drop", "exclusive"]))
    if how == "unknown":
        where = draw(st.sampled_from([()] + [p for p, e in targets if len(p) == 2 and isinstance(p[1], int)]))
        where = tuple(dict.fromkeys(where[:2])) if where else ()
        key = draw(st.sampled_from(["bogus_option", "Sysfs_Root", "pfs_", "ünïcødé_key"]))
        container = get_at(args, where) if where else args
        if isinstance(container, dict):
            container[key] = 1
            broken.words.append(key)
        return
    if how == "drop":
        required = [p for p, e in targets if e.get("required") and len(p) == 1]
        if required:
            path = draw(st.sampled_from(required))
            args.pop(path[0], None)
            broken.add(path)
        return
    if how == "exclusive":
        pairs = kwargs.get("mutually_exclusive") or []
        if pairs:
            pair = draw(st.sampled_from(pairs))
            for key in pair:
                if args.get(key) in (None, [], ""):
                    args[key] = draw(st.sampled_from(EXCLUSIVE_FILLERS[name][key]))(root)
            broken.words.append("|".join(pair))
            broken.add((pair[0],))
            broken.add((pair[1],))
        return
    path, entry = draw(st.sampled_from(targets))
    if entry.get("type") == "pinned":
        # A live-node path option: only scratch paths, never null or missing.
        value = draw(st.sampled_from([p for p in paths_in(root) if p]))
    else:
        value = bad_value(draw, entry, root)
    try:
        set_at(args, path, value)
    except (KeyError, IndexError, TypeError):
        return
    broken.add(path)


EXCLUSIVE_FILLERS = {
    "plan": {
        "slices": [lambda root: copy.deepcopy(SLICES)],
        "slice_files": [lambda root: [str(root / "slices.json")]],
        "topologies": [lambda root: {"n1": copy.deepcopy(TOPOLOGY)}],
        "topology_files": [lambda root: {"n1": str(root / "nodes" / "n1.json")}],
    },
    "utilization": {
        "slices": [lambda root: yaml.safe_load((UTILIZATION_SET / "slices.yaml").read_text())["items"]],
        "slice_files": [lambda root: [str(root / "set" / "slices.yaml")]],
        "claims": [lambda root: yaml.safe_load((UTILIZATION_SET / "claims.yaml").read_text())["items"]],
        "claim_files": [lambda root: [str(root / "set" / "claims.yaml")]],
    },
}


# -- valid bases and semantic garbage per module -----------------------------------------

OBJECTS = pair_objects()
CLASSES = [o for o in OBJECTS if o["kind"] == "DeviceClass"]
VERSIONS = ["1.34", "1.35", "v1.36.2", "1.37", "1.36.0"]
BAD_VERSIONS = ["1.33", "1.38", "2.0", "v1", "", "latest", "1.36.x", "1..36", "１.３６"]
# Scratch-tree entries (written by _common) that are no plan.json, and no list of objects.
BAD_PLAN_FILES = ["garbage.json", "wrong-shape.json", "binary.bin", "emptydir"]
BAD_OBJECT_FILES = ["garbage.json", "wrong-shape.json", "binary.bin", "list.yaml", "scalar.yaml", "emptydir"]
CEL_GARBAGE = [
    'device.attributes["dra.aligned.dev"].colour == "red"',
    "device.driver ==",
    "1 + ",
    "true",
    "device.capacity['x'].compareTo(quantity('1Gi')) >= 0 &&",
    "",
    "x" * 20000,
    5,
    None,
]


def _slices() -> list[dict[str, Any]]:
    from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra
    from ansible_collections.aligned.dra.plugins.module_utils.dra import slices as dra_slices

    return dra_slices.resource_slices("n1", dra.devices_from_topology(TOPOLOGY))


SLICES: list[dict[str, Any]] = _slices()
