# SPDX-License-Identifier: Apache-2.0
"""TEST FIXTURE: the argument fuzzer's vocabulary (tests/unit/plugins/modules/test_argument_fuzzing.py).

Paths into the drawn arguments, the record of what a mutation broke
(:class:`Broken`), bad values per type, the generic mutations derived from a
module's argument spec, the claim objects and garbage the semantic
mutations share, and the 16-node site, catalogue, placement and jobs the
jobs module is fuzzed on. Never shipped.
"""

from __future__ import annotations

import copy
import functools
import importlib
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import yaml
from hypothesis import strategies as st

from ansible_collections.aligned.dra.tests.support.sites.plan_inputs import NIC_NAME_RULE, aligned_node, pair_objects
from ansible_collections.aligned.dra.tests.support.sites.plan_inputs import PAIR_NODE_TOPOLOGY as TOPOLOGY

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
SRIOV_LAYOUT = FIXTURES / "network" / "sriov-lab.yml"
UTILIZATION_SET = FIXTURES / "utilization" / "ai-lab"
PACKAGE = "ansible_collections.aligned.dra.plugins.modules."

# Free-form options that the module documents as a role variable; the library
# names fields inside them with that variable's name. ``rail_rules`` maps each
# host to its aligned_dra_rails, named "<host>: aligned_dra_rails: ...".
ALIASES = {
    "claims_render": {
        "settings": "aligned_dra_claims",
        "feature_gates": "aligned_dra_feature_gates",
        "rail_rules": "aligned_dra_rails",
    },
    "teams_render": {
        "claims_settings": "aligned_dra_claims",
        "settings": "aligned_dra_teams",
        "feature_gates": "aligned_dra_feature_gates",
        "placement_levels": "aligned_dra_placement_levels",
        "rail_rules": "aligned_dra_rails",
    },
    "utilization": {"teams": "aligned_dra_teams"},
    "jobs": {
        "jobs": "aligned_dra_jobs",
        "claims_settings": "aligned_dra_claims",
        "teams_settings": "aligned_dra_teams",
        "feature_gates": "aligned_dra_feature_gates",
    },
}

# Options whose default points at the live node: never dropped or nulled by a mutation.
PINNED = {
    "topology_info": {"sysfs_root", "procfs_root"},
    "rdma": {"sysfs_root", "procfs_root", "modprobe_dir", "modules_load_dir"},
    "sriov": {"sysfs_root", "procfs_root", "driver_state_dir"},
    "topology_capture": {"sysfs_root", "procfs_root"},
    "network_plan": {"sysfs_root", "procfs_root", "modprobe_dir", "modules_load_dir", "driver_state_dir", "grub_dir"},
    "gpudirect": {"sysfs_root", "procfs_root", "modules_load_dir", "grub_dir"},
    # a directory the module writes and prunes: only scratch paths
    "output_files": {"dest"},
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
    "replay": {
        "nodes": [lambda root: str(root / "replay" / "openb-nodes.csv")],
        "plan": [lambda root: str(root / "replay" / "plan-1.36.json")],
        "policy": [lambda root: "fractional"],
        "policies": [lambda root: ["whole", "thin"]],
    },
    "jobs": {
        "slices": [lambda root: copy.deepcopy(SLICES)],
        "slice_files": [lambda root: [str(root / "slices.json")]],
        "topologies": [lambda root: {"gpu-00": aligned_node(8)}],
        "topology_files": [lambda root: {"gpu-00": str(root / "nodes" / "gpu-00.json")}],
    },
}


# -- valid bases and semantic garbage per module -----------------------------------------

