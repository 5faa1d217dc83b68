# SPDX-License-Identifier: Apache-2.0
"""roles/mig's bundled-driver GPU client (vars/main.yml) and the driver's DaemonSet (controller/deploy): the
role's pod labels select the DaemonSet's pods, and the node label the role sets makes the DaemonSet leave the
node, with MIG on; without MIG the DaemonSet is as before."""

from __future__ import annotations

from pathlib import Path

import yaml

from ansible_collections.aligned.dra.plugins.module_utils.controller.deploy import driver as dd
from ansible_collections.aligned.dra.plugins.module_utils.controller.deploy import mig
from ansible_collections.aligned.dra.tests.support.fakes.apiserver import match_label_selector
from ansible_collections.aligned.dra.tests.support.sites.driver_deploy import DS

ROLE_VARS = Path(__file__).resolve().parents[3] / "roles" / "mig" / "vars" / "main.yml"
STATIC = {"mode": "static", "gpus": {}, "layout": "all-1g", "mig_configs": {"all-1g": []}}


def role_vars() -> dict:
    return yaml.safe_load(ROLE_VARS.read_text())


def excluded(spec: dict, node_labels: dict) -> bool:
    """The node is left by the pod's required node affinity (every term must fail: terms are ORed)."""
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    return not any(
        all(node_labels.get(e["key"]) not in e["values"] for e in term["matchExpressions"] if e["operator"] == "NotIn")
        for term in terms
    )


def test_the_roles_driver_entry_selects_the_daemonsets_pods_and_its_label_makes_them_leave():
    (entry,) = role_vars()["aligned_dra_mig_driver_clients"]["daemonset_pods"]
    paused = role_vars()["aligned_dra_mig_paused_value"]
    assert (entry["node_label"], paused) == (mig.PAUSE_LABEL, mig.PAUSED)
    pod = dd.daemonset(dict(DS, mig=STATIC))["spec"]["template"]
    assert match_label_selector(pod["metadata"]["labels"], ",".join(f"{k}={v}" for k, v in entry["labels"].items()))
    assert excluded(pod["spec"], {mig.PAUSE_LABEL: mig.PAUSED})
    assert not excluded(pod["spec"], {}) and not excluded(pod["spec"], {mig.PAUSE_LABEL: "true"})


def test_a_site_node_selector_affinity_keeps_its_terms_and_without_mig_nothing_is_added():
    assert "affinity" not in dd.daemonset(dict(DS))["spec"]["template"]["spec"]
    spec: dict = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}, {}]}}}}  # fmt: skip
    mig.pod_spec(STATIC, dict(DS), spec, {})
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    paused = {"key": mig.PAUSE_LABEL, "operator": "NotIn", "values": [mig.PAUSED]}
    assert terms == [
        {"matchExpressions": [{"key": "gpu", "operator": "Exists"}, paused]},
        {"matchExpressions": [paused]},
    ]
    mig.pod_spec(STATIC, dict(DS), spec, {})  # again: not twice
    assert (
        spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == terms
    )
