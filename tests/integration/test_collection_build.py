# SPDX-License-Identifier: Apache-2.0
"""`ansible-galaxy collection build` makes an artifact that installs and works."""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
from pathlib import Path

from ansible_collections.aligned.dra.tests.fixtures.materialize import materialize

REPO = Path(__file__).resolve().parents[2]


def run(*command: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def test_built_collection_installs_and_probes(tmp_path):
    run("ansible-galaxy", "collection", "build", "--output-path", str(tmp_path), str(REPO))
    (artifact,) = tmp_path.glob("aligned-dra-*.tar.gz")
    with tarfile.open(artifact) as tar:
        names = tar.getnames()
    assert "plugins/modules/topology_info.py" in names
    assert "roles/topology/meta/argument_specs.yml" in names
    assert not [n for n in names if n.startswith((".venv", ".cache", "output/"))]
    assert artifact.stat().st_size < 5 * 1024 * 1024

    installed = tmp_path / "collections"
    # --no-deps: kubernetes.core comes from the ansible wheel here, Galaxy is unreachable.
    run("ansible-galaxy", "collection", "install", "--no-deps", "--force", "-p", str(installed), str(artifact))
    assert (installed / "ansible_collections/aligned/dra/MANIFEST.json").is_file()

    tree = materialize("hwloc-32intel64-8ve", tmp_path / "trees")
    config = tmp_path / "ansible.cfg"  # only the installed copy, not this checkout
    config.write_text("[defaults]\ncollections_scan_sys_path = false\n")
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(installed), ANSIBLE_CONFIG=str(config))
    result = run(
        "ansible",
        "localhost",
        "-o",
        "-m",
        "aligned.dra.topology_info",
        "-a",
        f"sysfs_root={tree / 'sys'} procfs_root={tree / 'proc'}",
        env=env,
        cwd=tmp_path,
    )
    payload = json.loads(result.stdout.split("=>", 1)[1])
    assert payload["changed"] is False
    assert payload["topology"]["counts"]["accelerator"] == 8
