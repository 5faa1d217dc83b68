# SPDX-License-Identifier: Apache-2.0
"""Every module fuzzed on its arguments.

For each module the argument spec is read from the module itself (its
``AnsibleModule(...)`` call is intercepted), so an option added later is
fuzzed without touching this file, and it is checked against the module's
DOCUMENTATION. Hypothesis then draws, per module, a valid argument set on a
scratch copy of a fixture (sysfs trees, output directories, files) and
applies zero to three mutations to it:

- generic ones derived from the spec: wrong types, out-of-range numbers,
  empty, huge, unicode, NUL and traversal strings, values outside
  ``choices``, ``null``, missing required options, unknown keys at the top
  and inside suboptions, mutually exclusive pairs, wrong list elements and
  dict entries with missing or extra keys;
- module-specific semantic garbage: PCI addresses, VF counts and indexes,
  VLANs, QoS, MACs, TX rates, kernel module names, Kubernetes versions,
  feature gates, claim and team settings, CEL selectors, plan and slice
  files with the wrong shape, paths that do not exist or are files where a
  directory is wanted.

Each mutation records the field it broke. The rule checked for every
example (docs/development.md, "How modules fail"):

1. the module ends through ``exit_json`` or ``fail_json``; any other
   exception is a test failure (its traceback is the report);
2. without mutations it succeeds (the drawn base is valid);
3. a failure's ``msg`` names a broken field: its full path as the module
   spells it (``pfs[0].vfs[1].vlan``, ``settings.drivers``, or the role
   variable the option documents, ``aligned_dra_claims.drivers``), or the
   entry that holds it and its name (``pfs[0]: ... pci_address, netdev``), or,
   when Ansible's own argument parser refuses it before the module's code
   runs, its option name (Ansible names suboptions without list indexes); a
   field inside a free-form option (``settings``, ``objects``) may also be
   named by a message that starts with the option and names what the module
   built from it (``settings: rendered objects are not valid: DeviceClass
   aligned-gpu: spec.selectors[1].cel: ...``);
4. a failure reports ``changed`` false (or none) and leaves every file of
   the scratch directory as it was (content, links, modes); the one
   documented exception is M(aligned.dra.plan)'s verdict on required
   templates, which writes C(plan.json) so the report can show why;
5. check mode never changes a file; ``changed: false`` never does either
   (a file rewritten with the same bytes counts as changed).

The scratch directory is the working directory during a run, and every
path drawn lies inside it (relative paths too): nothing outside it can be
written, and no drawn value names the live ``/sys``.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import importlib
import io
import json
import os
import shutil
import stat
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import yaml
from ansible.module_utils.testing import patch_module_args
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.aligned.dra.plugins.module_utils.node.network import sriov as sriov_lib
from ansible_collections.aligned.dra.tests.fake_sysfs_sriov import FakeSriovKernel
from ansible_collections.aligned.dra.tests.plan_inputs import PAIR_NODE_TOPOLOGY as TOPOLOGY
from ansible_collections.aligned.dra.tests.plan_inputs import pair_objects
from ansible_collections.aligned.dra.tests.report_sites import topology_of, write_site
from ansible_collections.aligned.dra.tests.sysfs_builder import build_tree, load_layout

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
SRIOV_LAYOUT = FIXTURES / "network" / "sriov-lab.yml"
UTILIZATION_SET = FIXTURES / "utilization" / "ai-lab"
PACKAGE = "ansible_collections.aligned.dra.plugins.modules."

# Examples per module: enough to reach every option and mutation many times,
# few enough that the file stays well under a minute (figures in docs/development.md).
EXAMPLE_COUNTS = {
    "topology_info": 80,
    "rdma": 300,
    "sriov": 150,
    "claims_render": 100,
    "plan": 200,
    "teams_render": 120,
    "utilization": 200,
    "site_report": 150,
    "topology_capture": 60,
    "topology_snapshot": 80,
    "preflight": 60,
    "validate": 60,
    "network_plan": 120,
    "topology_output": 80,
}
# ALIGNED_DRA_FUZZ_SCALE=10 runs ten times as many (a deeper search, by hand).
SCALE = float(os.environ.get("ALIGNED_DRA_FUZZ_SCALE", "1"))

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


ANSIBLE_DICT_MESSAGE = "dictionary requested, could not parse JSON or key=value"


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


def _shape(options: dict[str, Any] | None, nested: str) -> dict[str, Any]:
    """Names, types, choices, defaults and nesting of options; ``nested`` is where sub-options sit
    (``suboptions`` in DOCUMENTATION, ``options`` in an argument spec)."""
    shape = {}
    for key, entry in (options or {}).items():
        shape[key] = {
            "type": entry.get("type", "str"),
            "elements": entry.get("elements"),
            "choices": sorted(entry["choices"]) if "choices" in entry else None,
            "required": bool(entry.get("required", False)),
            "default": entry.get("default"),
            "options": _shape(entry[nested], nested) if nested in entry else None,
        }
    return shape


@pytest.mark.parametrize("name", sorted(EXAMPLE_COUNTS))
def test_documentation_matches_the_fuzzed_spec(name):
    """What is fuzzed is what is documented: names, types, choices, defaults, suboptions."""
    documented = yaml.safe_load(load(name).DOCUMENTATION)["options"]
    assert _shape(module_spec(name)["argument_spec"], "options") == _shape(documented, "suboptions")


def test_every_module_is_fuzzed():
    shipped = sorted(p.stem for p in (Path(load("plan").__file__).parent).glob("*.py") if p.stem != "__init__")
    assert shipped == sorted(EXAMPLE_COUNTS)


# -- scratch trees ------------------------------------------------------------------


def digest(root: Path) -> str:
    """Names, types, modes, sizes, modification times and link targets of everything under root.

    A write changes a file's modification time even when it writes the same
    bytes, so this sees every write without reading every file of a sysfs tree.
    Links are compared by target only (a copied link gets a new time).
    """
    sha = hashlib.sha256()
    stack = [("", str(root))]
    while stack:
        rel, path = stack.pop()
        with os.scandir(path) as found:
            entries = sorted(found, key=lambda e: e.name)
        for entry in entries:
            info = entry.stat(follow_symlinks=False)
            name = f"{rel}/{entry.name}"
            if stat.S_ISLNK(info.st_mode):
                sha.update(f"{name}\0link\0{os.readlink(entry.path)}\0".encode(errors="surrogateescape"))
                continue
            sha.update(f"{name}\0{info.st_mode}\0{info.st_size}\0{info.st_mtime_ns}\0".encode(errors="surrogateescape"))
            if stat.S_ISDIR(info.st_mode):
                stack.append((name, entry.path))
    return sha.hexdigest()


def _common(root: Path) -> None:
    (root / "afile").write_text("a file, not a directory\n")
    (root / "emptydir").mkdir()
    (root / "garbage.json").write_text('{"schema_version": 1, "classes": 5, "templates": "x"')
    (root / "wrong-shape.json").write_text('[1, "two", {"three": null}]')
    (root / "binary.bin").write_bytes(b"\xff\xfe\x00\x01garbage\x80\n")
    (root / "list.yaml").write_text("kind: ResourceSliceList\nitems: 5\n")
    (root / "scalar.yaml").write_text("just a string\n---\n42\n")


def template_topology_info(root: Path) -> None:
    build_tree(load_layout(SRIOV_LAYOUT), root / "node")
    (root / "pci.ids").write_text("15b3  Mellanox Technologies\n\t1021  MT2910 Family [ConnectX-7]\n")


def template_rdma(root: Path) -> None:
    params = root / "sys/module/ib_core/parameters"
    params.mkdir(parents=True)
    (params / "netns_mode").write_text("Y\n")
    (root / "sys/module/mlx5_ib").mkdir()
    (root / "proc").mkdir()
    (root / "etc/modprobe.d").mkdir(parents=True)


def template_sriov(root: Path) -> None:
    build_tree(load_layout(SRIOV_LAYOUT), root / "node")
    (root / "state").mkdir()


def template_plan(root: Path) -> None:
    (root / "nodes").mkdir()
    (root / "nodes" / "n1.json").write_text(json.dumps(TOPOLOGY))
    (root / "slices.json").write_text(json.dumps(SLICES))
    (root / "out").mkdir()


def template_teams_render(root: Path) -> None:
    (root / "plan.json").write_text(json.dumps({"schema_version": 1, "classes": {"aligned-gpu": {"devices": 8}}}))
    (root / "out").mkdir()


def template_utilization(root: Path) -> None:
    shutil.copytree(UTILIZATION_SET, root / "set")
    (root / "out").mkdir()


def template_site_report(root: Path) -> None:
    write_site(root / "output", "west", {"vm": topology_of("vm-flat")})


def template_claims_render(root: Path) -> None:
    del root


def template_preflight(root: Path) -> None:
    del root


def template_validate(root: Path) -> None:
    del root


def template_network_plan(root: Path) -> None:
    build_tree(load_layout(SRIOV_LAYOUT), root / "node")
    params = root / "node/sys/module/ib_core/parameters"
    params.mkdir(parents=True, exist_ok=True)
    (params / "netns_mode").write_text("Y\n")
    (root / "state").mkdir()
    (root / "etc/modprobe.d").mkdir(parents=True)


def template_topology_output(root: Path) -> None:
    (root / "out").mkdir()


def template_topology_capture(root: Path) -> None:
    build_tree(load_layout(FIXTURES / "layouts" / "vm-flat.yml"), root / "node")


def template_topology_snapshot(root: Path) -> None:
    from ansible_collections.aligned.dra.plugins.module_utils.node.snapshots.archive import write_archive

    (root / "node.tar.gz").write_bytes(
        write_archive(
            {
                "sys/devices/pci0000:00/0000:00:03.0/vendor": ("file", b"0x8086\n"),
                "sys/bus/pci/devices/0000:00:03.0": ("link", "../../../devices/pci0000:00/0000:00:03.0"),
                "proc/sys/kernel/hostname": ("file", b"n1\n"),
            }
        )
    )
    (root / "escape.tar.gz").write_bytes(
        write_archive({"sys/class": ("dir",), "sys/class/up": ("link", "../../../etc")})
    )


TEMPLATES = {name: globals()["template_" + name] for name in EXAMPLE_COUNTS}


# -- running a module in-process ----------------------------------------------------


def run_module(name: str, args: dict[str, Any], root: Path) -> tuple[dict[str, Any], bool]:
    """(result, whether the module's own code ran) of one in-process run.

    Ends through exit_json/fail_json (SystemExit) or the test fails: any other
    exception propagates with its traceback.
    """
    module = load(name)
    parsed = {"done": False}

    class Spy(module.AnsibleModule):
        def __init__(self, *a: Any, **k: Any) -> None:
            super().__init__(*a, **k)
            parsed["done"] = True

        def warn(self, warning: str) -> None:
            del warning

    def refuse(*a: Any, **k: Any) -> None:
        raise AssertionError("the live node was about to be touched")

    out = io.StringIO()
    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(module, "AnsibleModule", Spy))
        stack.enter_context(mock.patch.object(Spy, "run_command", refuse))
        stack.enter_context(mock.patch.dict(os.environ, {"KUBECONFIG": str(root / "no-kubeconfig"), "HOME": str(root)}))
        stack.enter_context(contextlib.redirect_stdout(out))
        stack.enter_context(patch_module_args(args))
        if name in ("sriov", "network_plan"):
            kernel = FakeSriovKernel(os.path.join(str(root), "node", "sys"))
            stack.enter_context(mock.patch.object(sriov_lib, "SysfsWriter", lambda: kernel))
            stack.enter_context(mock.patch.object(sriov_lib.netlink_link, "Links", refuse))
            stack.enter_context(mock.patch.object(sriov_lib.netlink_link, "Devlink", refuse))
        cwd = os.getcwd()
        os.chdir(root)
        try:
            with pytest.raises(SystemExit):
                module.main()
        finally:
            os.chdir(cwd)
    return json.loads(out.getvalue()), parsed["done"]


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
SLICES: list[dict[str, Any]] = []
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


def _sriov_pf(draw) -> dict[str, Any]:
    which = draw(st.sampled_from(["cx0", "cx1", "e810"]))
    if which == "cx0":
        pf: dict[str, Any] = {"pci_address": "0000:01:00.0"}
        total = 8
    elif which == "cx1":
        pf = {"netdev": draw(st.sampled_from(["enp1s0f1np0"]))}
        total = 8
    else:
        pf = {"vendor_id": draw(st.sampled_from(["0x8086", "8086"])), "device_id": "0x1592", "index": 0}
        total = 16
    if which == "cx1":
        numvfs = draw(st.sampled_from([None, 2]))  # its two VFs exist; a change would be refused as in use
    else:
        numvfs = draw(st.sampled_from([None, 0, 1, 2, total]))
    if numvfs is not None:
        pf["numvfs"] = numvfs
    if draw(st.booleans()):
        pf["drivers_autoprobe"] = draw(st.booleans())
    if draw(st.booleans()):
        pf["mtu"] = draw(st.sampled_from([68, 1500, 9000]))
    count = numvfs if numvfs is not None else (2 if which == "cx1" else 0)
    if count and draw(st.booleans()):
        vfs = []
        for index in range(min(count, 2)):
            vf = {"index": index, "vlan": draw(st.integers(0, 4095)), "spoofchk": draw(st.booleans())}
            if draw(st.booleans()):
                vf["mac"] = f"02:00:00:00:0{which == 'e810':d}:{index:02x}"
            if vf["vlan"] and draw(st.booleans()):
                vf["qos"] = draw(st.integers(0, 7))
            vfs.append(vf)
        pf["vfs"] = vfs
    if draw(st.booleans()):
        pf["vf_defaults"] = {"trust": draw(st.booleans()), "link_state": draw(st.sampled_from(["auto", "enable"]))}
    if draw(st.booleans()):
        pf["missing"] = "fail"
    return pf


def base_topology_info(draw, root: Path) -> dict[str, Any]:
    args = {"sysfs_root": str(root / "node/sys"), "procfs_root": str(root / "node/proc")}
    if draw(st.booleans()):
        args["pci_ids_path"] = str(root / "pci.ids")
    return args


def base_rdma(draw, root: Path) -> dict[str, Any]:
    args = {
        "sysfs_root": str(root / "sys"),
        "procfs_root": str(root / "proc"),
        "modprobe_dir": str(root / "etc/modprobe.d"),
        "modules_load_dir": str(root / "etc/modules-load.d"),
    }
    if draw(st.booleans()):
        args["netns_mode"] = draw(st.sampled_from(["shared", "exclusive"]))
    if draw(st.booleans()):
        args["modules"] = draw(st.lists(st.sampled_from(["ib_core", "mlx5_ib", "ib-umad", "rdma_ucm"]), unique=True))
    return args


def base_sriov(draw, root: Path) -> dict[str, Any]:
    pfs = [_sriov_pf(draw)]
    if draw(st.booleans()):
        second = _sriov_pf(draw)
        if not any(set(second) & {"pci_address", "netdev", "vendor_id"} & set(pf) for pf in pfs):
            pfs.append(second)
    args = {
        "pfs": pfs,
        "sysfs_root": str(root / "node/sys"),
        "procfs_root": str(root / "node/proc"),
        "driver_state_dir": str(root / "state"),
    }
    if draw(st.booleans()):
        args["settle_timeout"] = draw(st.sampled_from([0.5, 1, 10]))
    if draw(st.booleans()):
        args["vf_drivers"] = ["vfio-pci"]
    return args


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


def base_topology_capture(draw, root: Path) -> dict[str, Any]:
    args = {"sysfs_root": str(root / "node/sys"), "procfs_root": str(root / "node/proc"), "dest": "node.tar.gz"}
    if draw(st.booleans()):
        args["redact_addresses"] = draw(st.booleans())
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


def base_topology_snapshot(draw, root: Path) -> dict[str, Any]:
    return {"src": str(root / "node.tar.gz"), "dest": draw(st.sampled_from(["cache/node", str(root / "tree")]))}


def base_network_plan(draw, root: Path) -> dict[str, Any]:
    """The rdma and sriov modules' bases on one node tree (the options have the same names)."""
    rdma = base_rdma(draw, root)
    args = {key: rdma[key] for key in ("netns_mode", "modules") if key in rdma}
    args["modprobe_dir"] = str(root / "etc/modprobe.d")
    args["modules_load_dir"] = str(root / "etc/modules-load.d")
    if draw(st.booleans()):
        sriov = base_sriov(draw, root)
        args.update({key: sriov[key] for key in ("pfs", "driver_state_dir", "vf_drivers") if key in sriov})
    args.update(sysfs_root=str(root / "node/sys"), procfs_root=str(root / "node/proc"))
    return args


def base_topology_output(draw, root: Path) -> dict[str, Any]:
    nodes = {"n1": {"site": "lab", "topology": copy.deepcopy(TOPOLOGY)}}
    if draw(st.booleans()):
        nodes["n2.example"] = {"site": draw(st.sampled_from(["lab", "west-2"])), "topology": copy.deepcopy(TOPOLOGY)}
    return {
        "output_dir": draw(st.sampled_from([str(root / "out"), "out/new"])),
        "nodes": nodes,
        "sites": draw(st.sampled_from([[], ["lab"], ["lab", "empty"]])),
    }


BASES = {name: globals()["base_" + name] for name in EXAMPLE_COUNTS}


def _pick_pf(draw, args: dict[str, Any]) -> int | None:
    pfs = args.get("pfs")
    if not isinstance(pfs, list) or not pfs or not all(isinstance(pf, dict) for pf in pfs):
        return None
    return draw(st.integers(0, len(pfs) - 1))


def semantic_sriov(draw, args: dict[str, Any], root: Path, broken: Broken) -> None:
    i = _pick_pf(draw, args)
    if i is None:
        return
    pf = args["pfs"][i]
    what = draw(
        st.sampled_from(
            [
                "pci_address",
                "netdev",
                "ids",
                "numvfs",
                "vf",
                "vf_index",
                "dup_mac",
                "selectors",
                "same_pf",
                "mtu",
                "vf_defaults",
                "settle_timeout",
                "checkpoint",
                "state_dir",
            ]
        )
    )
    if what == "pci_address":
        for key in ("netdev", "vendor_id", "device_id", "index"):
            pf.pop(key, None)
        pf["pci_address"] = draw(
            st.sampled_from(
                [
                    "0000:01:00.9",
                    "01:00.0",
                    "0000:01:00.0 ",
                    "ZZZZ:01:00.0",
                    "0000:ff:1f.7",
                    "0000:01:02.0",
                    "0000:02:00.0",
                    "0000:01:00",
                    "",
                    "0000:01:00.0\x00",
                ]
            )
        )
        broken.add(("pfs", i, "pci_address"))
    elif what == "netdev":
        for key in ("pci_address", "vendor_id", "device_id", "index"):
            pf.pop(key, None)
        pf["netdev"] = draw(st.sampled_from(["lo0", "a/b", "a b", "x" * 16, "", "eth:0", "enp1s0f1np0v0", "ünï"]))
        broken.add(("pfs", i, "netdev"))
    elif what == "ids":
        for key in ("pci_address", "netdev"):
            pf.pop(key, None)
        key = draw(st.sampled_from(["vendor_id", "device_id", "index"]))
        pf.setdefault("vendor_id", "0x15b3")
        pf.setdefault("device_id", "0x1021")
        pf[key] = draw(
            st.sampled_from(
                ["0x15b", "zzzz", "", "0x15b3x", 5555, -1, 7, 4096] if key != "index" else [-1, 2, 99, 5000]
            )
        )
        broken.add(("pfs", i, key))
    elif what == "numvfs":
        pf["numvfs"] = draw(st.sampled_from([-1, 9, 17, 65536, 2**40]))
        broken.add(("pfs", i, "numvfs"))
    elif what == "vf":
        if "vfs" not in pf:
            pf["vfs"] = [{"index": 0}]
            broken.add(("pfs", i, "vfs", 0, "index"))  # VF 0 need not exist on this PF
        vfs = pf["vfs"]
        if not isinstance(vfs, list) or not vfs or not isinstance(vfs[0], dict):
            return
        key, value = draw(
            st.sampled_from(
                [
                    ("vlan", -1),
                    ("vlan", 4096),
                    ("vlan", "100x"),
                    ("qos", 8),
                    ("qos", -1),
                    ("mac", "01:00:5e:00:00:01"),
                    ("mac", "02:00:00:00:00"),
                    ("mac", "zz:00:00:00:00:01"),
                    ("mac", 42),
                    ("min_tx_rate", -1),
                    ("max_tx_rate", 2**32),
                    ("link_state", "up"),
                    ("link_state", 1),
                    ("trust", "maybe"),
                    ("spoofchk", 3),
                    ("colour", "red"),
                ]
            )
        )
        j = draw(st.integers(0, len(vfs) - 1))
        if not isinstance(vfs[j], dict):
            return
        vfs[j][key] = value
        if key == "colour":
            broken.words.append("colour")
        broken.add(("pfs", i, "vfs", j, key))
    elif what == "vf_index":
        pf.setdefault("numvfs", 2 if "netdev" in pf else 1)
        numvfs = pf["numvfs"]
        if isinstance(numvfs, bool) or not isinstance(numvfs, int) or numvfs < 1:
            broken.add(("pfs", i, "vfs", 0, "index"))  # an earlier mutation left no VF 0
        shape = draw(
            st.sampled_from(["missing", "negative", "beyond", "dup", "text", "not-a-dict", "qos-no-vlan", "rates"])
        )
        if shape == "missing":
            pf["vfs"] = [{"vlan": 3}]
            broken.add(("pfs", i, "vfs", 0, "index"))
        elif shape == "negative":
            pf["vfs"] = [{"index": -1}]
            broken.add(("pfs", i, "vfs", 0, "index"))
        elif shape == "beyond":
            pf["vfs"] = [{"index": 40}]
            broken.add(("pfs", i, "vfs", 0, "index"))
            broken.add(("pfs", i, "vfs"))
            broken.add(("pfs", i, "numvfs"))
        elif shape == "dup":
            pf["numvfs"] = 2
            pf["vfs"] = [{"index": 0}, {"index": 0}]
            broken.add(("pfs", i, "vfs", 1, "index"))
        elif shape == "text":
            pf["vfs"] = [{"index": "first"}]
            broken.add(("pfs", i, "vfs", 0, "index"))
        elif shape == "not-a-dict":
            pf["vfs"] = ["0"]
            broken.add(("pfs", i, "vfs", 0, "index"))
            broken.add(("pfs", i, "vfs"))
        elif shape == "qos-no-vlan":
            pf["vfs"] = [{"index": 0, "qos": 3}]
            broken.add(("pfs", i, "vfs", 0, "qos"))
        else:
            pf["vfs"] = [{"index": 0, "min_tx_rate": 500, "max_tx_rate": 100}]
            broken.add(("pfs", i, "vfs", 0, "min_tx_rate"))
    elif what == "dup_mac":
        pf["numvfs"] = 2
        pf["vfs"] = [{"index": 0, "mac": "02:00:00:00:00:01"}, {"index": 1, "mac": "02:00:00:00:00:01"}]
        broken.add(("pfs", i, "vfs"))
    elif what == "selectors":
        shape = draw(st.sampled_from(["two", "none", "index-alone"]))
        if shape == "two":
            pf.update(pci_address="0000:01:00.0", netdev="enp1s0f0np0")
        elif shape == "none":
            for key in ("pci_address", "netdev", "vendor_id", "device_id", "index"):
                pf.pop(key, None)
        else:
            pf.pop("vendor_id", None)
            pf.pop("device_id", None)
            pf["index"] = 0
            if "netdev" not in pf:
                pf["pci_address"] = "0000:01:00.0"
            broken.add(("pfs", i, "index"))
        broken.add(("pfs", i))
    elif what == "same_pf":
        args["pfs"].append({"pci_address": "0000:01:00.1"})
        args["pfs"].append({"netdev": "enp1s0f1np0"})
        broken.add(("pfs", len(args["pfs"]) - 1))
        broken.add(("pfs", len(args["pfs"]) - 2))
    elif what == "mtu":
        pf["mtu"] = draw(st.sampled_from([0, 67, 65536, -9000]))
        broken.add(("pfs", i, "mtu"))
    elif what == "vf_defaults":
        pf["vf_defaults"] = draw(
            st.sampled_from([{"vlan": 5000}, {"qos": 2}, {"mac": "ff:ff:ff:ff:ff:ff"}, {"bogus": 1}, {"index": "x"}])
        )
        broken.add(("pfs", i, "vf_defaults"))
        broken.words.append("bogus")
    elif what == "settle_timeout":
        args["settle_timeout"] = draw(st.sampled_from([-1, "nan", "inf", "-inf", -0.001]))
        broken.add(("settle_timeout",))
    elif what == "checkpoint":
        (root / "state" / "checkpoint.json").write_text(
            draw(
                st.sampled_from(
                    ["{", "[]", '{"claims": 5}', '{"claims": {"u": {"devices": [{"pci_address": 5}]}}}', "\xff"]
                )
            )
        )
        broken.add(("driver_state_dir",))
    else:
        args["driver_state_dir"] = draw(
            st.sampled_from([str(root / "afile"), str(root / "missing"), str(root / "binary.bin")])
        )
        broken.add(("driver_state_dir",))


def semantic_rdma(draw, args: dict[str, Any], root: Path, broken: Broken) -> None:
    what = draw(st.sampled_from(["modules", "duplicate", "file_dirs", "sysfs"]))
    if what == "modules":
        args["modules"] = [
            "ib_core",
            draw(st.sampled_from(["ib core", "", "a" * 65, "../x", "mlx5_ib\x00", "ünï", "-", "a.b"])),
        ]
        broken.add(("modules",))
    elif what == "duplicate":
        args["modules"] = ["mlx5_ib", "mlx5-ib"]
        broken.add(("modules",))
    elif what == "file_dirs":
        key = draw(st.sampled_from(["modprobe_dir", "modules_load_dir"]))
        args[key] = draw(st.sampled_from([str(root / "afile"), str(root / "afile" / "sub"), str(root / "binary.bin")]))
        args.setdefault("netns_mode", "exclusive")
        args.setdefault("modules", ["ib_core"])
        broken.add((key,))
    else:
        args["sysfs_root"] = draw(st.sampled_from([str(root / "missing"), str(root / "afile")]))
        broken.add(("sysfs_root",))


def semantic_topology_info(draw, args: dict[str, Any], root: Path, broken: Broken) -> None:
    key = draw(st.sampled_from(["sysfs_root", "procfs_root", "pci_ids_path"]))
    if key == "pci_ids_path":
        args[key] = draw(
            st.sampled_from(
                [str(root / "binary.bin"), str(root / "emptydir"), str(root / "node"), str(root / "garbage.json")]
            )
        )
    else:
        args[key] = draw(st.sampled_from([str(root / "afile"), str(root / "emptydir"), str(root / "node/sys/bus")]))
    broken.add((key,))


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
        garbage = draw(
            st.sampled_from(
                [
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
                        "spec": {
                            "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "ghost"}}]}}
                        },
                    },
                    {
                        "kind": "ResourceClaimTemplate",
                        "metadata": {"name": "t"},
                        "spec": {
                            "spec": {
                                "devices": {
                                    "requests": [
                                        {"name": "r", "exactly": {"deviceClassName": "aligned-gpu", "count": -1}}
                                    ]
                                }
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
                        "spec": {
                            "spec": {"devices": {"requests": [{"name": "r"}], "constraints": [{"matchAttribute": 5}]}}
                        },
                    },
                    {"kind": 5},
                    {"kind": "ResourceClaim", "metadata": {"name": "c"}, "spec": {"devices": None}},
                ]
            )
        )
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


def semantic_topology_capture(draw, args: dict[str, Any], root: Path, broken: Broken) -> None:
    key = draw(st.sampled_from(["sysfs_root", "procfs_root", "dest"]))
    if key == "dest":
        args[key] = draw(st.sampled_from(["emptydir", "missing/node.tar.gz", "afile/node.tar.gz", "emptydir/"]))
    else:
        args[key] = draw(st.sampled_from([str(root / "afile"), str(root / "missing")]))
    broken.add((key,))


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


def semantic_topology_snapshot(draw, args: dict[str, Any], root: Path, broken: Broken) -> None:
    key = draw(st.sampled_from(["src", "src", "dest"]))
    if key == "src":
        args[key] = draw(
            st.sampled_from(["binary.bin", "garbage.json", "escape.tar.gz", "emptydir", "missing.tar.gz", "afile"])
        )
    else:
        # The scratch directory itself and emptydir's parent are not trees this module made.
        args[key] = draw(st.sampled_from(["afile", "afile/sub", str(root), "."]))
    broken.add((key,))


def semantic_network_plan(draw, args: dict[str, Any], root: Path, broken: Broken) -> None:
    """The rdma and sriov modules' own semantic garbage (the same option names)."""
    if draw(st.booleans()):
        semantic_sriov(draw, args, root, broken)
        args.pop("settle_timeout", None)
    else:
        semantic_rdma(draw, args, root, broken)
        if args.get("sysfs_root") == str(root / "sys"):
            args["sysfs_root"] = str(root / "node/sys")


def semantic_topology_output(draw, args: dict[str, Any], root: Path, broken: Broken) -> None:
    what = draw(st.sampled_from(["site", "node", "topology", "sites", "output_dir"]))
    nodes = args.get("nodes")
    if not isinstance(nodes, dict) or not all(isinstance(v, dict) for v in nodes.values()) or not nodes:
        args["nodes"] = nodes = {"n1": {"site": "lab", "topology": {}}}
    name = sorted(nodes)[0]
    if what == "site":
        nodes[name]["site"] = draw(st.sampled_from(["../up", ".hidden", "a/b", "", "sp ace"]))
        broken.add(("nodes", name, "site"))
    elif what == "node":
        nodes[draw(st.sampled_from(["../x", ".dot", "a/b"]))] = {"site": "lab", "topology": {}}
        broken.add(("nodes",))
    elif what == "topology":
        nodes[name]["topology"] = draw(st.sampled_from([[], "x", None, 5]))
        broken.add(("nodes", name))
    elif what == "sites":
        args["sites"] = ["lab", draw(st.sampled_from(["../up", "a/b", ""]))]
        broken.add(("sites",))
    else:
        args["output_dir"] = draw(
            st.sampled_from([str(root / "afile"), str(root / "afile" / "sub"), str(root / "binary.bin")])
        )
        broken.add(("output_dir",))


SEMANTIC = {name: globals()["semantic_" + name] for name in EXAMPLE_COUNTS}
_SPECS: dict[str, dict[str, Any]] = {}
PRISTINE: dict[str, str] = {}


def module_spec_cache(name: str) -> dict[str, Any]:
    if name not in _SPECS:
        _SPECS[name] = module_spec(name)
    return _SPECS[name]


# -- the fuzz test --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def templates(tmp_path_factory):
    """One pristine scratch tree per module, built once; copied per example."""
    built = {}
    for name, make in TEMPLATES.items():
        root = tmp_path_factory.mktemp(f"template-{name}")
        _common(root)
        make(root)
        built[name] = root
    return built


def _slices() -> list[dict[str, Any]]:
    from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra
    from ansible_collections.aligned.dra.plugins.module_utils.dra import slices as dra_slices

    return dra_slices.resource_slices("n1", dra.devices_from_topology(TOPOLOGY))


SLICES.extend(_slices())


def check_example(
    name: str, pristine: Path, work: Path, stats: dict[str, int], draw: Any, check_mode: bool, diff: bool
) -> None:
    """Draw one argument set, run the module on a fresh scratch copy, check the rule."""
    spec = module_spec_cache(name)
    root = work / "scratch"
    stats["examples"] += 1
    if not root.exists():
        shutil.copytree(pristine, root, symlinks=True)
    fresh = False
    try:
        args = BASES[name](draw, root)
        broken = Broken(name)
        for _round in range(draw(st.integers(0, 3), label="mutations")):
            if draw(st.booleans(), label="semantic"):
                SEMANTIC[name](draw, args, root, broken)
            else:
                generic_mutation(draw, name, args, spec, root, broken)
        before = digest(root)
        run_args = dict(args, _ansible_check_mode=check_mode, _ansible_diff=diff)
        result, module_ran = run_module(name, run_args, root)
        after = digest(root)
        fresh = after == before == PRISTINE[name]
        if result.get("failed"):
            stats["failed"] += 1
            stats["parser"] += not module_ran
            msg = result.get("msg", "")
            assert broken, f"valid arguments failed: {msg!r}\nargs: {args!r}"
            # plan's verdict on required templates is a finding about the devices, not a refused input.
            verdict = name == "plan" and bool(result.get("unsatisfied")) and module_ran
            # ansible-core logs every invocation to syslog before the module's code runs, and refuses
            # a NUL byte there with its own message.
            nul = not module_ran and "embedded null" in msg and "\\u0000" in json.dumps(args)
            # ansible-core reports a list element that is no mapping with its converter's message first,
            # which names no option (its second error does, but fail_json shows the first).
            no_dict = not module_ran and msg == ANSIBLE_DICT_MESSAGE
            if not (verdict or nul or no_dict):
                assert broken.named_by(msg, module_ran), f"{msg!r} names none of {broken!r}\nargs: {args!r}"
            if not verdict:
                assert not result.get("changed"), f"failed with changed: {msg!r}"
                assert after == before, f"failed and changed files: {msg!r}\nargs: {args!r}"
        else:
            stats["changed"] += bool(result.get("changed"))
            if check_mode or not result.get("changed"):
                assert after == before, (
                    f"check_mode={check_mode} changed={result.get('changed')} changed files\nargs: {args!r}"
                )
    finally:
        # The next example starts from a pristine copy: reuse this one only when nothing touched it.
        if not fresh:
            shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("name", sorted(EXAMPLE_COUNTS))
def test_arguments_fuzzed(name, templates, tmp_path_factory):
    pristine = templates[name]
    work = tmp_path_factory.mktemp(f"fuzz-{name}")
    PRISTINE[name] = digest(pristine)
    stats = {"examples": 0, "failed": 0, "parser": 0, "changed": 0}

    @settings(
        max_examples=max(1, int(EXAMPLE_COUNTS[name] * SCALE)),
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(data=st.data(), check_mode=st.booleans(), diff=st.booleans())
    def one(data, check_mode, diff):
        check_example(name, pristine, work, stats, data.draw, check_mode, diff)

    one()
    print(f"\n{name}: {stats}")
    # The generator reached both outcomes: a fuzzer that only ever fails (or passes) checks little.
    assert stats["failed"] and stats["failed"] < stats["examples"]
