# SPDX-License-Identifier: Apache-2.0
"""TEST FIXTURE: valid arguments and semantic garbage for the controller-side modules the fuzzer runs.

``base_<module>`` draws a valid argument set on a scratch directory,
``semantic_<module>`` breaks it the way only that module understands
(Kubernetes versions, claim and team settings, CEL, plan, slice and object files). Never shipped.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from ansible_collections.aligned.dra.tests.fuzz_values import (
    BAD_OBJECT_FILES,
    BAD_PLAN_FILES,
    BAD_VERSIONS,
    CEL_GARBAGE,
    CLASSES,
    OBJECTS,
    SLICES,
    VERSIONS,
    Broken,
)
from ansible_collections.aligned.dra.tests.plan_inputs import PAIR_NODE_TOPOLOGY as TOPOLOGY


def base_claims_render(draw, root: Path) -> dict[str, Any]:
    del root
    args: dict[str, Any] = {
        "site": draw(st.sampled_from(["s", "ai-west"])),
        "kubernetes_version": draw(st.sampled_from(VERSIONS)),
    }
    if draw(st.booleans()):
        args["settings"] = {"templates": {"pairs": {"counts": [1, 2]}}, "required": ["gpu-nic-pair-1"]}
    if draw(st.booleans()):
        args["feature_gates"] = {"DRAConsumableCapacity": draw(st.booleans())}
    return args


def base_plan(draw, root: Path) -> dict[str, Any]:
    args: dict[str, Any] = {"site": "s", "objects": copy.deepcopy(OBJECTS)}
    source = draw(st.sampled_from(["topologies", "topology_files", "topology_dir", "slice_files", "slices"]))
    if source == "topologies":
        args["topologies"] = {"n1": copy.deepcopy(TOPOLOGY)}
    elif source == "topology_files":
        args["topology_files"] = {"n1": str(root / "nodes" / "n1.json")}
    elif source == "topology_dir":
        args["topology_dir"] = str(root / "nodes")
    elif source == "slice_files":
        args["slice_files"] = [str(root / "slices.json")]
        args["topology_dir"] = str(root / "nodes")
    else:
        args["slices"] = copy.deepcopy(SLICES)
    if draw(st.booleans()):
        args["kubernetes_version"] = "1.36"
    if draw(st.booleans()):
        args["required"] = ["gpu-nic-pair-1"]
    if draw(st.booleans()):
        args["dest"] = str(root / "out" / "plan.json")
    if draw(st.booleans()):
        args["fail_on_unsatisfied"] = draw(st.booleans())
    return args


TEAMS = {"teams": [{"name": "a", "tier": "production", "templates": ["gpu-only"], "quotas": {"gpu": 3}}]}


def base_teams_render(draw, root: Path) -> dict[str, Any]:
    args: dict[str, Any] = {
        "site": "s",
        "kubernetes_version": draw(st.sampled_from(VERSIONS)),
        "settings": copy.deepcopy(TEAMS),
    }
    if draw(st.booleans()):
        args["plan_file"] = str(root / "plan.json")
    if draw(st.booleans()):
        args["dest"] = str(root / "out" / "teams.json")
    if draw(st.booleans()):
        args["settings"]["engine"] = draw(st.sampled_from(["resourcequota", "kueue", "both"]))
    return args


def base_utilization(draw, root: Path) -> dict[str, Any]:
    args: dict[str, Any] = {"site": "ai-lab", "slice_files": [str(root / "set" / "slices.yaml")]}
    if draw(st.booleans()):
        args["claim_files"] = [str(root / "set" / "claims.yaml")]
    if draw(st.booleans()):
        args["classes"] = copy.deepcopy(CLASSES)
    if draw(st.booleans()):
        args["teams"] = {"teams": [{"name": "llm-training", "namespaces": ["llm-train"]}]}
    if draw(st.booleans()):
        args["topology_dir"] = str(root / "set" / "topologies")
    if draw(st.booleans()):
        args["dest"] = str(root / "out" / "utilization.json")
    return args


def base_site_report(draw, root: Path) -> dict[str, Any]:
    args: dict[str, Any] = {"output_dir": str(root / "output")}
    if draw(st.booleans()):
        args["sites"] = ["west"]
    if draw(st.booleans()):
        args["warn_levels"] = draw(st.lists(st.sampled_from(["PIX", "PXB", "PHB", "NODE", "SYS"]), unique=True))
    return args


def base_preflight(draw, root: Path) -> dict[str, Any]:
    del root
    stages = ["probe", "network", "driver", "claims", "teams", "utilization", "report", "what_if"]
    python = [
        {"name": "pytest", "import": "pytest", "version": ">=1.0"},
        {"name": "no-such-dist-aligned", "import": "no_such_dist_aligned", "version": ">=1,<2"},
    ]
    return {
        "stages": draw(st.lists(st.sampled_from(stages), min_size=1, max_size=3, unique=True)),
        "python": draw(st.lists(st.sampled_from(python), max_size=2)),
    }


def base_validate(draw, root: Path) -> dict[str, Any]:
    del root
    stages = ["probe", "network", "driver", "claims", "teams", "utilization", "report", "what_if"]
    host = {"aligned_dra_site": "lab", "aligned_dra_topology": copy.deepcopy(TOPOLOGY)}
    if draw(st.booleans()):
        host["aligned_dra_kubernetes_version"] = draw(st.sampled_from(["1.34", "1.35", "1.36", "1.37"]))
    return {
        "stages": draw(st.lists(st.sampled_from(stages), min_size=1, max_size=3, unique=True)),
        "settings": {"node-a": host, "node-b": copy.deepcopy(host)},
    }


def semantic_claims_render(draw, args: dict[str, Any], root: Path, broken: Broken) -> None:
    what = draw(st.sampled_from(["version", "gates", "settings", "settings", "settings", "site"]))
    if what == "version":
        args["kubernetes_version"] = draw(st.sampled_from(BAD_VERSIONS))
        broken.add(("kubernetes_version",))
    elif what == "site":
        args["site"] = draw(st.sampled_from(["", "Site With Spaces", "x" * 100, "-edge", "ünï"]))
        broken.add(("site",))
    elif what == "gates":
        gate, value = draw(
            st.sampled_from([("Bogus", True), ("DRAConsumableCapacity", "yes"), ("DRAAdminAccess", 1), ("", None)])
        )
        args["feature_gates"] = {gate: value}
        broken.add(("feature_gates", gate))
        broken.add(("feature_gates",))
    else:
        claims_settings_garbage(draw, args, "settings", broken)


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


def break_dest(draw, args: dict[str, Any], root: Path, broken: Broken, file_name: str) -> None:
    """A ``dest`` that cannot be written: an existing directory, or a path under a file."""
    args["dest"] = draw(st.sampled_from([str(root / "emptydir"), str(root / "afile" / file_name), str(root / "out")]))
    broken.add(("dest",))


def claims_settings_garbage(draw, args: dict[str, Any], key: str, broken: Broken) -> None:
    field = settings_garbage(draw, args, key, broken, CLAIMS_SETTINGS_GARBAGE)
    if field == "selectors":
        value = args[key][field]
        args[key][field] = {
            k: (v if not isinstance(v, list) else [draw(st.sampled_from(CEL_GARBAGE))]) for k, v in value.items()
        }


def settings_garbage(draw, args: dict[str, Any], key: str, broken: Broken, choices: list) -> str | None:
    """Set one (field, value) drawn from ``choices`` in the settings mapping ``args[key]``; the field set, if any."""
    conf = args.setdefault(key, {})
    if not isinstance(conf, dict):
        return None
    field, value = draw(st.sampled_from(choices))
    conf[field] = copy.deepcopy(value)
    broken.add((key, field))
    if field == "bogus_key":
        broken.words.append(field)
    return field


def semantic_teams_render(draw, args: dict[str, Any], root: Path, broken: Broken) -> None:
    what = draw(
        st.sampled_from(["teams", "teams", "teams", "claims", "plan_file", "utilization_file", "dest", "version"])
    )
    if what == "utilization_file":
        args["utilization_file"] = str(root / draw(st.sampled_from(BAD_PLAN_FILES)))
        broken.add(("utilization_file",))
    elif what == "claims":
        claims_settings_garbage(draw, args, "claims_settings", broken)
    elif what == "version":
        args["kubernetes_version"] = draw(st.sampled_from(BAD_VERSIONS))
        broken.add(("kubernetes_version",))
    elif what == "plan_file":
        args["plan_file"] = str(root / draw(st.sampled_from(BAD_PLAN_FILES)))
        broken.add(("plan_file",))
    elif what == "dest":
        break_dest(draw, args, root, broken, "teams.json")
    else:
        teams_settings_garbage(draw, args, "settings", broken)


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


def teams_settings_garbage(draw, args: dict[str, Any], key: str, broken: Broken) -> None:
    settings_garbage(draw, args, key, broken, TEAMS_SETTINGS_GARBAGE)


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


def semantic_plan(draw, args: dict[str, Any], root: Path, broken: Broken) -> None:
    what = draw(
        st.sampled_from(
            ["objects", "objects", "topologies", "slices", "files", "required", "device_options", "dest", "version"]
        )
    )
    if what == "objects":
        objects = args.get("objects")
        if not isinstance(objects, list):
            return
        garbage = draw(st.sampled_from(PLAN_OBJECT_GARBAGE))
        objects.append(copy.deepcopy(garbage))
        broken.add(("objects",))
        broken.add(("objects", len(objects) - 1))
    elif what == "topologies":
        for key in ("topology_dir", "slices", "slice_files"):
            args.pop(key, None)
        args["topologies"] = {
            "n1": draw(
                st.sampled_from(
                    [
                        5,
                        "x",
                        {},
                        {"devices": 5},
                        {"devices": [5]},
                        {"devices": [{"kind": "gpu"}]},
                        {"devices": [{"pci_address": "0000:10:00.0", "kind": "gpu", "numa_node": "x"}], "links": 5},
                    ]
                )
            )
        }
        broken.add(("topologies",))
        broken.add(("topologies", "n1"))
    elif what == "slices":
        for key in ("slices", "slice_files", "topologies"):
            args.pop(key, None)
        args["slices"] = draw(
            st.sampled_from(
                [
                    [{}],
                    [{"spec": 5}],
                    [{"kind": "ResourceSlice", "spec": {"nodeName": "n", "devices": "x"}}],
                    [{"kind": "ResourceSlice", "spec": {"nodeName": 5, "driver": "d", "devices": [{"name": 1}]}}],
                ]
            )
        )
        broken.add(("slices",))
        broken.add(("slices", 0))
    elif what == "files":
        for key in ("slices", "topologies"):
            args.pop(key, None)
        which = draw(st.sampled_from(["slice_files", "topology_dir"]))
        if which == "slice_files":
            args["slice_files"] = [str(root / draw(st.sampled_from(BAD_OBJECT_FILES)))]
        else:
            (root / "nodes" / "bad.json").write_text(
                draw(st.sampled_from(["{", "[]", "5", '{"devices": "x"}', "\xff"]))
            )
            args.pop("slice_files", None)
            args["topology_dir"] = str(root / "nodes")
        broken.add((which,))
    elif what == "required":
        args["required"] = draw(st.sampled_from([["ghost"], [""], ["gpu-nic-pair-1", "gpu-nic-pair-1"]]))
        broken.add(("required",))
    elif what == "device_options":
        args["device_options"] = draw(
            st.sampled_from([{"bogus": 1}, {"exclude": 5}, {"exclude": ["["]}, {"kinds": "gpu"}, {"kinds": ["tpu"]}])
        )
        broken.add(("device_options",))
        broken.add(("device_options", next(iter(args["device_options"]))))
    elif what == "dest":
        break_dest(draw, args, root, broken, "plan.json")
    else:
        args["kubernetes_version"] = draw(st.sampled_from(BAD_VERSIONS))
        broken.add(("kubernetes_version",))


def semantic_utilization(draw, args: dict[str, Any], root: Path, broken: Broken) -> None:
    what = draw(st.sampled_from(["files", "lists", "classes", "teams", "plan_file", "topology_dir", "dest", "cluster"]))
    if what == "files":
        key = draw(st.sampled_from(["slice_files", "claim_files"]))
        args.pop(key[: -len("_files")] + "s", None)
        args[key] = [str(root / draw(st.sampled_from(BAD_OBJECT_FILES)))]
        broken.add((key,))
    elif what == "lists":
        key = draw(st.sampled_from(["slices", "claims"]))
        args.pop(key[:-1] + "_files", None)
        args[key] = draw(
            st.sampled_from(
                [
                    [{}],
                    [{"spec": 5}],
                    [{"metadata": 5, "status": "x"}],
                    [
                        {
                            "metadata": {"name": "c", "namespace": "n"},
                            "status": {"allocation": {"devices": {"results": 5}}},
                        }
                    ],
                    [{"spec": {"nodeName": "n", "driver": "d", "devices": [{"name": 1, "attributes": 5}]}}],
                ]
            )
        )
        broken.add((key,))
        broken.add((key, 0))
    elif what == "classes":
        args["classes"] = draw(
            st.sampled_from(
                [
                    [{}],
                    [{"metadata": {"name": "x"}, "spec": {"selectors": [{"cel": {"expression": "device.driver =="}}]}}],
                    [{"metadata": {"name": "x"}, "spec": 5}],
                ]
            )
        )
        broken.add(("classes",))
        broken.add(("classes", 0))
    elif what == "teams":
        teams_settings_garbage(draw, args, "teams", broken)
    elif what == "plan_file":
        args["plan_file"] = str(root / draw(st.sampled_from(BAD_PLAN_FILES)))
        broken.add(("plan_file",))
    elif what == "topology_dir":
        args["topology_dir"] = draw(st.sampled_from([str(root / "afile"), str(root / "missing"), str(root / "out2")]))
        if args["topology_dir"].endswith("out2"):
            (root / "out2").mkdir(exist_ok=True)
            (root / "out2" / "n.json").write_text(draw(st.sampled_from(["{", "[]", '{"devices": "x"}', "\xff"])))
        broken.add(("topology_dir",))
    elif what == "dest":
        break_dest(draw, args, root, broken, "u.json")
    else:
        args["from_cluster"] = True
        for key in ("slices", "claims", "slice_files", "claim_files"):
            args.pop(key, None)
        args["kubeconfig"] = draw(
            st.sampled_from([str(root / "missing"), str(root / "garbage.json"), str(root / "binary.bin")])
        )
        broken.add(("kubeconfig",))
        broken.add(("from_cluster",))


def semantic_site_report(draw, args: dict[str, Any], root: Path, broken: Broken) -> None:
    what = draw(st.sampled_from(["index", "node_file", "plan", "sites", "output_dir"]))
    if what == "index":
        (root / "output" / "index.json").write_text(
            draw(
                st.sampled_from(
                    [
                        "{",
                        "[]",
                        '{"sites": 5}',
                        '{"sites": [{"site": 5}]}',
                        "\xff",
                        '{"sites": [{"site": "w", "node_files": ["../../../etc/passwd"]}]}',
                    ]
                )
            )
        )
    elif what == "node_file":
        (root / "output" / "west" / "nodes" / "vm.json").write_text(
            draw(st.sampled_from(["{", "[]", '{"devices": 5}', "\xff"]))
        )
    elif what == "plan":
        (root / "output" / "west" / "plan.json").write_text(
            draw(st.sampled_from(["{", "[]", '{"templates": 5}', '{"templates": [5]}']))
        )
    elif what == "sites":
        args["sites"] = draw(st.sampled_from([["ghost"], ["../west"], [""], ["west", "west"]]))
        broken.add(("sites",))
        return
    else:
        args["output_dir"] = draw(st.sampled_from([str(root / "afile"), str(root / "emptydir"), str(root / "missing")]))
        broken.add(("output_dir",))
        return
    # A broken file inside output_dir: the failure names output_dir or the file.
    broken.add(("output_dir",))
    broken.words.extend(["index.json", "vm.json", "plan.json"])


def semantic_preflight(draw, args: dict[str, Any], root: Path, broken: Broken) -> None:
    del root
    entry = {"name": "pytest", "import": "pytest", "version": ">=1.0"}
    what = draw(st.sampled_from(["version", "import", "name"]))
    if what == "version":
        entry["version"] = draw(st.sampled_from(["~=1.0", "1.0", ">=x", ">= "]))
    else:
        del entry[what]
    existing = args.get("python")
    args["python"] = [*(existing if isinstance(existing, list) else []), entry]
    broken.add(("python",))


def semantic_validate(draw, args: dict[str, Any], root: Path, broken: Broken) -> None:
    del root
    settings = args.get("settings")
    if not isinstance(settings, dict) or not isinstance(settings.get("node-b"), dict):
        args["settings"] = settings = {"node-b": {}}
    name, value = draw(
        st.sampled_from(
            [
                ("aligned_dra_sysfs_rot", "/sys"),
                ("aligned_dra_drain_timeout", "soon"),
                ("aligned_dra_kubernetes_version", "1.20"),
                ("aligned_dra_claims", {"drivers": "x"}),
                ("aligned_dra_sriov_pfs", [{"netdev": "nope0", "numvfs": 1}]),
            ]
        )
    )
    settings["node-b"][name] = value
    broken.add(("settings",))
