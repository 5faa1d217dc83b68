# SPDX-License-Identifier: Apache-2.0
"""The driver role (playbooks/driver.yml) through real ansible-playbook runs, without a node.

What needs no node: refused inventories (nothing written, nothing changed),
DaemonSet-mode rendering for review or GitOps (files valid for every
supported Kubernetes minor, idempotent, removed again with state absent), and
the host-mode removal refusal while the checkpoint lists prepared claims.
The driver split by kind in host mode: both units written by the role's own
tasks (check mode with a diff first, then for real, then nothing to change),
a bad split name refused by the role's preflight, and turning the split off
refused while the GPU plugin's checkpoint lists prepared claims.
The install on a real systemd node is the Molecule scenario molecule/driver.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tarfile
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from ansible_collections.aligned.dra.tests.support.harnesses.driver_role import (
    IMAGE,
    changed,
    directives,
    exec_start_argv,
    inventory,
    playbook,
)
from ansible_collections.aligned.dra.tests.support.harnesses.playbook_runs import (
    REPO,
    environment,
    recap,
    run_on_localhost,
    write_play,
)

BUS = "0000:18:00.0"
# a static layout as the mig role takes it (docs/mig.md), on the GPU at BUS
LAYOUT = {
    "layout": "all-1g",
    "mig_configs": {"all-1g": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 7}}]},
}


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One controller wheelhouse for the tests of every xdist worker: the role fills it atomically."""
    base = tmp_path_factory.getbasetemp()
    return (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "driver-role-wheelhouse"


def first_render(tmp_path: Path, base: dict) -> None:
    """DaemonSet mode's first renders: check mode with a diff writes nothing; the first run replaces an earlier
    release's Containerfile by the build context and writes objects valid for every minor, once per site; the
    next run removes an earlier build's driver wheel from the context, and changes nothing else."""
    inv = inventory(tmp_path, **base)
    out = tmp_path / "output" / "lab" / "driver"
    rehearsed = playbook(inv, "--check", "--diff")  # check mode shows the objects and writes nothing
    assert rehearsed.returncode == 0, rehearsed.output
    assert "kind: DaemonSet" in rehearsed.output
    assert "FROM ${BASE} AS build" in rehearsed.output  # the Containerfile's diff
    assert not (tmp_path / "output").exists()
    # An earlier release's Containerfile (it built from a checkout) is replaced by the build context.
    out.mkdir(parents=True)
    (out / "Containerfile").write_text(
        "COPY plugins/module_utils/topology.py plugins/module_utils/dra/model.py /src/\n"
    )
    first = playbook(inv)
    assert first.returncode == 0, first.output
    assert sorted(p.name for p in out.iterdir()) == ["daemonset.yaml", "image"]
    # The image's build context: the driver wheel and the pinned dependencies' wheels for the
    # default base image (CPython 3.12, x86_64, glibc 2.36), built and checked by
    # tests/integration/driver/test_driver_image.py.
    context = out / "image"
    assert sorted(p.name for p in context.iterdir()) == [
        "Containerfile",
        "aligned_dra_driver-0.1.0-py3-none-any.whl",
        "deps.tar",
        "requirements-node.txt",
    ]
    containerfile = (context / "Containerfile").read_text()
    assert "ARG BASE=docker.io/library/python:3.12-slim" in containerfile
    assert f"podman build -t {IMAGE} {context}" in containerfile
    assert "--no-index" in containerfile and "plugins/module_utils" not in containerfile
    with tarfile.open(context / "deps.tar") as deps:
        wheels = {Path(name).name for name in deps.getnames() if name.endswith(".whl")}
    pins = [
        line.split("==")[0].lower().replace("-", "_")
        for line in (REPO / "roles" / "driver" / "files" / "requirements-node.txt").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    assert sorted(wheel.split("-")[0].lower() for wheel in wheels) == sorted(pins)
    assert all("cp312" in w or "abi3" in w or "-none-" in w for w in wheels), wheels
    assert not [w for w in wheels if "aarch64" in w or "musllinux" in w], wheels
    objects = [o for o in yaml.safe_load_all((out / "daemonset.yaml").read_text()) if o]
    kinds = {o["kind"] for o in objects}
    assert {"DaemonSet", "ServiceAccount", "ClusterRole", "ClusterRoleBinding"} <= kinds
    daemonset = next(o for o in objects if o["kind"] == "DaemonSet")
    containers = daemonset["spec"]["template"]["spec"]["containers"]
    assert containers[0]["image"] == IMAGE
    assert daemonset["metadata"]["namespace"] == "aligned-dra"
    for minor in ("1.34", "1.35", "1.36", "1.37"):
        for obj in objects:
            kubernetes_validate.validate(obj, f"{minor}.0", strict=True)
    # Written once per site, not once per node.
    assert first.output.count("the objects, mode daemonset") == 1

    # A driver wheel of an earlier build in the context is removed, and only that changes: the rest of the
    # second run is idempotent.
    (context / "aligned_dra_driver-0.0.9-py3-none-any.whl").write_bytes(b"old")
    third = playbook(inv)
    assert third.returncode == 0, third.output
    assert changed(third) == 1, third.output
    assert not (context / "aligned_dra_driver-0.0.9-py3-none-any.whl").exists()


def reclaim_and_mig_round_trip(tmp_path: Path, base: dict) -> None:
    """After :func:`first_render`: aligned_dra_driver_reclaim evict (check mode with a diff first) adds the
    options, hostPID, the ClusterRole's rules and nvidia-ml-py to the image's build context, idempotently; off
    again takes all of it back. The same runs carry aligned_dra_mig (static, by PCI address): the role hands it to
    the driver (--mig, --mig-gpus, the host's /proc), and its off (YAML false) takes it back."""
    out = tmp_path / "output" / "lab" / "driver"
    files = ("daemonset.yaml", "image/Containerfile", "image/requirements-node.txt", "image/deps.tar")

    def run(reclaim: dict | None, *args: str) -> subprocess.CompletedProcess:
        settings = dict(base, **({"aligned_dra_driver_reclaim": reclaim} if reclaim is not None else {}))
        if reclaim is not None:
            on = reclaim["mode"] == "evict"
            settings["aligned_dra_mig"] = dict(LAYOUT, mode="static" if on else False, gpus={"pci_addresses": [BUS]})
        proc = playbook(inventory(tmp_path, **settings), *args)
        assert proc.returncode == 0, proc.output
        return proc

    before = {name: (out / name).read_bytes() for name in files}  # as first_render left them

    evict = {"mode": "evict", "margin": 10, "interval": 0.5}
    rehearsed = run(evict, "--check", "--diff")
    assert "\n+      hostPID: true\n" in rehearsed.stdout and "\n+  - pods/eviction\n" in rehearsed.stdout
    assert "\n+        - --reclaim=evict\n" in rehearsed.stdout
    assert "\n+COPY reclaim/ /wheels/reclaim/\n" in rehearsed.stdout
    assert {name: (out / name).read_bytes() for name in files} == before

    first = run(evict)
    assert "may evict any pod of the cluster" in first.output and "ANY pod of the cluster" in first.output
    objects = [o for o in yaml.safe_load_all((out / "daemonset.yaml").read_text()) if o]
    (daemonset,) = [o for o in objects if o["kind"] == "DaemonSet"]
    pod = daemonset["spec"]["template"]["spec"]
    assert pod["hostPID"] is True
    assert [a for a in pod["containers"][0]["args"] if a.startswith("--reclaim")] == [
        "--reclaim=evict",
        "--reclaim-margin=10",
        "--reclaim-interval=0.5",
    ]
    assert [a for a in pod["containers"][0]["args"] if a.startswith(("--mig", "--procfs"))] == [
        "--mig=static",
        f"--mig-gpus={BUS}",
        "--procfs-root=/host/proc",
    ]
    (role,) = [o for o in objects if o["kind"] == "ClusterRole"]
    assert {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]} in role["rules"]
    for obj in objects:
        kubernetes_validate.validate(obj, "1.36.0", strict=True)
    reclaim = out / "image" / "reclaim"
    pins = (ROLE / "files" / "requirements-reclaim.txt").read_text()
    assert (reclaim / "requirements-reclaim.txt").read_text() == pins
    (wheel,) = [p.name for p in reclaim.iterdir() if p.suffix == ".whl"]
    pinned = next(line for line in pins.splitlines() if line.startswith("nvidia-ml-py=="))
    assert wheel.startswith("nvidia_ml_py-" + pinned.split("==")[1] + "-") and wheel.endswith("-none-any.whl"), wheel
    containerfile = (out / "image" / "Containerfile").read_text()
    assert "--find-links /wheels/reclaim --requirement /wheels/reclaim/requirements-reclaim.txt" in containerfile
    # the driver wheels of earlier builds are removed from the context's top: the reclaim wheel stays
    assert (out / "image" / "deps.tar").read_bytes() == before["image/deps.tar"]

    again = run(evict)
    assert changed(again) == 0, again.output

    run({"mode": False, "margin": 20})  # YAML's unquoted off
    assert {name: (out / name).read_bytes() for name in files} == before
    assert not reclaim.exists()


def test_daemonset_mode_renders_reviews_switches_reclaim_and_mig_and_removes_them(tmp_path, wheelhouse):
    """DaemonSet mode on one site of two nodes, one run after the other (each phase's docstring says what it
    checks), then state absent removes every file."""
    base = {
        "aligned_dra_driver_mode": "daemonset",
        "aligned_dra_driver_image": IMAGE,
        "aligned_dra_driver_wheelhouse_dir": str(wheelhouse),
    }
    first_render(tmp_path, base)
    reclaim_and_mig_round_trip(tmp_path, base)
    gone = playbook(inventory(tmp_path, **base), "-e", "aligned_dra_driver_state=absent")
    assert gone.returncode == 0, gone.output
    assert list((tmp_path / "output" / "lab" / "driver").iterdir()) == []


# Bad settings and what the refusal says of them. The validation asks every host's settings at once; a setting
# it passes that the role's preflight refuses (each host on its own) is refused in the same run only when the
# validation passed every host, so the preflight's cases run apart from the validation's.
REFUSED_BY_THE_VALIDATION = [
    # the driver role's own rules, asked of every host by the validation first
    ({"aligned_dra_driver_image": ""}, 'aligned_dra_driver_image = "": DaemonSet mode needs the driver\'s image'),
    (
        {"aligned_dra_driver_node_name": "Node_A"},
        'aligned_dra_driver_node_name = "Node_A": must be a lowercase DNS',
    ),
    ({"aligned_dra_driver_metrics_port": 70000}, "aligned_dra_driver_metrics_port = 70000: must be 0..65535"),
    ({"aligned_dra_site": "../etc"}, "aligned_dra_site must be letters, digits"),
    ({"aligned_dra_driver_mode": "kubelet"}, "aligned_dra_driver_mode"),
    ({"aligned_dra_driver_log_level": "TRACE"}, "aligned_dra_driver_log_level"),
    # The image's build context holds wheels for one Python and glibc: settings that cannot build are refused.
    ({"aligned_dra_driver_image_python": 3.1}, "3.10 or newer written as a string such as '3.12' (got '3.1')"),
    ({"aligned_dra_driver_image_python": "3.9"}, "(got '3.9')"),
    ({"aligned_dra_driver_image_glibc": "2.5"}, "must be 2.17 or newer, e.g. '2.36' (got '2.5')"),
    ({"aligned_dra_driver_image_machine": "riscv64"}, "aligned_dra_driver_image_machine"),
    (
        {"aligned_dra_driver_base_image": "registry.local/library/python:3.13-slim-bookworm"},
        "the base image registry.local/library/python:3.13-slim-bookworm (aligned_dra_driver_base_image) "
        "is Python 3.13: set '3.13', or a python:3.12 base image",
    ),
    # The reclaim watcher: its argument spec, the driver's bounds, and no watcher without fractional GPUs.
    ({"aligned_dra_driver_reclaim": {"mode": "kill"}}, "value of mode must be one of: off, evict, got: kill"),
]
REFUSED_BY_THE_ROLES_PREFLIGHT = [
    # Strings that would otherwise become systemd unit syntax (a second ExecStartPre line, a split path).
    ({"aligned_dra_driver_extra_args": ["--health-service\nExecStartPre=/bin/sh -c id"]}, "control characters"),
    ({"aligned_dra_device_options": {"exclude": ["eno*\r"]}}, "control characters"),
    ({"aligned_dra_driver_state_dir": "/var/lib/a dra"}, "got ['/var/lib/a dra']"),
    ({"aligned_dra_driver_cdi_dir": "run/cdi"}, "got ['run/cdi']"),
    # The reclaim watcher: the driver's bounds, and no watcher without fractional GPUs.
    (
        {"aligned_dra_driver_reclaim": {"mode": "evict", "margin": 0}},
        "aligned_dra_driver_reclaim.margin = 0: must be a number of percent more than 0 and less than 100",
    ),
    (
        {"aligned_dra_driver_reclaim": {"mode": "evict"}, "aligned_dra_kubernetes_version": "1.35"},
        'aligned_dra_driver_reclaim.mode = "evict": reclaim needs fractional GPUs',
    ),
]


def by_host(output: str) -> dict[str, str]:
    """What a run said of each host (from ``node-NN: `` or ``[node-NN]: `` to the next host's name), joined."""
    said: dict[str, str] = {}
    marks = list(re.finditer(r"\[?\b(node-\d\d)\]?: ", output))
    for mark, following in zip(marks, [*marks[1:], None], strict=True):
        part = output[mark.end() : following.start() if following else len(output)]
        said[mark[1]] = said.get(mark[1], "") + part + " | "
    return said


def refused_each(tmp_path: Path, cases: list[tuple[dict, str]], *args: str, **common) -> subprocess.CompletedProcess:
    """One run, a host for each case (in a site of its own, so that no rule across the hosts of a site stands in
    for its own): the run fails, each host's refusal says its case's message, and nothing is written."""
    hosts = {
        f"node-{index:02d}": {"aligned_dra_site": f"case{index}", **settings}
        for index, (settings, _message) in enumerate(cases)
    }
    inv = inventory(tmp_path, hosts, aligned_dra_driver_mode="daemonset", aligned_dra_driver_image=IMAGE, **common)
    proc = playbook(inv, *args)
    assert proc.returncode != 0
    said = by_host(proc.output)
    for index, (_settings, message) in enumerate(cases):
        assert message in said.get(f"node-{index:02d}", ""), (index, message, proc.output)
    assert not (tmp_path / "output").exists()
    return proc


def test_bad_inventory_is_refused_by_the_validation_before_anything_is_written(tmp_path):
    refused_each(tmp_path, REFUSED_BY_THE_VALIDATION)


def test_bad_inventory_the_validation_passes_is_refused_by_the_roles_preflight_before_anything_is_written(tmp_path):
    proc = refused_each(tmp_path, REFUSED_BY_THE_ROLES_PREFLIGHT)
    assert "Validate | Every host's settings" in proc.output  # asked first, and passed


ROLES_OWN_HOST_CHECK = [
    ({"aligned_dra_driver_image": ""}, "daemonset mode needs aligned_dra_driver_image (got '')"),
    ({"aligned_dra_driver_node_name": "Node_A"}, "must be a lowercase DNS name (got 'Node_A')"),
    ({"aligned_dra_driver_metrics_port": 70000}, "must be 0..65535 (got 70000)"),
]


def test_the_roles_own_host_check_refuses_without_the_validation(tmp_path):
    """The role on its own (no validation play) still asks every host's settings before anything is written."""
    proc = refused_each(tmp_path, ROLES_OWN_HOST_CHECK, "--skip-tags", "validate")
    assert "Validate | Every host" not in proc.output


def test_the_roles_own_image_check_names_only_the_broken_rule(tmp_path):
    """Without the validation stage (the role used on its own), the role's preflight refuses the same
    settings with the same rule (aligned.dra.driver_image_problems), before anything is written."""
    inv = inventory(
        tmp_path,
        {"node-a": {}},
        aligned_dra_driver_mode="daemonset",
        aligned_dra_driver_image=IMAGE,
        aligned_dra_driver_image_python="3.11",
    )
    proc = playbook(inv, "--skip-tags", "validate")
    assert proc.returncode != 0
    assert "Validate | Every host" not in proc.output
    assert (
        'node-a: aligned_dra_driver_image_python = "3.11": the base image docker.io/library/python:3.12-slim '
        "(aligned_dra_driver_base_image) is Python 3.12: set '3.12', or a python:3.11 base image"
    ) in proc.output, proc.output
    assert "glibc" not in proc.output and "3.10 or newer" not in proc.output
    assert not (tmp_path / "output").exists()


def test_host_mode_without_credentials_is_refused_before_the_install(tmp_path):
    inv = inventory(tmp_path, {"node-a": {}}, aligned_dra_driver_wheelhouse_dir=str(tmp_path / "wheelhouse"))
    proc = playbook(inv)
    assert proc.returncode != 0
    assert "node-a: host mode needs aligned_dra_driver_kubeconfig" in proc.output, proc.output
    assert "Wheelhouse on the controller" not in proc.output
    assert not (tmp_path / "wheelhouse").exists() and not (tmp_path / "output").exists()


def test_removal_is_refused_while_the_checkpoint_lists_prepared_claims(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    claims = {
        "uid-1": {"namespace": "team-a", "name": "train-0", "devices": []},
        "uid-2": {"namespace": "team-b", "name": "infer-1", "devices": []},
    }
    (state / "checkpoint.json").write_text(
        json.dumps({"version": 1, "driver": "dra.aligned.dev", "node": "node-a", "claims": claims})
    )
    prefix = tmp_path / "opt"
    prefix.mkdir()
    inv = inventory(
        tmp_path,
        {"node-a": {}},
        aligned_dra_driver_state="absent",
        aligned_dra_driver_state_dir=str(state),
        aligned_dra_driver_prefix=str(prefix),
    )
    proc = playbook(inv, "--check")
    assert proc.returncode != 0
    assert "2 claim(s) are still prepared by the driver: team-a/train-0, team-b/infer-1" in proc.output, proc.output
    assert "aligned_dra_driver_force: true" in proc.output
    assert (state / "checkpoint.json").exists() and prefix.exists()
    # site.yml found the node unchanged since the last run (aligned.dra.site_state): not rehearsed, not rolled
    converged = playbook(inv, "--check", "-e", json.dumps({"aligned_dra_node_state": {"converged": ["node-a"]}}))
    assert converged.returncode == 0, converged.output
    assert "Rehearse |" not in converged.output and "claim(s) are still prepared" not in converged.output
    assert "PLAY [DRA driver - install, upgrade or remove] ***" in converged.output
    assert converged.output.split("PLAY [DRA driver - install, upgrade or remove]")[1].split()[1:4] == [
        "skipping:",
        "no",
        "hosts",
    ], converged.output


def run_tasks(tmp_path: Path, tasks_from: str, extra: dict, *args: str) -> subprocess.CompletedProcess:
    """One task file of the driver role on the controller (local connection), as host.yml includes it."""
    play = [
        {
            "name": "driver role tasks",
            "hosts": "localhost",
            "gather_facts": False,
            "tasks": [{"ansible.builtin.include_role": {"name": "aligned.dra.driver", "tasks_from": tasks_from}}],
        }
    ]
    return run_on_localhost(
        write_play(tmp_path / "play.yml", play),
        *args,
        extra_vars=extra,
        env=environment(ANSIBLE_CONFIG=str(REPO / "ansible.cfg")),
        cwd=REPO,
    )


def test_upgrade_removes_the_wheels_of_earlier_releases_from_the_node(tmp_path):
    # The controller's wheelhouse after an upgrade: new driver wheel, new pins (deps.tar as host.yml packs it).
    controller = tmp_path / "controller"
    deps = controller / "deps"
    deps.mkdir(parents=True)
    for name in ("grpcio-1.70.0-cp312-cp312-manylinux_2_17_x86_64.whl", "pip-25.1-py3-none-any.whl"):
        (deps / name).write_bytes(b"new")
    (deps / "requirements-node.txt").write_text("grpcio==1.70.0\npip==25.1\n")
    subprocess.run(["tar", "--sort=name", "-cf", str(controller / "deps.tar"), "-C", str(deps), "."], check=True)
    (controller / "driver").mkdir()
    new_driver = controller / "driver" / "aligned_dra_driver-0.2.0-py3-none-any.whl"
    new_driver.write_bytes(b"new")
    # The node's wheelhouse: the new wheels installed next to what the previous release left.
    node = tmp_path / "opt" / "wheelhouse"
    node.mkdir(parents=True)
    current = {
        "aligned_dra_driver-0.2.0-py3-none-any.whl",
        "grpcio-1.70.0-cp312-cp312-manylinux_2_17_x86_64.whl",
        "pip-25.1-py3-none-any.whl",
        "requirements-node.txt",
        "deps.tar",
    }
    stale = {
        "aligned_dra_driver-0.1.0-py3-none-any.whl",
        "grpcio-1.68.1-cp312-cp312-manylinux_2_17_x86_64.whl",
        "pip-24.3-py3-none-any.whl",
    }
    for name in current | stale:
        (node / name).write_bytes(b"x")
    settings = {
        "aligned_dra_driver_prefix": str(tmp_path / "opt"),
        "aligned_dra_driver_wheels": str(controller),
        "aligned_dra_driver_wheel": {"stat": {"path": str(new_driver)}},
    }

    check = run_tasks(tmp_path, "wheelhouse_clean", settings, "--check")
    assert check.returncode == 0, check.output
    assert changed(check) == 1, check.output
    assert "aligned_dra_driver-0.1.0-py3-none-any.whl" in check.output
    assert {p.name for p in node.iterdir()} == current | stale, "check mode removed a file"

    proc = run_tasks(tmp_path, "wheelhouse_clean", settings)
    assert proc.returncode == 0, proc.output
    assert {p.name for p in node.iterdir()} == current

    again = run_tasks(tmp_path, "wheelhouse_clean", settings)
    assert again.returncode == 0, again.output
    assert changed(again) == 0, again.output

    # Source pypi: the node's pip fetches the pins, so only the driver wheel belongs in the wheelhouse.
    pypi = run_tasks(tmp_path, "wheelhouse_clean", dict(settings, aligned_dra_driver_source="pypi"))
    assert pypi.returncode == 0, pypi.output
    assert {p.name for p in node.iterdir()} == {
        "aligned_dra_driver-0.2.0-py3-none-any.whl",
        "requirements-node.txt",
        "deps.tar",
    }


# -- the driver split by kind (aligned_dra_device_options.split_gpu_driver) ------------------------

ROLE = REPO / "roles" / "driver"
SPLIT = {"split_gpu_driver": "gpu.aligned.dev"}


def split_unit_play(tmp_path: Path, *args: str, extra: dict | None = None) -> subprocess.CompletedProcess:
    """The role's own tasks that build the settings and write the units and the tmpfiles entry, with the
    node's /etc under tmp_path (every other path as the role's defaults say)."""
    main = yaml.safe_load((ROLE / "tasks" / "main.yml").read_text())
    host = yaml.safe_load((ROLE / "tasks" / "host.yml").read_text())
    wanted = [t for t in main if "Settings the driver" in t["name"] or "split by kind" in t["name"]]
    wanted += [t for t in main if t["name"] == "Preflight | The driver's plugins on each node"]
    wanted += [t for t in host if t["name"].startswith(("Host | tmpfs directories", "Host | systemd units"))]
    assert len(wanted) == 5, [t["name"] for t in wanted]
    for task in wanted[3:]:
        template = task["ansible.builtin.template"]
        template["src"] = str(ROLE / "templates" / template["src"])
        template["dest"] = template["dest"].replace("/etc/", f"{tmp_path}/etc/")
        template.pop("owner"), template.pop("group")
    (tmp_path / "etc" / "systemd" / "system").mkdir(parents=True, exist_ok=True)
    (tmp_path / "etc" / "tmpfiles.d").mkdir(exist_ok=True)
    play = [
        {
            "hosts": "localhost",
            "gather_facts": False,
            "vars_files": [str(ROLE / "defaults" / "main.yml")],
            "tasks": wanted,
            "handlers": [
                {"name": "Restart aligned-dra-driver", "ansible.builtin.debug": {"msg": "restart"}},
                {
                    "name": "Record that the driver on the node would change",
                    "ansible.builtin.debug": {"msg": "node changed"},
                    "listen": "aligned-dra driver node changed",
                },
            ],
        }
    ]
    proc = run_on_localhost(
        write_play(tmp_path / "play.yml", play),
        *args,
        # over the role's defaults, as an inventory's would be
        extra_vars={"aligned_dra_device_options": SPLIT, "aligned_dra_driver_node_name": "gpu-node-1", **(extra or {})},
        env=environment(ANSIBLE_CONFIG=str(REPO / "ansible.cfg")),
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def test_split_host_mode_writes_both_units_with_check_mode_and_diff_first_then_nothing_to_change(tmp_path):
    units = tmp_path / "etc" / "systemd" / "system"
    rehearsed = split_unit_play(tmp_path, "--check", "--diff")
    assert recap(rehearsed.stdout)["changed"] == 2, rehearsed.stdout  # the tmpfiles entry, the units' task
    for unit in ("aligned-dra-driver.service", "aligned-dra-driver-gpu.service"):
        assert f"changed: [localhost] => (item={unit})" in rehearsed.stdout
    assert "+Description=aligned.dra DRA kubelet plugin (gpu.aligned.dev)" in rehearsed.stdout
    assert "+Description=aligned.dra DRA kubelet plugin (dra.aligned.dev)" in rehearsed.stdout
    assert list(units.iterdir()) == []

    written = split_unit_play(tmp_path)
    assert recap(written.stdout)["changed"] == 2
    assert sorted(p.name for p in units.iterdir()) == ["aligned-dra-driver-gpu.service", "aligned-dra-driver.service"]
    main = (units / "aligned-dra-driver.service").read_text()
    gpu = (units / "aligned-dra-driver-gpu.service").read_text()
    main_argv, gpu_argv = exec_start_argv(main), exec_start_argv(gpu)
    for argv in (main_argv, gpu_argv):
        assert argv[0] == "/opt/aligned-dra/venv/bin/aligned-dra-driver"
        # the same node, credentials and device model options
        assert "--node-name=gpu-node-1" in argv and "--kubeconfig=/etc/aligned-dra/kubeconfig" in argv
    assert {"--driver-name=dra.aligned.dev", "--kinds=nic,vf", "--state-dir=/var/lib/aligned-dra"} <= set(main_argv)
    assert {"--mps-root=/run/aligned-dra/mps", "--metrics-address=127.0.0.1:8089"} <= set(main_argv)
    assert {"--driver-name=gpu.aligned.dev", "--kinds=gpu,accelerator", "--state-dir=/var/lib/aligned-dra/gpu"} <= set(
        gpu_argv
    )
    assert {"--mps-root=/run/aligned-dra/mps/gpu", "--metrics-address=127.0.0.1:8090"} <= set(gpu_argv)
    # each unit may write only its own state; both, the kubelet's plugin directories and the CDI directory
    shared = ["/var/lib/kubelet/plugins", "/var/lib/kubelet/plugins_registry", "/var/run/cdi"]
    assert directives(main)["ReadWritePaths"].split() == [*shared, "/var/lib/aligned-dra", "/run/aligned-dra/mps"]
    assert directives(gpu)["ReadWritePaths"].split() == [
        *shared,
        "/var/lib/aligned-dra/gpu",
        "/run/aligned-dra/mps/gpu",
    ]
    assert directives(gpu)["SyslogIdentifier"] == "aligned-dra-driver-gpu"
    tmpfiles = (tmp_path / "etc" / "tmpfiles.d" / "aligned-dra-driver.conf").read_text()
    assert "d /run/aligned-dra/mps/gpu 0700 root root -" in tmpfiles

    again = split_unit_play(tmp_path)
    assert recap(again.stdout)["changed"] == 0, again.stdout


def test_split_host_mode_with_reclaim_gives_only_the_gpu_unit_the_watcher_and_takes_it_back(tmp_path):
    """aligned_dra_driver_reclaim evict: the GPU plugin's unit gets the options (check mode with a diff first,
    then for real, then nothing to change); the NIC plugin's stays as it was; off again, both are as before."""
    units = tmp_path / "etc" / "systemd" / "system"
    split_unit_play(tmp_path)
    before = {p.name: p.read_text() for p in units.iterdir()}
    evict = {"aligned_dra_driver_reclaim": {"mode": "evict", "margin": 10, "interval": 1}}

    rehearsed = split_unit_play(tmp_path, "--check", "--diff", extra=evict)
    assert recap(rehearsed.stdout)["changed"] == 1, rehearsed.stdout
    assert "changed: [localhost] => (item=aligned-dra-driver-gpu.service)" in rehearsed.stdout
    assert '\n+    "--reclaim=evict" \\\n' in rehearsed.stdout
    assert {p.name: p.read_text() for p in units.iterdir()} == before

    written = split_unit_play(tmp_path, extra=evict)
    assert recap(written.stdout)["changed"] == 1
    main = (units / "aligned-dra-driver.service").read_text()
    assert main == before["aligned-dra-driver.service"]
    gpu_argv = exec_start_argv((units / "aligned-dra-driver-gpu.service").read_text())
    assert [a for a in gpu_argv if a.startswith("--reclaim")] == [
        "--reclaim=evict",
        "--reclaim-margin=10",
        "--reclaim-interval=1",
    ]
    assert "--procfs-root=/proc" in gpu_argv  # the host's processes, whose PIDs NVML names
    assert [a for a in gpu_argv if not a.startswith("--reclaim")] == exec_start_argv(
        before["aligned-dra-driver-gpu.service"]
    )

    again = split_unit_play(tmp_path, extra=evict)
    assert recap(again.stdout)["changed"] == 0, again.stdout

    split_unit_play(tmp_path, extra={"aligned_dra_driver_reclaim": {"mode": "off"}})
    assert {p.name: p.read_text() for p in units.iterdir()} == before


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"aligned_dra_device_options": {"split_gpu_driver": "nic.aligned.dev"}},
            'node-a: aligned_dra_device_options.split_gpu_driver = "nic.aligned.dev": ',
        ),
        (
            {"aligned_dra_device_options": SPLIT, "aligned_dra_driver_name": "gpu.aligned.dev"},
            'aligned_dra_device_options.split_gpu_driver = "gpu.aligned.dev": must differ from aligned_dra_driver_name',
        ),
    ],
    ids=["no-gpu-in-the-name", "the-main-name"],
)
def test_the_roles_preflight_refuses_a_bad_split_naming_the_variable(tmp_path, settings, message):
    """Without the validation stage (the role used on its own), before anything is written."""
    inv = inventory(
        tmp_path, {"node-a": {}}, aligned_dra_driver_mode="daemonset", aligned_dra_driver_image=IMAGE, **settings
    )
    proc = playbook(inv, "--skip-tags", "validate")
    assert proc.returncode != 0
    assert message in proc.output, proc.output
    assert not (tmp_path / "output").exists()