OBJECTS = pair_objects()
CLASSES = [o for o in OBJECTS if o["kind"] == "DeviceClass"]
VERSIONS = ["1.34", "1.35", "v1.36.2", "1.37", "1.36.0"]
BAD_VERSIONS = ["1.33", "1.38", "2.0", "v1", "", "latest", "1.36.x", "1..36", "１.３６"]
# A site's placement levels (aligned_dra_placement_levels), widest first, and lists of them that are refused.
PLACEMENT_LEVELS = [{"name": "block", "label": "aligned.dev/block"}, {"name": "rack", "label": "aligned.dev/rack"}]
PLACEMENT_LEVELS_GARBAGE = [
    [{"name": "rack", "lable": "aligned.dev/rack"}],
    [{"name": "rack", "label": "aligned.dev/Rack Row"}],
    [{"name": "rack", "label": "-rack/x"}],
    [{"name": "rack", "label": 5}],
    [{"name": "host", "label": "kubernetes.io/hostname"}],
    [{"name": "rack", "label": "aligned.dev/rack"}, {"name": "rack", "label": "aligned.dev/row"}],
    [{"name": "rack", "label": "aligned.dev/rack"}, {"name": "row", "label": "aligned.dev/rack"}],
    [{"name": "Rack", "label": "aligned.dev/rack"}],
    [{"name": "site", "label": "aligned.dev/site"}],
    [{"label": "aligned.dev/rack"}],
    [{"name": f"l{i}", "label": f"aligned.dev/l{i}"} for i in range(16)],
]
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


CLAIMS_SETTINGS_GARBAGE = [
    ("drivers", ["x.io"]),
    ("drivers", "dra.aligned.dev"),
    ("drivers", [5]),
    ("gpu_driver", "dra.net"),
    ("nic_driver", "gpu.nvidia.com"),
    ("templates", "pairs"),
    ("templates", {"pairs": {"counts": [0]}}),
    ("templates", {"pairs": {"counts": "1"}}),
    ("templates", {"pairs": {"colour": 1}}),
    ("templates", {"bogus": {}}),
    ("templates", {"pairs": None}),
    ("templates", {"pairs": {"selectors": {"gpu": CEL_GARBAGE[:2]}}}),
    ("required", ["ghost"]),
    ("required", "gpu-nic-pair-1"),
    ("required", [5]),
    ("namespace", "Bad_NS"),
    ("namespace", 5),
    ("classes", {"gpu": "UPPER CASE"}),
    ("classes", "x"),
    ("classes", {"tpu": "tpu"}),
    ("selectors", {"gpu": ["device.driver =="]}),
    ("selectors", {"gpu": "true"}),
    ("selectors", {"tpu": ["true"]}),
    ("bogus_key", 1),
]

TEAMS_SETTINGS_GARBAGE = [
    ("teams", "a"),
    ("teams", [5]),
    ("teams", [{"name": "Bad Name"}]),
    ("teams", [{"name": "a"}, {"name": "a"}]),
    ("teams", [{"name": "a", "namespaces": "ns"}]),
    ("teams", [{"name": "a", "namespaces": ["kube-system"]}]),
    ("teams", [{"name": "a", "tier": "gold"}]),
    ("teams", [{"name": "a", "quotas": {"gpu": -1}}]),
    ("teams", [{"name": "a", "quotas": {"gpu": "many"}}]),
    ("teams", [{"name": "a", "quotas": {"tpu": 1}}]),
    ("teams", [{"name": "a", "quotas": [1]}]),
    ("teams", [{"name": "a", "labels": {"a": 5}}]),
    ("teams", [{"name": "a", "labels": "x"}]),
    ("teams", [{"name": "a", "admin_access": "yes"}]),
    ("teams", [{"name": "a", "bogus": 1}]),
    ("teams", [{}]),
    ("teams", [{"name": "a", "templates": ["ghost"]}]),
    ("teams", [{"name": "a", "templates": "gpu-only"}]),
    ("tiers", "x"),
    ("tiers", {"gold": {"value": "high"}}),
    ("tiers", {"gold": 5}),
    ("tiers", {"production": {"value": 10**10}}),
    ("oversubscription", {"gpu": 0.5}),
    ("oversubscription", {"gpu": "x"}),
    ("oversubscription", 3),
    ("extended_resources", {"gpu": "no slash"}),
    ("extended_resources", "x"),
    ("engine", "slurm"),
    ("engine", 5),
    ("kueue", "x"),
    ("kueue", {"cohort": "Bad Cohort"}),
    ("kueue", {"node_groups": 5}),
    ("kueue", {"node_groups": {"h100": {"node_labels": "x"}}}),
    ("kueue", {"resource_names": {"gpu": "not a name"}}),
    ("kueue", {"what_if": [{"team": "ghost", "class": "gpu"}]}),
    ("kueue", {"what_if": "x"}),
    ("teams", [{"name": "a", "borrowing_limit": {"gpu": -1}}]),
    ("teams", [{"name": "a", "lending_limit": {"gpu": "lots"}}]),
    ("teams", [{"name": "a", "department": "Bad Dept"}]),
    ("teams", [{"name": "a", "node_group": "nowhere"}]),
    ("teams", [{"name": "a", "node_group": []}]),
    ("teams", [{"name": "a", "quotas": {"gpu": "16"}}]),
    ("kueue", {"what_if": [{"team": ["a"], "name": "w", "class": "gpu"}]}),
    ("kueue", {"what_if": [{"team": "a", "name": "w", "class": {"x": 1}}]}),
    ("kueue", {"what_if": [{"team": "a", "name": "w", "class": "gpu", "tier": ["x"]}]}),
    ("kueue", {"what_if": {}}),
    ("kueue", {"node_groups": ""}),
    ("bogus_key", 1),
]

