# SPDX-License-Identifier: Apache-2.0
"""The controller's requirements: which settings need what, version checks, the one message."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from ansible_collections.aligned.dra.plugins.module_utils.controller.validation import preflight

REPO = Path(__file__).resolve().parents[6]


def lookup_from(settings: dict[str, dict]):
    return lambda host, variable, default: settings.get(host, {}).get(variable, default)


@pytest.mark.parametrize(
    ("version", "spec", "ok"),
    [
        ("37.0.2", ">=34.1.0", True),
        ("34.1", ">=34.1.0", True),
        ("34.0.9", ">=34.1.0", False),
        ("1.37.0", ">=1.36.0,<2", True),
        ("2.0", ">=1.36.0,<2", False),
        ("2.21.0rc1", ">=2.20.0", True),
        ("0.1.3", "==0.1.3", True),
        ("0.1.3", "!=0.1.3", False),
        ("6.6.0", ">5", True),
        ("5", "<=5.0.0", True),
    ],
)
def test_satisfies(version, spec, ok):
    assert preflight.satisfies(version, spec) is ok


@pytest.mark.parametrize("spec", ["~=1.0", ">= ", "1.0", ">=x"])
def test_unreadable_specifier_is_an_error(spec):
    with pytest.raises(preflight.PreflightError, match="specifier|numeric"):
        preflight.satisfies("1.0", spec)


def test_a_probe_only_run_needs_nothing():
    assert preflight.features(["a"], lookup_from({}), ["probe", "report"]) == {}


def test_claims_always_render_and_cluster_only_when_asked():
    hosts = ["a", "b"]
    found = preflight.features(hosts, lookup_from({}), ["claims"])
    assert found == {"render": "the claims stage (a)"}
    found = preflight.features(hosts, lookup_from({"b": {"aligned_dra_claims_apply": "yes"}}), ["claims"])
    assert found["cluster"] == "aligned_dra_claims_apply on b"
    found = preflight.features(hosts, lookup_from({"a": {"aligned_dra_claims_plan_source": "cluster"}}), ["claims"])
    assert found["cluster"] == "aligned_dra_claims_plan_source on a"


def test_placement_renders_for_jobs_and_talks_to_the_cluster_only_to_apply():
    assert preflight.features(["a"], lookup_from({}), ["placement"]) == {}
    jobs = {"a": {"aligned_dra_jobs": [{"name": "j", "workers": 2, "template": "t"}]}}
    assert preflight.features(["a"], lookup_from(jobs), ["placement"]) == {"render": "aligned_dra_jobs on a"}
    labels = {"b": {"aligned_dra_placement_apply": True}}
    assert preflight.features(["a", "b"], lookup_from(labels), ["placement"]) == {
        "cluster": "aligned_dra_placement_apply on b"
    }
    started = {"a": {"aligned_dra_jobs_apply": "yes"}}
    assert preflight.features(["a"], lookup_from(started), ["placement"])["cluster"] == "aligned_dra_jobs_apply on a"
    read = {"a": {"aligned_dra_placement_cluster": {"source": "cluster"}}}
    assert preflight.features(["a"], lookup_from(read), ["placement"]) == {
        "cluster": "aligned_dra_placement_cluster on a"
    }
    files = {"a": {"aligned_dra_placement_cluster": {"source": "files", "node_files": ["/n.json"]}}}
    assert preflight.features(["a"], lookup_from(files), ["placement"]) == {}


def test_settings_of_stages_not_run_are_ignored():
    settings = {"a": {"aligned_dra_utilization_source": "cluster", "aligned_dra_kubeconfig": "/k"}}
    assert "cluster" not in preflight.features(["a"], lookup_from(settings), ["probe", "report"])
    assert preflight.features(["a"], lookup_from(settings), ["utilization"])["cluster"].startswith(
        "aligned_dra_utilization_source"
    )
    assert preflight.features(["a"], lookup_from(settings), ["network"])["cluster"] == "aligned_dra_kubeconfig on a"
    files = {"a": {"aligned_dra_utilization_source": "files"}}
    assert preflight.features(["a"], lookup_from(files), ["utilization"]) == {
        "render": "aligned_dra_utilization_source on a"
    }


def test_gpu_use_from_prometheus_needs_requests_exported_files_do_not():
    scraped = {"a": {"aligned_dra_usage": {"prometheus": "http://prometheus:9090", "window": "7d"}}}
    assert preflight.features(["a"], lookup_from(scraped), ["utilization"]) == {"prometheus": "aligned_dra_usage on a"}
    assert "prometheus" not in preflight.features(["a"], lookup_from(scraped), ["claims"])
    exported = {"a": {"aligned_dra_usage": {"files": ["/usage.om"]}}}
    assert preflight.features(["a"], lookup_from(exported), ["utilization"]) == {}
    assert preflight.features(["a"], lookup_from({}), ["utilization"]) == {}
    wanted = preflight.requirements_for({"prometheus"})
    assert [(item["name"], item["version"]) for item in wanted["python"]] == [("requests", ">=2.31")]
    assert not wanted["collections"]


def test_host_mode_driver_needs_the_controllers_pip_daemonset_mode_does_not():
    assert "wheelhouse" in preflight.features(["a"], lookup_from({}), ["driver"])
    daemonset = {"a": {"aligned_dra_driver_mode": "daemonset"}}
    assert "wheelhouse" not in preflight.features(["a"], lookup_from(daemonset), ["driver"])
    absent = {"a": {"aligned_dra_driver_state": "absent"}}
    assert "wheelhouse" not in preflight.features(["a"], lookup_from(absent), ["driver"])


def test_unknown_stage_is_named():
    with pytest.raises(preflight.PreflightError, match="'claim'"):
        preflight.features(["a"], lookup_from({}), ["claim"])


def test_kubernetes_validate_must_know_the_newest_minor():
    wanted = preflight.requirements_for({"render"}, ["1.34", "1.37"])
    (validate,) = [item for item in wanted["python"] if item["name"] == "kubernetes-validate"]
    assert validate["version"] == ">=1.37.0"
    assert not wanted["collections"]
    names = {item["name"] for item in preflight.requirements_for({"cluster"})["python"]}
    assert names == {"kubernetes"}
    assert [c["name"] for c in preflight.requirements_for({"cluster"})["collections"]] == ["kubernetes.core"]


def test_check_python_reports_missing_old_and_present():
    items = [
        {"name": "pytest", "import": "pytest", "version": ">=1.0", "interpreter": "modules", "features": ["render"]},
        {"name": "pytest", "import": "pytest", "version": ">=999", "interpreter": "modules", "features": ["render"]},
        {
            "name": "no-such-dist-aligned",
            "import": "no_such_dist_aligned",
            "version": ">=1",
            "interpreter": "modules",
            "features": ["cluster"],
        },
    ]
    present, old, missing = preflight.check_python(items)
    assert present["problem"] is None and present["found"]
    assert old["problem"].startswith(f"version {present['found']} does not satisfy >=999")
    assert missing == dict(items[2], found=None, problem="not installed")


def test_run_checks_every_entry_names_what_it_needs_then_checks_the_packages():
    entry = {"name": "pytest", "import": "pytest", "version": ">=1.0"}
    assert preflight.run([entry]) == preflight.check_python([entry])
    with pytest.raises(preflight.PreflightError) as raised:
        preflight.run([entry, {"name": "pytest", "import": "", "version": ">=1.0"}])
    assert str(raised.value) == "entry {'name': 'pytest', 'import': '', 'version': '>=1.0'} lacks import"
    with pytest.raises(preflight.PreflightError, match=r"lacks name, import, version$"):
        preflight.run([{}])


def test_check_collection():
    item = {"name": "kubernetes.core", "version": ">=5.0.0", "features": ["cluster"]}
    assert preflight.check_collection(item, "6.6.0")["problem"] is None
    assert preflight.check_collection(item, "4.0.0")["problem"] == "version 4.0.0 does not satisfy >=5.0.0"
    assert preflight.check_collection(item, None)["problem"] == "not installed"
    assert preflight.check_collection(item, "")["problem"] is None  # a checkout without MANIFEST.json


def test_one_message_lists_everything_and_the_install_lines():
    python = [
        {
            "name": "kubernetes",
            "version": ">=34.1.0",
            "interpreter": "modules",
            "features": ["cluster"],
            "problem": "not installed",
        },
        {
            "name": "pip",
            "version": ">=23.0",
            "interpreter": "playbook",
            "features": ["wheelhouse"],
            "problem": "not installed",
        },
        {
            "name": "cel-expr-python",
            "version": ">=0.1.3",
            "interpreter": "modules",
            "features": ["render"],
            "problem": None,
        },
    ]
    collections = [
        {"name": "kubernetes.core", "version": ">=5.0.0", "features": ["cluster"], "problem": "not installed"}
    ]
    reasons = {"cluster": "aligned_dra_claims_apply on n1", "wheelhouse": "aligned_dra_driver_mode host on n1"}
    message = preflight.report(
        python, collections, reasons, {"modules": "/usr/bin/python3", "playbook": "/venv/bin/python"}
    )
    assert "nothing was changed" in message
    assert "cel-expr-python" not in message
    assert "aligned_dra_claims_apply on n1" in message
    assert "  /usr/bin/python3 -m pip install 'kubernetes>=34.1.0'" in message
    assert "  /venv/bin/python -m pip install 'pip>=23.0'" in message
    assert "  ansible-galaxy collection install 'kubernetes.core:>=5.0.0'" in message
    assert preflight.report(python[2:], [], {}, {}) is None


def _requirement_lines(path: Path) -> dict[str, str]:
    found = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, spec = re.match(r"([A-Za-z0-9_.-]+)\s*(.*)", line).groups()
            found[name.lower()] = spec.replace(" ", "")
    return found


def test_requirements_txt_is_this_list():
    """requirements.txt (pip, ansible-builder) says what the preflight checks, no more, no less."""
    listed = _requirement_lines(REPO / "requirements.txt")
    expected = {item["name"]: item["version"] for item in preflight.PYTHON if item["interpreter"] == "modules"}
    assert listed == expected


def test_galaxy_dependencies_are_this_list():
    galaxy = yaml.safe_load((REPO / "galaxy.yml").read_text())
    for item in preflight.COLLECTIONS:
        spec = galaxy["dependencies"][item["name"]]
        assert preflight.satisfies(item["version"].lstrip(">="), spec), (item, spec)
    runtime = yaml.safe_load((REPO / "meta" / "runtime.yml").read_text())
    assert runtime["requires_ansible"] == preflight.ANSIBLE_CORE


def test_development_pins_satisfy_the_runtime_ranges():
    """The suite runs on a set the ranges allow, so what it proves holds for the ranges."""
    pins = {name: spec.lstrip("=") for name, spec in _requirement_lines(REPO / "requirements-dev.txt").items()}
    for item in preflight.PYTHON:
        if item["name"] == "pip":
            continue
        assert preflight.satisfies(pins[item["name"]], item["version"]), item
    assert preflight.satisfies(pins["ansible-core"], preflight.ANSIBLE_CORE)
