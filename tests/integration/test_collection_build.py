# SPDX-License-Identifier: Apache-2.0
"""`ansible-galaxy collection build` makes an artifact that installs and works.

The collection is built and installed once for this file; the tests then
check what the tarball holds (what the docs promise, nothing that only works
in this checkout) and use the installed copy from a project directory of its
own, with only that copy on the collections path.
"""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
from pathlib import Path

import pytest
import yaml

from ansible_collections.aligned.dra.tests.fixtures.materialize import materialize
from ansible_collections.aligned.dra.tests.support.harnesses.installed_collection import build, run
from ansible_collections.aligned.dra.tests.support.harnesses.playbook_runs import run_in_project
from ansible_collections.aligned.dra.tests.support.sites.report_sites import topology_of, write_site

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict:
    """The artifact, its member names, and an installed copy with a project that uses only it."""
    out = tmp_path_factory.mktemp("collection-build")
    artifact = build(out)
    with tarfile.open(artifact) as tar:
        names = tar.getnames()
    installed = out / "collections"
    # --no-deps: kubernetes.core comes from the ansible wheel here, Galaxy is unreachable.
    run("ansible-galaxy", "collection", "install", "--no-deps", "--force", "-p", str(installed), str(artifact))
    project = out / "project"  # a user's project, outside this checkout
    project.mkdir()
    config = project / "ansible.cfg"  # only the installed copy, not this checkout
    config.write_text("[defaults]\ncollections_scan_sys_path = false\n")
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(installed), ANSIBLE_CONFIG=str(config))
    return {"artifact": artifact, "names": names, "installed": installed, "project": project, "env": env}


def tracked(*paths: str) -> list[str]:
    listed = subprocess.run(["git", "ls-files", *paths], capture_output=True, text=True, cwd=REPO, check=True)
    return [p for p in listed.stdout.splitlines() if (REPO / p).exists()]


def test_the_tarball_holds_what_the_docs_promise(built):
    names = set(built["names"])
    for promised in (
        "MANIFEST.json",
        "FILES.json",
        "LICENSE",
        "README.md",
        "meta/runtime.yml",
        "meta/execution-environment.yml",
        "requirements.txt",
        "bindep.txt",
        "ee/execution-environment.yml",
        "ee/requirements.yml",
        "docs/install.md",
        "docs/examples/project/requirements.yml",
        "playbooks/preflight.yml",
        "plugins/action/preflight.py",
        "playbooks/validate.yml",
        "plugins/action/validate.py",
        "plugins/module_utils/controller/validation/validate.py",
        "playbooks/capture.yml",
        "playbooks/what_if.yml",
        "plugins/modules/topology_capture.py",
        "plugins/modules/topology_snapshot.py",
        "plugins/module_utils/node/snapshots/capture.py",
        "plugins/module_utils/node/snapshots/archive.py",
        "plugins/module_utils/node/topology/__init__.py",
        "plugins/module_utils/node/topology/prober.py",
        "plugins/module_utils/node/topology/reads.py",
        "docs/capture.md",
        "docs/index.md",
        "docs/reference/topology_capture_module.rst",
        "driver/pyproject.toml",
        "changelogs/changelog.yaml",
        "tests/sanity/ignore-2.21.txt",
        "plugins/module_utils/controller/schedulers/kueue/objects.py",
        "plugins/module_utils/controller/schedulers/kueue/schemas.py",
        "licenses/kueue-v0.19.2-LICENSE",
        "plugins/module_utils/controller/schedulers/kai/schemas.py",
        "licenses/kai-scheduler-v0.17.0-LICENSE",
    ):
        assert promised in names, promised
    # Every playbook, role, plugin and document of the checkout, and the bundled driver.
    for path in tracked("playbooks", "roles", "plugins", "docs", "driver", "meta", "ee"):
        assert path in names, path
    assert built["artifact"].stat().st_size < 5 * 1024 * 1024