# Claim objects the planner must refuse, each naming the object.
PLAN_OBJECT_GARBAGE = [
    {"kind": "DeviceClass"},
    {"kind": "DeviceClass", "metadata": {"name": "x"}, "spec": "garbage"},
    {
        "kind": "DeviceClass",
        "metadata": {"name": "x"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver =="}}]},
    },
    {"kind": "DeviceClass", "metadata": {"name": "x"}, "spec": {"selectors": [{"cel": {}}]}},
    {"kind": "DeviceClass", "metadata": "x"},
    {"kind": "ResourceClaimTemplate"},
    {"kind": "ResourceClaimTemplate", "metadata": {"name": "t"}, "spec": 5},
    {
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "t"},
        "spec": {"spec": {"devices": {"requests": "x"}}},
    },
    {
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "t"},
        "spec": {"spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "ghost"}}]}}},
    },
    {
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "t"},
        "spec": {
            "spec": {
                "devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "aligned-gpu", "count": -1}}]}
            }
        },
    },
    {
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "t"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "r",
                            "exactly": {
                                "deviceClassName": "aligned-gpu",
                                "selectors": [{"cel": {"expression": CEL_GARBAGE[2]}}],
                            },
                        }
                    ]
                }
            }
        },
    },
    {
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "t"},
        "spec": {"spec": {"devices": {"requests": [{"name": "r"}], "constraints": [{"matchAttribute": 5}]}}},
    },
    {"kind": 5},
    {"kind": "ResourceClaim", "metadata": {"name": "c"}, "spec": {"devices": None}},
]


def _slices() -> list[dict[str, Any]]:
    from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra
    from ansible_collections.aligned.dra.plugins.module_utils.dra import slices as dra_slices

    return dra_slices.resource_slices("n1", dra.devices_from_topology(TOPOLOGY))


SLICES: list[dict[str, Any]] = _slices()


# -- a site of 16 nodes and its jobs (as tests/integration/roles/test_placement_role.py) ----------