def test_turning_the_split_off_is_refused_while_the_gpu_plugin_holds_prepared_claims(tmp_path):
    state = tmp_path / "state"
    (state / "gpu").mkdir(parents=True)
    (state / "checkpoint.json").write_text(json.dumps({"version": 1, "driver": "dra.aligned.dev", "claims": {}}))
    claims = {"uid-1": {"namespace": "team-a", "name": "train-0", "devices": [{"kind": "gpu"}]}}
    (state / "gpu" / "checkpoint.json").write_text(
        json.dumps({"version": 1, "driver": "gpu.aligned.dev", "node": "node-a", "claims": claims})
    )
    inv = inventory(
        tmp_path,
        {"node-a": {}},
        aligned_dra_driver_state_dir=str(state),
        aligned_dra_driver_node_kubeconfig=str(tmp_path / "kubeconfig"),
        aligned_dra_driver_preflight=False,
        aligned_dra_driver_write=False,
        aligned_dra_driver_wheelhouse_dir=str(tmp_path / "wheelhouse"),
    )
    proc = playbook(inv)  # the site phase's rehearsal refuses, before any node changes
    assert proc.returncode != 0
    assert (
        'node-a: aligned_dra_device_options.split_gpu_driver = "" turns the driver split by kind off '
        "(GPUs back under dra.aligned.dev), and 1 claim(s) with a GPU are still prepared: team-a/train-0."
    ) in proc.output, proc.output
    assert "aligned_dra_driver_force: true" in proc.output
    assert "Wheelhouse on the controller" not in proc.output and not (tmp_path / "wheelhouse").exists()
    assert (state / "gpu" / "checkpoint.json").exists()
