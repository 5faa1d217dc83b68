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
  feature gates, claim and team settings, CEL selectors, placement levels,
  job entries, placement problems, trace rows, plan, slice and utilization
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

The counts below are the full suite's; the quick tier runs a share of them
(tests/support/fuzzing/profiles.py: ``ALIGNED_DRA_FUZZ_PROFILE``, and
``ALIGNED_DRA_FUZZ_SCALE=10`` for ten times as many, a deeper search by hand).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import yaml
from ansible.module_utils.testing import patch_module_args
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.aligned.dra.plugins.module_utils.node.network import gpudirect as gpudirect_lib
from ansible_collections.aligned.dra.plugins.module_utils.node.network import sriov as sriov_lib
from ansible_collections.aligned.dra.tests.support.fuzzing import controller_arguments as fuzz_controller_arguments
from ansible_collections.aligned.dra.tests.support.fuzzing import node_arguments as fuzz_node_arguments
from ansible_collections.aligned.dra.tests.support.fuzzing import profiles as fuzz_profiles
from ansible_collections.aligned.dra.tests.support.fuzzing.values import (
    FIXTURES,
    JOB_HOSTS,
    JOB_UTILIZATION,
    SLICES,
    SRIOV_LAYOUT,
    UTILIZATION_SET,
    Broken,
    generic_mutation,
    load,
    module_spec,
    module_spec_cache,
)
from ansible_collections.aligned.dra.tests.support.node_side.fake_sysfs_sriov import FakeSriovKernel
from ansible_collections.aligned.dra.tests.support.node_side.sysfs_builder import build_tree, load_layout
from ansible_collections.aligned.dra.tests.support.sites.plan_inputs import PAIR_NODE_TOPOLOGY as TOPOLOGY
from ansible_collections.aligned.dra.tests.support.sites.plan_inputs import aligned_node
from ansible_collections.aligned.dra.tests.support.sites.report_sites import topology_of, write_site

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
    "replay": 120,
    "jobs": 120,
    "output_files": 100,
    "mig": 150,
    "gpudirect": 60,
}
# Modules that are documentation of an action plugin and have no code of their own to fuzz: the
# action's own tests cover them (tests/integration/plugins/action/).
ACTION_ONLY = {"node_library", "site_state"}
# Even the quick profile draws this many per module: enough for both outcomes (a failure and a success)
# that each module's test asserts.
MINIMUM_EXAMPLES = 6

ANSIBLE_DICT_MESSAGE = "dictionary requested, could not parse JSON or key=value"


# -- the argument spec, read from the module --------------------------------------


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
    modules = [p for p in Path(load("plan").__file__).parent.glob("*.py") if p.stem != "__init__"]
    shipped = sorted(p.stem for p in modules if p.stem not in ACTION_ONLY)
    assert shipped == sorted(EXAMPLE_COUNTS)
    # an action-only module really has no code (no AnsibleModule, no main) to fuzz
    for path in modules:
        if path.stem in ACTION_ONLY:
            assert "AnsibleModule" not in path.read_text() and "def main" not in path.read_text()


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


def template_mig(root: Path) -> None:
    (root / "node" / "proc").mkdir(parents=True)


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


def template_gpudirect(root: Path) -> None:
    """The node of base_gpudirect, an earlier run's nvidia_peermem file (DMA-BUF makes it go), GRUB's drop-ins."""
    build_tree(fuzz_node_arguments.GPUDIRECT_LAYOUT, root / "node")
    (root / "etc/modules-load.d").mkdir(parents=True)
    (root / "etc/modules-load.d" / gpudirect_lib.MODULES_FILE).write_text("# managed\nnvidia_peermem\n")
    (root / "etc/default/grub.d").mkdir(parents=True)


def template_topology_output(root: Path) -> None:
    (root / "out").mkdir()


def template_output_files(root: Path) -> None:
    """out/ holds an object of an earlier run (pruned by a yaml pattern) and a file of the user's."""
    (root / "out").mkdir()
    (root / "out" / "gone.yaml").write_text("an object no longer rendered\n")
    (root / "out" / "notes.txt").write_text("the user's\n")


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


def template_replay(root: Path) -> None:
    shutil.copytree(FIXTURES / "replay", root / "replay")
    (root / "out").mkdir()


def template_jobs(root: Path) -> None:
    """The 16 nodes' probed topologies, a measurement that holds devices, and measurements of the wrong shape."""
    (root / "nodes").mkdir()
    for host in JOB_HOSTS:
        (root / "nodes" / f"{host}.json").write_text(json.dumps(aligned_node(8)))
    (root / "slices.json").write_text(json.dumps(SLICES))
    (root / "utilization.json").write_text(json.dumps(JOB_UTILIZATION))
    (root / "utilization-rows.json").write_text(json.dumps({"allocations": [5]}))
    (root / "utilization-map.json").write_text(json.dumps({"allocations": {"gpu-00": []}}))
    (root / "out").mkdir()


