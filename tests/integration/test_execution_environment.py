# SPDX-License-Identifier: Apache-2.0
"""The execution environment: ansible-builder makes its build context from ee/, and
the dependency lists it collects install into a clean Python where every module
of the collection imports and the preflight passes."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from ansible_collections.aligned.dra.tests.support.harnesses import installed_collection as ic
from ansible_collections.aligned.dra.tests.support.harnesses.playbook_runs import run_in_project

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("ee")
    artifact = ic.build(root / "dist")
    core = ic.kubernetes_core_tarball(root / "dist")
    return {
        "root": root,
        "artifact": artifact,
        "core": core,
        "path": ic.install([artifact, core], root / "collections"),
    }


def test_builder_makes_the_build_context(installed, tmp_path):
    ee = tmp_path / "ee"
    shutil.copytree(REPO / "ee", ee)
    shutil.copy(installed["artifact"], ee)
    ic.run("ansible-builder", "create", "-f", str(ee / "execution-environment.yml"), "-c", str(tmp_path / "context"))
    context = tmp_path / "context"
    containerfile = (context / "Containerfile").read_text()
    assert "ansible-galaxy collection install" in containerfile
    assert "introspect" in containerfile
    # The tarball requirements.yml names is the one the build copies in: same version as galaxy.yml.
    requirements = yaml.safe_load((context / "_build" / "requirements.yml").read_text())
    (ours,) = [c for c in requirements["collections"] if c.get("type") == "file"]
    assert (context / "_build" / ours["name"]).is_file(), sorted(p.name for p in (context / "_build").rglob("*"))
    version = yaml.safe_load((REPO / "galaxy.yml").read_text())["version"]
    assert ours["name"] == f"collections/aligned-dra-{version}.tar.gz"
    (core,) = [c for c in requirements["collections"] if c["name"] == "kubernetes.core"]
    galaxy = yaml.safe_load((REPO / "galaxy.yml").read_text())
    assert core["version"] == galaxy["dependencies"]["kubernetes.core"]


def test_dependency_lists_install_into_a_clean_python(installed, tmp_path):
    collections = installed["path"]
    pip_list, bindep_list = tmp_path / "requirements.txt", tmp_path / "bindep.txt"
    ic.run(
        "ansible-builder",
        "introspect",
        "--sanitize",
        "--write-pip",
        str(pip_list),
        "--write-bindep",
        str(bindep_list),
        str(collections),
    )
    python = pip_list.read_text()
    for name in ("cel-expr-python", "kubernetes-validate", "kubernetes>=34.1.0"):
        assert name in python, python
    assert "# from collection aligned.dra" in python or "aligned.dra" in python
    system = bindep_list.read_text()
    assert "openssh-client [platform:dpkg]" in system, system
    # Every system package is one this Debian machine has (scripts/bootstrap.sh installs them).
    missing = subprocess.run(["bindep", "-b", "-f", str(bindep_list)], capture_output=True, text=True, check=False)
    assert missing.returncode == 0, f"bindep reports missing packages: {missing.stdout}{missing.stderr}"

    venv = tmp_path / "venv"
    ic.run(sys.executable, "-m", "venv", str(venv))
    core = next(
        line for line in (REPO / "requirements-dev.txt").read_text().splitlines() if line.startswith("ansible-core==")
    )
    ic.run(str(venv / "bin" / "python"), "-m", "pip", "install", "-q", core, "-r", str(pip_list))
    check = textwrap.dedent(
        f"""
        import importlib, pkgutil
        from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder
        _AnsibleCollectionFinder(paths=[{str(collections)!r}])._install()
        import ansible_collections.aligned.dra.plugins.modules as modules
        names = [m.name for m in pkgutil.iter_modules(modules.__path__)]
        for name in names:
            importlib.import_module("ansible_collections.aligned.dra.plugins.modules." + name)
        from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import render as claims
        from ansible_collections.aligned.dra.plugins.module_utils.dra import cel as dra_cel
        assert dra_cel.CEL_IMPORT_ERROR is None, dra_cel.CEL_IMPORT_ERROR
        cls = {{"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {{"name": "x"}}, "spec": {{}}}}
        assert claims.validate(cls, "1.36") == [], claims.validate(cls, "1.36")
        import kubernetes.client
        kubernetes.client.ResourceV1Api
        print(len(names))
        """
    )
    imported = ic.run(str(venv / "bin" / "python"), "-c", check)
    assert int(imported.stdout.strip()) >= 9

    # The preflight in that environment: everything a cluster run needs is there.
    project = tmp_path / "project"
    project.mkdir()
    (project / "ansible.cfg").write_text("[defaults]\ncollections_scan_sys_path = false\n")
    (project / "hosts.yml").write_text(
        yaml.safe_dump(
            {
                "aligned_dra_nodes": {
                    "hosts": {"n1": {}},
                    "vars": {"aligned_dra_claims_apply": True, "aligned_dra_kubernetes_version": "1.37"},
                }
            }
        )
    )
    env = ic.project_env(collections, project)
    env["PATH"] = f"{venv / 'bin'}:{env['PATH']}"
    result = run_in_project(
        project,
        "aligned.dra.preflight",
        "-i",
        "hosts.yml",
        "-e",
        '{"aligned_dra_preflight_stages": [claims]}',
        "-e",
        f"ansible_python_interpreter={venv / 'bin' / 'python'}",
        env=env,
        executable=venv / "bin" / "ansible-playbook",
    )
    assert result.returncode == 0, result.stdout + result.stderr
