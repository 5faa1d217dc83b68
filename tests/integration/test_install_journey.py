# SPDX-License-Identifier: Apache-2.0
"""The whole journey of docs/install.md, as a user makes it: the built tarball and
kubernetes.core installed offline from the project's requirements.yml into the
project's own collections path, a project directory outside this checkout with its
own ansible.cfg and inventory, then ``aligned.dra.site`` in check mode (nothing
written), for real, again (nothing changes: the site's outputs are kept, byte for
byte), once more after an output was removed (the site renders it again), and
``aligned.dra.what_if``."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from ansible_collections.aligned.dra.tests.fixtures.materialize import materialize
from ansible_collections.aligned.dra.tests.support.harnesses import installed_collection as ic
from ansible_collections.aligned.dra.tests.support.harnesses.playbook_runs import run_in_project

pytestmark = pytest.mark.slow

SKELETON = ic.REPO / "docs" / "examples" / "project"
TREES = {"gpu-01": "dgx-h100", "gpu-02": "mi300x"}


def playbook(project: Path, env: dict[str, str], play: str, *args: str) -> subprocess.CompletedProcess:
    result = run_in_project(project, play, *args, env=env)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr
    return result


def outputs(root: Path) -> dict[str, bytes]:
    return {str(path.relative_to(root)): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


def changed(stdout: str) -> int:
    return sum(int(n) for n in re.findall(r"\bchanged=(\d+)", stdout.split("PLAY RECAP")[-1]))


def test_install_from_tarballs_then_site_check_run_rerun_and_what_if(tmp_path):
    dist = tmp_path / "dist"
    artifact, core = ic.build(dist), ic.kubernetes_core_tarball(dist)

    # The project of docs/install.md, as shipped in docs/examples/project.
    project = tmp_path / "project"
    shutil.copytree(SKELETON, project)
    requirements = yaml.safe_load((project / "requirements.yml").read_text())["collections"]
    (ours,) = [entry for entry in requirements if entry.get("type") == "file"]
    assert Path(ours["name"]).name == artifact.name, "docs/examples/project/requirements.yml names another release"
    shutil.copy(artifact, project / ours["name"])
    # The only change for this machine: the nodes are captured trees on the controller.
    host_vars = project / "inventory" / "host_vars"
    host_vars.mkdir()
    for host, tree in TREES.items():
        materialize(tree, project / "trees")
        (host_vars / f"{host}.yml").write_text(
            yaml.safe_dump(
                {
                    "ansible_connection": "local",
                    "ansible_python_interpreter": "{{ ansible_playbook_python }}",
                    "aligned_dra_sysfs_root": f"{{{{ inventory_dir }}}}/../trees/{tree}/sys",
                    "aligned_dra_procfs_root": f"{{{{ inventory_dir }}}}/../trees/{tree}/proc",
                }
            )
        )
    env = ic.project_env(project / "collections", project)
    del env["ANSIBLE_COLLECTIONS_PATH"]  # the project's ansible.cfg says where
    # Air-gapped: kubernetes.core from its tarball first, then the project's requirements.yml.
    for command in (
        ["ansible-galaxy", "collection", "install", "--offline", str(core)],
        ["ansible-galaxy", "collection", "install", "--offline", "-r", "requirements.yml"],
    ):
        install = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, check=False)
        assert install.returncode == 0, install.stdout + install.stderr
    installed = project / "collections" / "ansible_collections"
    assert (installed / "aligned" / "dra" / "MANIFEST.json").is_file()
    assert (installed / "kubernetes" / "core" / "MANIFEST.json").is_file()

    output = project / "output"
    check = playbook(project, env, "aligned.dra.site", "--check")
    assert changed(check.stdout) > 0
    assert not output.exists(), sorted(p.name for p in output.rglob("*"))
    # Everything ran from the installed copy, nothing from this checkout.
    repo = str(Path(ic.REPO))
    assert repo not in check.stdout

    first = playbook(project, env, "aligned.dra.site")
    plan = json.loads((output / "fra1" / "plan.json").read_text())
    fits = {t["name"]: t for t in plan["templates"]}
    assert plan["site"] == "fra1" and plan["required_unsatisfied"] == []
    assert set(fits["gpu-nic-pair-1"]["nodes"]) == {"gpu-01", "gpu-02"}
    assert fits["gpu-nic-pair-1"]["satisfiable"] and fits["gpu-nic-pair-1"]["fits_total"] == 16
    assert fits["gpu-nic-pair-1"]["nodes"]["gpu-01"]["aligned_level"] == "PXB"
    assert "gpu-01" in (output / "fra1" / "report.html").read_text()
    assert (output / "index.html").is_file()
    assert changed(first.stdout) > 0

    written = outputs(output)
    again = playbook(project, env, "aligned.dra.site")
    assert changed(again.stdout) == 0, again.stdout[-4000:]
    # A converged re-run keeps the site's outputs, byte for byte, and each stage says so.
    said = " ".join(again.stdout.split())  # the YAML callback folds long messages
    for stage in ("claims", "utilization", "teams", "placement", "replay"):
        assert f"fra1: inputs and facts unchanged since the last run; the {stage} outputs are kept" in said
    assert "Site report: " in said and "(kept: fra1 unchanged since the last run)" in said
    assert outputs(output) == written
    # An output removed since the last run: the site renders again and writes it back, the same bytes.
    (output / "fra1" / "plan.json").unlink()
    restored = playbook(project, env, "aligned.dra.site")
    assert "outputs are kept" not in restored.stdout and changed(restored.stdout) > 0
    assert outputs(output) == written

    what_if = playbook(
        project,
        env,
        "aligned.dra.what_if",
        "-e",
        "aligned_dra_what_if_site=fra1",
        "-e",
        f"aligned_dra_what_if_topology_dir={output / 'fra1' / 'nodes'}",
    )
    assert "failed=0" in what_if.stdout
    answer = json.loads((output / "fra1" / "what-if.json").read_text())
    assert answer["site"] == "fra1"
    shutil.rmtree(project / "trees")