JOB_SITE = "west"
# 2 blocks x 2 racks x 4 nodes, each with 8 GPU+NIC pairs, NIC i on rail i
JOB_HOSTS = {f"gpu-{i:02d}": {"block": f"b{i // 8 + 1}", "rack": f"r{i // 4 + 1}"} for i in range(16)}
JOB_RAIL_RULES = {host: dict(NIC_NAME_RULE, count=8) for host in JOB_HOSTS}
JOB_GATES = {"GenericWorkload": True, "GangScheduling": True}
# Valid with the site's levels; without levels the jobs are drawn without their placement.
JOBS = [
    {"name": "pretrain", "workers": 2, "template": "gpu-nic-rails-8-0", "placement": {"level": "rack"}},
    {"name": "sweep", "workers": 6, "template": "gpu-nic-rail-0", "placement": {"level": "rack", "mode": "preferred"}},
    {"name": "sweep-rack", "workers": 6, "template": "gpu-nic-rail-0", "placement": {"level": "rack"}},
    {"name": "infer", "workers": 12, "template": "gpu-only", "placement": {"level": "block", "mode": "required"}},
    {"name": "anywhere", "workers": 3, "template": "gpu-nic-pair-2", "image": "registry.k8s.io/pause:3.10"},
]
# A team whose namespace holds a copy of a rail template, and a job that runs there.
JOB_TEAMS = {
    "engine": "kueue",
    "teams": [{"name": "llm", "namespaces": ["llm-train"], "templates": ["gpu-nic-rail-1"]}],
}
TEAM_JOB = {"name": "team-run", "workers": 4, "template": "gpu-nic-rail-1", "namespace": "llm-train", "queue": "llm"}
# A measurement that holds one pair of gpu-00 (device labels as the planner names them).
JOB_UTILIZATION = {
    "schema_version": 1,
    "site": JOB_SITE,
    "allocations": [
        {"claim": "default/c", "node": "gpu-00", "devices": {"gpu": ["gpu-0000-11-00-0"], "nic": ["nic-0000-12-00-0"]}}
    ],
    "shared": [],
}
# What the aligned.dra.placement filter reports for a site whose placement is wrong.
PLACEMENT_PROBLEMS = [
    "site west: rack r1 is in block b1 (gpu-00) and in block b2 (gpu-05); a domain lies in one wider domain",
    "gpu-09: aligned_dra_placement has no domain for level rack",
    "gpu-03, gpu-04: aligned_dra_placement_levels differs from the site's first host gpu-00; levels are per site",
]
# What a job entry gets that the jobs module must refuse, by the field the failure names.
JOB_GARBAGE = {
    "unknown key": [{"bogus": 1}, {"nodes": 2}, {"placement": {"levle": "rack"}}],
    "level": [
        {"placement": {"level": "row"}},
        {"placement": {"level": "hostname", "mode": "preferred"}},
        {"placement": {"mode": "required"}},
    ],
    "mode": [{"placement": {"level": "rack", "mode": "strict"}}, {"placement": {"level": "rack", "mode": 1}}],
    "placement": [{"placement": "rack"}, {"placement": ["rack"]}],
    "template": [
        {"template": "ghost"},
        {"template": "gpu-nic-rail-9"},
        {"template": "aligned-gpu"},
        {"template": ""},
        {"template": None},
    ],
    "workers": [{"workers": 0}, {"workers": -3}, {"workers": 4097}, {"workers": "2"}, {"workers": True}],
    "name": [{"name": "Bad_Name"}, {"name": "1st"}, {"name": "x" * 51}, {"name": ""}, {"name": 5}],
    "namespace": [{"namespace": "Bad NS"}, {"namespace": "elsewhere"}],
    "image": [{"image": "two words"}, {"image": ""}],
    "queue": [{"queue": "Bad Queue"}, {"queue": "q" * 64}],
}


@functools.cache
def _job_catalogue(minor: str) -> list[dict[str, Any]]:
    from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import render as claims

    return claims.render({}, JOB_SITE, minor, rail_rules=JOB_RAIL_RULES)["objects"]


def job_catalogue(minor: str) -> list[dict[str, Any]]:
    """The site's claim catalogue for ``minor``, as the claims role renders it with the rails (a fresh copy)."""
    return copy.deepcopy(_job_catalogue(minor))


@functools.cache
def _job_placement(levels: bool) -> dict[str, Any]:
    # what the aligned.dra.placement filter does, without importing a controller plugin (ansible.errors) here
    from ansible_collections.aligned.dra.plugins.module_utils.controller.domains import levels as placement

    placed, problems = placement.site_placement(
        PLACEMENT_LEVELS if levels else None,
        {host: domains if levels else None for host, domains in JOB_HOSTS.items()},
        {host: host for host in JOB_HOSTS},
    )
    assert not problems, problems
    return dict(placed, problems=[], label_objects=placement.node_label_objects(placed, JOB_SITE))


def job_placement(levels: bool) -> dict[str, Any]:
    """The site's placement as the aligned.dra.placement filter returns it, with the levels or without (a copy)."""
    return copy.deepcopy(_job_placement(levels))