def test_the_tarball_holds_nothing_that_only_works_in_the_checkout(built):
    development = (
        ".venv/",
        ".cache/",
        ".ci/",
        ".config/",
        "output/",
        "scripts/",
        "molecule/",
        "benchmarks/",
        "inventories/",
        "tests/unit/",
        "tests/integration/",
        "tests/fixtures/",
        "tests/support/",
        "tests/durations.json",
        "tests/conftest.py",
        "ansible.cfg",
        "pytest.ini",
        "requirements-dev.txt",
    )
    found = [n for n in built["names"] if n.startswith(development) or n + "/" in development]
    assert found == []
    assert [n for n in built["names"] if "__pycache__" in n or n.endswith((".pyc", ".tar.gz", ".tar.bz2"))] == []


def test_the_installed_collection_probes(built, tmp_path):
    tree = materialize("hwloc-32intel64-8ve", tmp_path / "trees")
    result = run(
        "ansible",
        "localhost",
        "-o",
        "-m",
        "aligned.dra.topology_info",
        "-a",
        f"sysfs_root={tree / 'sys'} procfs_root={tree / 'proc'}",
        env=built["env"],
        cwd=built["project"],
    )
    payload = json.loads(result.stdout.split("=>", 1)[1])
    assert payload["changed"] is False
    assert payload["topology"]["counts"]["accelerator"] == 8


def test_capture_and_plan_offline_from_the_installed_collection(built, tmp_path):
    project = built["project"]
    env = dict(built["env"], HOME=str(tmp_path / "home"))  # the what-if cache goes under ~/.cache
    env.pop("XDG_CACHE_HOME", None)
    tree = materialize("dgx-h100", tmp_path / "trees")
    inventory = project / "inventory"
    inventory.mkdir()
    (inventory / "hosts.yml").write_text(
        yaml.safe_dump(
            {
                "aligned_dra_nodes": {
                    "hosts": {
                        "gpu-node01": {
                            "aligned_dra_sysfs_root": str(tree / "sys"),
                            "aligned_dra_procfs_root": str(tree / "proc"),
                        }
                    },
                    "vars": {
                        "ansible_connection": "local",
                        "ansible_python_interpreter": "{{ ansible_playbook_python }}",
                        "aligned_dra_site": "west",
                        "aligned_dra_output_dir": str(project / "output"),
                        "aligned_dra_kubernetes_version": "1.36",
                        "aligned_dra_claims": {"templates": {"pairs": {"counts": [1, 8]}}},
                    },
                }
            }
        )
    )
    captured = run_in_project(project, "aligned.dra.capture", "-i", "inventory/hosts.yml", env=env)
    assert captured.returncode == 0, captured.stdout + captured.stderr
    archive = inventory / "snapshots" / "gpu-node01.tar.gz"
    assert archive.is_file()

    planned = run_in_project(
        project,
        "aligned.dra.what_if",
        "-i",
        "inventory/hosts.yml",
        "-e",
        json.dumps(
            {
                "aligned_dra_what_if_site": "west",
                "aligned_dra_what_if_snapshots": {"gpu-node02": "inventory/snapshots/gpu-node01.tar.gz"},
            }
        ),
        env=env,
    )
    assert planned.returncode == 0, planned.stdout + planned.stderr
    plan = json.loads((project / "output" / "west" / "what-if.json").read_text())
    templates = {t["name"]: t for t in plan["templates"]}
    assert list(templates["gpu-nic-pair-1"]["nodes"]) == ["gpu-node02"]
    assert templates["gpu-nic-pair-1"]["fits_total"] == 8
    assert templates["gpu-nic-pair-8"]["fits_total"] == 1
    assert (tmp_path / "home" / ".cache" / "aligned-dra" / "snapshots" / "gpu-node02" / "sys").is_dir()


def test_the_installed_collection_renders_the_report_from_its_own_templates(built, tmp_path):
    """The site_report action finds the Jinja2 templates in the installed copy (AnsiballZ ships no .j2)."""
    assert "roles/report/templates/report/site.html.j2" in built["names"]
    assert "plugins/action/site_report.py" in built["names"]
    output = tmp_path / "output"
    write_site(output, "lab", {"ve-<node>": topology_of("hwloc-32intel64-8ve")})
    run(
        "ansible",
        "localhost",
        "-o",
        "-m",
        "aligned.dra.site_report",
        "-a",
        f"output_dir={output}",
        env=built["env"],
        cwd=built["project"],
    )
    page = (output / "lab" / "report.html").read_text()
    assert "8 Vector Engines" in page and ">VE0<" in page and "ve-&lt;node&gt;" in page
