# SPDX-License-Identifier: Apache-2.0
"""playbooks/preflight.yml: a controller that lacks what the run needs stops site.yml
before anything is written, with one message that names each missing piece and the
install line; a complete controller passes it and the run goes on."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ansible_collections.aligned.dra.tests.support.harnesses.playbook_runs import (
    PLAYBOOKS,
    environment,
    run_playbook,
    write_inventory,
)

pytestmark = pytest.mark.slow


def inventory(path: Path, output: Path, localhost_python: str, **settings) -> Path:
    controller = {"localhost": {"ansible_connection": "local", "ansible_python_interpreter": localhost_python}}
    variables = {
        "ansible_python_interpreter": sys.executable,
        "aligned_dra_site": "fra1",
        "aligned_dra_output_dir": str(output),
        "aligned_dra_sysfs_root": "/nonexistent/sys",
        **settings,
    }
    return write_inventory(path, ["node-a", "node-b"], variables, groups={"all": {"hosts": controller}})


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory) -> str:
    """A Python with nothing but the standard library: what a fresh controller's system Python has."""
    venv = tmp_path_factory.mktemp("bare") / "venv"
    import venv as venv_module

    venv_module.create(venv, with_pip=False)
    return str(venv / "bin" / "python")


def test_site_stops_before_any_change_and_names_every_missing_piece(tmp_path, bare_python):
    output = tmp_path / "output"
    hosts = inventory(tmp_path / "hosts.yml", output, bare_python, aligned_dra_claims_apply=True)
    # Only the checkout's collection: kubernetes.core is not there.
    collections = tmp_path / "collections" / "ansible_collections" / "aligned"
    collections.mkdir(parents=True)
    (collections / "dra").symlink_to(PLAYBOOKS.parent)
    result = run_playbook(
        hosts, PLAYBOOKS / "site.yml", env=environment(ANSIBLE_COLLECTIONS_PATH=str(tmp_path / "collections"))
    )
    text = result.stdout + result.stderr
    assert result.returncode != 0
    assert "aligned.dra preflight: the controller lacks what this run needs; nothing was changed." in text
    for line in (
        f"- Python package cel-expr-python>=0.1.3 for {bare_python}: not installed",
        f"- Python package kubernetes-validate>=1.36.0 for {bare_python}: not installed",
        f"- Python package kubernetes>=34.1.0 for {bare_python}: not installed",
        "asked for by aligned_dra_claims_apply on node-a",
        "- collection kubernetes.core>=5.0.0: not installed",
        f"  {bare_python} -m pip install 'cel-expr-python>=0.1.3' 'kubernetes-validate>=1.36.0' 'kubernetes>=34.1.0'",
        "  ansible-galaxy collection install 'kubernetes.core:>=5.0.0'",
    ):
        assert line in text, line
    # The probe (first play after the preflight) never ran: nothing was written.
    assert not output.exists()
    assert "Probe" not in text.split("PLAY RECAP")[0].split("Preflight")[-1]


def test_a_complete_controller_passes_and_the_check_runs_once(tmp_path):
    output = tmp_path / "output"
    hosts = inventory(
        tmp_path / "hosts.yml",
        output,
        sys.executable,
        aligned_dra_kubernetes_version="1.37",
        aligned_dra_claims_apply=True,
        aligned_dra_driver_mode="daemonset",
        aligned_dra_driver_image="registry.example/aligned-dra-driver:0.1.0",
    )
    result = run_playbook(hosts, PLAYBOOKS / "site.yml", "--check", "--tags", "preflight", "-v")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "kubernetes-validate" in result.stdout and "'>=1.37.0'" in result.stdout
    # site.yml and each stage playbook it imports carry the preflight; it checks once.
    assert result.stdout.count("TASK [Preflight | Python packages") == 9  # mig.yml among the stages
    assert result.stdout.count("interpreters:") == 1
    assert not output.exists()


def test_skip_tags_preflight_leaves_it_out_and_any_tags_keep_it(tmp_path):
    hosts = inventory(tmp_path / "hosts.yml", tmp_path / "output", sys.executable)
    listed = run_playbook(hosts, PLAYBOOKS / "site.yml", "--list-tasks", "--tags", "render")
    assert listed.returncode == 0, listed.stderr
    assert "Preflight | Python packages" in listed.stdout  # tagged always: runs whatever --tags says
    skipped = run_playbook(hosts, PLAYBOOKS / "site.yml", "--list-tasks", "--skip-tags", "preflight")
    assert skipped.returncode == 0, skipped.stderr
    assert "Preflight | Python packages" not in skipped.stdout