TEMPLATES = {name: globals()["template_" + name] for name in EXAMPLE_COUNTS}


# -- running a module in-process ----------------------------------------------------


def fake_bin_path(self: Any, name: str, *a: Any, **k: Any) -> str | None:
    """Where the gpudirect module finds update-grub (and nothing else): the same on every machine."""
    return "/usr/sbin/update-grub" if name == "update-grub" else None


def fake_update_grub(module: Any, name: str, *args: str) -> tuple[int, str]:
    """The gpudirect module's command(): update-grub succeeds (its drop-in lies in the scratch tree); nothing else runs."""
    if name != "update-grub" or args:
        raise AssertionError(f"the live node was about to be touched: {name} {args}")
    return 0, ""


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
        # Ansible makes its local temporary directory (~/.ansible/tmp/ansible-local-*) the first time a
        # process asks for it; with HOME in the scratch tree that would be a change the module never made.
        local_tmp = str(root.parent / "ansible-local")
        environ = {"KUBECONFIG": str(root / "no-kubeconfig"), "HOME": str(root), "ANSIBLE_LOCAL_TEMP": local_tmp}
        stack.enter_context(mock.patch.dict(os.environ, environ))
        stack.enter_context(contextlib.redirect_stdout(out))
        stack.enter_context(patch_module_args(args))
        if name in ("sriov", "network_plan"):
            kernel = FakeSriovKernel(os.path.join(str(root), "node", "sys"))
            stack.enter_context(mock.patch.object(sriov_lib, "SysfsWriter", lambda: kernel))
            stack.enter_context(mock.patch.object(sriov_lib.netlink_link, "Links", refuse))
            stack.enter_context(mock.patch.object(sriov_lib.netlink_link, "Devlink", refuse))
        if name == "gpudirect":  # update-grub found and run on the scratch tree; modprobe never (no live /sys)
            stack.enter_context(mock.patch.object(Spy, "get_bin_path", fake_bin_path))
            stack.enter_context(mock.patch.object(module, "command", fake_update_grub))
        if name == "mig":  # a fresh fake NVML per run (a run changes it); drained: never drawn, so no GPU reset
            stack.enter_context(mock.patch.object(module, "load_pynvml", fuzz_node_arguments.mig_nvml))
        cwd = os.getcwd()
        os.chdir(root)
        try:
            with pytest.raises(SystemExit):
                module.main()
        finally:
            os.chdir(cwd)
    return json.loads(out.getvalue()), parsed["done"]


BASES = {
    name: getattr(
        fuzz_node_arguments if hasattr(fuzz_node_arguments, "base_" + name) else fuzz_controller_arguments,
        "base_" + name,
    )
    for name in EXAMPLE_COUNTS
}


SEMANTIC = {
    name: getattr(
        fuzz_node_arguments if hasattr(fuzz_node_arguments, "semantic_" + name) else fuzz_controller_arguments,
        "semantic_" + name,
    )
    for name in EXAMPLE_COUNTS
}
PRISTINE: dict[str, str] = {}


# -- the fuzz test --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    """Where templates and scratch copies live: memory where the machine has a tmpfs at /dev/shm.

    Most of an example's time is copying and removing a scratch tree of a few hundred small files;
    on tmpfs that costs about a third of the CPU it costs on a disk file system.
    """
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        root = Path(tempfile.mkdtemp(prefix="aligned-dra-fuzz-", dir="/dev/shm"))
        yield root
        shutil.rmtree(root, ignore_errors=True)
    else:
        yield tmp_path_factory.mktemp("fuzz")


@pytest.fixture(scope="module")
def templates(scratch):
    """One pristine scratch tree per module, built once; copied per example."""
    built = {}
    for name, make in TEMPLATES.items():
        root = scratch / f"template-{name}"
        root.mkdir()
        _common(root)
        make(root)
        built[name] = root
    return built


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
def test_arguments_fuzzed(name, templates, scratch):
    pristine = templates[name]
    work = scratch / f"fuzz-{name}"
    work.mkdir()
    PRISTINE[name] = digest(pristine)
    stats = {"examples": 0, "failed": 0, "parser": 0, "changed": 0}

    @settings(
        max_examples=fuzz_profiles.examples(EXAMPLE_COUNTS[name], MINIMUM_EXAMPLES),
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
