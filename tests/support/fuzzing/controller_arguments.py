# SPDX-License-Identifier: Apache-2.0
"""TEST FIXTURE: valid arguments and semantic garbage for the controller-side modules the fuzzer runs.

``base_<module>`` draws a valid argument set on a scratch directory,
``semantic_<module>`` breaks it the way only that module understands
(Kubernetes versions, claim and team settings, CEL, plan, slice and object files,
placement levels, trace rows, job entries, placement problems and utilization files). Never shipped.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from ansible_collections.aligned.dra.tests.support.fuzzing.values import (
    BAD_OBJECT_FILES,
    BAD_PLAN_FILES,
    BAD_VERSIONS,
    CEL_GARBAGE,
    CLAIMS_SETTINGS_GARBAGE,
    CLASSES,
    JOB_GARBAGE,
    JOB_GATES,
    JOB_RAIL_RULES,
    JOB_SITE,
    JOB_TEAMS,
    JOBS,
    OBJECTS,
    PLACEMENT_LEVELS,
    PLACEMENT_LEVELS_GARBAGE,
    PLACEMENT_PROBLEMS,
    PLAN_OBJECT_GARBAGE,
    SLICES,
    TEAM_JOB,
    TEAMS_SETTINGS_GARBAGE,
    VERSIONS,
    Broken,
    job_catalogue,
    job_placement,
)
from ansible_collections.aligned.dra.tests.support.sites.plan_inputs import PAIR_NODE_TOPOLOGY as TOPOLOGY


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
    if draw(st.booleans()):
        args["placement_levels"] = copy.deepcopy(draw(st.sampled_from([[], PLACEMENT_LEVELS, PLACEMENT_LEVELS[1:]])))
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
        st.sampled_from(
            ["teams", "teams", "teams", "claims", "plan_file", "utilization_file", "dest", "version", "levels"]
        )
    )
    if what == "levels":
        args["placement_levels"] = copy.deepcopy(draw(st.sampled_from(PLACEMENT_LEVELS_GARBAGE)))
        broken.add(("placement_levels",))
        # the levels make a Kueue Topology: only the Kueue engines read them
        if isinstance(args.get("settings"), dict):
            args["settings"]["engine"] = draw(st.sampled_from(["kueue", "both"]))
    elif what == "utilization_file":
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


def teams_settings_garbage(draw, args: dict[str, Any], key: str, broken: Broken) -> None:
    settings_garbage(draw, args, key, broken, TEAMS_SETTINGS_GARBAGE)


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


# -- replay ----------------------------------------------------------------------------------

REPLAY_BAD_ROWS = [
    "pod-x,4000,16384,1,1200,,BE,Running,0,600,0",
    "pod-x,4k,16384,1,500,,BE,Running,0,600,0",
    "pod-x,4000,16384,0,500,,BE,Running,0,600,0",
    "pod-x,4000,16384,1,500,,BE,Running,600,0,0",
    "pod-x,4000,16384,1,500,A||B,BE,Running,0,600,0",
    "pod-x,4000,16384,1,500",
    "pod-01,4000,16384,1,500,,BE,Running,0,600,0",
]


def base_replay(draw, root: Path) -> dict[str, Any]:
    replay = root / "replay"
    args: dict[str, Any] = {"trace": str(replay / "openb-pods.csv")}
    if draw(st.booleans()):
        args["plan"] = str(replay / draw(st.sampled_from(["plan-1.36.json", "plan-1.35.json"])))
    else:
        args["nodes"] = str(replay / "openb-nodes.csv")
    if draw(st.booleans()):
        args.update(trace=str(replay / "generic.csv"), trace_format="csv")
    for key, choices in (("policy", ["whole", "fractional"]), ("order", ["pack", "spread"])):
        if draw(st.booleans()):
            args[key] = draw(st.sampled_from(choices))
    if draw(st.booleans()):
        args["mode"] = draw(st.sampled_from(["saturation", "timeline"]))
    if draw(st.booleans()):
        args["dest"] = str(root / "out" / "replay.json")
    return args


def semantic_replay(draw, args: dict[str, Any], root: Path, broken: Broken) -> None:
    what = draw(st.sampled_from(["trace", "trace_format", "nodes", "plan", "gpu_class", "dest"]))
    if what == "trace":
        bad = root / "bad-trace.csv"
        pods = (root / "replay" / "openb-pods.csv").read_text()
        bad.write_text(pods + draw(st.sampled_from(REPLAY_BAD_ROWS)) + "\n")
        args.update(trace=str(bad), trace_format="openb")
        broken.add(("trace",))
    elif what == "trace_format":
        # the openb trace read as the generic CSV, or the other way round
        generic = args.get("trace_format") == "csv"
        args["trace_format"] = "openb" if generic else "csv"
        broken.add(("trace",))
    elif what == "nodes":
        args.pop("plan", None)
        args["nodes"] = draw(
            st.sampled_from([str(root / "replay" / "openb-pods.csv"), str(root / "emptydir"), str(root / "binary.bin")])
        )
        broken.add(("nodes",))
    elif what == "plan":
        args.pop("nodes", None)
        args["plan"] = str(root / draw(st.sampled_from([*BAD_PLAN_FILES, "afile"])))
        broken.add(("plan",))
    elif what == "gpu_class":
        args.pop("nodes", None)
        args["plan"] = str(root / "replay" / "plan-1.36.json")
        args["gpu_class"] = draw(st.sampled_from(["nvidia-gpu", "", "aligned-nic-typo"]))
        broken.add(("gpu_class",))
    else:
        break_dest(draw, args, root, broken, "replay.json")


# -- jobs ------------------------------------------------------------------------------------


def base_jobs(draw, root: Path) -> dict[str, Any]:
    """The 16-node site with its levels (or none), its catalogue for the minor, zero to three of its jobs."""
    from ansible_collections.aligned.dra.plugins.module_utils.dra.gates import minor_of

    version = draw(st.sampled_from(VERSIONS))
    levels = draw(st.sampled_from([True, True, False]))
    jobs = [copy.deepcopy(JOBS[i]) for i in draw(st.lists(st.sampled_from(range(len(JOBS))), max_size=3, unique=True))]
    if not levels:
        for job in jobs:
            job.pop("placement", None)
    args: dict[str, Any] = {
        "site": JOB_SITE,
        "kubernetes_version": version,
        "jobs": jobs,
        "placement": job_placement(levels),
        "objects": job_catalogue(minor_of(version)),
        "rail_rules": copy.deepcopy(JOB_RAIL_RULES),
    }
    if draw(st.booleans()):
        args["topology_dir"] = str(root / "nodes")
    else:
        args["topology_files"] = {host: str(root / "nodes" / f"{host}.json") for host in args["placement"]["domains"]}
    if draw(st.booleans()):
        args["feature_gates"] = dict(JOB_GATES)
    if draw(st.booleans()):
        args["teams_settings"] = copy.deepcopy(JOB_TEAMS)
        jobs.append(copy.deepcopy(TEAM_JOB))
    if draw(st.booleans()):
        args["claims_settings"] = {"namespace": "default"}
    if draw(st.booleans()):
        args["rail_node_names"] = {host: host for host in JOB_RAIL_RULES}
    if draw(st.booleans()):
        args["utilization_file"] = str(root / "utilization.json")
    if draw(st.booleans()):
        args["dest"] = str(root / "out" / "jobs.json")
    return args


# What semantic_jobs breaks; a bad job entry most often.
JOB_MUTATIONS = ["job"] * 3 + ["duplicate", "problems", "levels", "utilization_file", "topology_dir", "version", "dest"]


def semantic_jobs(draw, args: dict[str, Any], root: Path, broken: Broken) -> None:
    what = draw(st.sampled_from(JOB_MUTATIONS))
    if what in ("job", "duplicate"):
        jobs = args.get("jobs")
        if not isinstance(jobs, list):
            args["jobs"] = jobs = []
        if not jobs or draw(st.booleans()):
            # a job that is valid with levels or without (no placement), named apart from the others
            jobs.append(dict(copy.deepcopy(JOBS[-1]), name=f"extra-{len(jobs)}"))
        index = draw(st.integers(0, len(jobs) - 1))
        if not isinstance(jobs[index], dict):
            jobs[index] = dict(copy.deepcopy(JOBS[-1]), name=f"extra-{index}")
        if what == "duplicate":
            jobs.append(copy.deepcopy(jobs[index]))
            broken.add(("jobs", len(jobs) - 1, "name"))
        else:
            field = draw(st.sampled_from(sorted(JOB_GARBAGE)))
            patch = copy.deepcopy(draw(st.sampled_from(JOB_GARBAGE[field])))
            jobs[index].update(patch)
            if field == "unknown key":
                # the key itself, inside the job or inside its placement
                key = next(iter(patch["placement"] if "placement" in patch else patch))
                broken.add(("jobs", index, key))
            elif field in ("level", "mode"):
                broken.add(("jobs", index, "placement", field))
            else:
                broken.add(("jobs", index, field))
            if "placement" in patch:
                # a site without levels refuses any placement first, naming its level
                broken.add(("jobs", index, "placement"))
    elif what in ("problems", "levels"):
        if not isinstance(args.get("placement"), dict):
            args["placement"] = job_placement(True)
        if what == "problems":
            # what the aligned.dra.placement filter reports about the site
            args["placement"]["problems"] = [draw(st.sampled_from(PLACEMENT_PROBLEMS))]
            broken.add(("placement",))
        else:
            # levels the filter would have refused: named as the inventory variable they come from
            args["placement"]["levels"] = copy.deepcopy(draw(st.sampled_from(PLACEMENT_LEVELS_GARBAGE)))
            broken.add(("placement", "levels"))
            broken.words.append("aligned_dra_placement_levels")
    elif what == "utilization_file":
        bad = [*BAD_PLAN_FILES, "afile", "missing.json", "utilization-rows.json", "utilization-map.json"]
        args["utilization_file"] = str(root / draw(st.sampled_from(bad)))
        broken.add(("utilization_file",))
    elif what == "topology_dir":
        for key in ("topologies", "topology_files", "slices", "slice_files"):
            args.pop(key, None)
        bad = draw(st.sampled_from(["afile", "missing", "emptydir", "badnodes"]))
        if bad == "badnodes":
            (root / bad).mkdir(exist_ok=True)
            (root / bad / "gpu-00.json").write_text(draw(st.sampled_from(["{", "[]", '{"devices": "x"}', "\xff"])))
        args["topology_dir"] = str(root / bad)
        broken.add(("topology_dir",))
    elif what == "version":
        args["kubernetes_version"] = draw(st.sampled_from(BAD_VERSIONS))
        broken.add(("kubernetes_version",))
    else:
        break_dest(draw, args, root, broken, "jobs.json")


# -- output_files -------------------------------------------------------------------------

OUTPUT_NAMES = ["a.yaml", "kustomization.yaml", "ünïcødé.md", "b.json"]


def base_output_files(draw, root: Path) -> dict[str, Any]:
    """A directory (new, or out/ with an object of an earlier run) and one to three files from content."""
    names = draw(st.lists(st.sampled_from(OUTPUT_NAMES), min_size=1, max_size=3, unique=True))
    args: dict[str, Any] = {
        "dest": draw(st.sampled_from([str(root / "out"), str(root / "new" / "claims"), "relative/dir"])),
        "files": [{"name": name, "content": draw(st.sampled_from(["", "x\n", "kind: A\n" * 50]))} for name in names],
    }
    if draw(st.booleans()):
        args["prune"] = draw(st.sampled_from([["*.yaml"], ["*"], ["gone.yaml", "*.json"]]))
    if draw(st.booleans()):
        args["mode"] = draw(st.sampled_from(["0600", "0644", 0o640]))
    if draw(st.booleans()):
        args["directory_mode"] = draw(st.sampled_from(["0700", "0755", "preserve"]))
    return args


def semantic_output_files(draw, args: dict[str, Any], root: Path, broken: Broken) -> None:
    what = draw(st.sampled_from(["name", "content", "twice", "directory", "dest", "mode"]))
    files = args.get("files")
    if not isinstance(files, list) or not files or not all(isinstance(f, dict) for f in files):
        args["files"] = files = [{"name": "a.yaml", "content": "a\n"}]
    if what == "name":
        files[0]["name"] = draw(st.sampled_from(["", ".", "..", "a/b.yaml", "../up.yaml", "x.tmp", 5, None]))
        broken.add(("files", 0, "name"))
    elif what == "content":
        files[0].pop("content", None)
        key = draw(st.sampled_from(["content", "template"]))
        files[0][key] = draw(st.sampled_from([None, 5, ["x"], "t.j2"]))
        broken.add(("files", 0, key))
    elif what == "twice":
        files.append(dict(files[0]))
        broken.add(("files", len(files) - 1, "name"))
        broken.words.append("given twice")
    elif what == "directory":
        # a file whose name is an existing directory of the destination
        args["dest"] = str(root)
        files[0]["name"] = "emptydir"
        broken.add(("files",))
    elif what == "dest":
        args["dest"] = draw(
            st.sampled_from([str(root / "afile"), str(root / "afile" / "sub"), str(root / "binary.bin")])
        )
        broken.add(("dest",))
    else:
        key = draw(st.sampled_from(["mode", "directory_mode"]))
        args[key] = draw(st.sampled_from(["rw-r--r--", "0999", "-1", 1.5, True, "", 0o17777]))
        broken.add((key,))
