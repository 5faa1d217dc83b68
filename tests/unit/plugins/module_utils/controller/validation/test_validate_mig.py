# SPDX-License-Identifier: Apache-2.0
"""controller/validation/validate_mig.py: the MIG checks in the validation stage, and the hosts mig.yml rolls."""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.validation import stage

CONFIGS = {
    "all-1g": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 8}, "device-filter": "0x20B010DE"}]
}


def run(settings: dict[str, dict], stages=("mig",)):
    return stage.run(list(settings), lambda h: list(settings[h]), lambda h, n, d: settings[h].get(n, d), stages)


def test_the_mig_hosts_are_those_whose_mode_is_not_off():
    result, message = run(
        {"a": {"aligned_dra_mig": {"mode": "dynamic"}}, "b": {}, "c": {"aligned_dra_mig": {"mode": "off"}}}
    )
    assert message is None and result["mig_hosts"] == ["a"]


def test_hosts_whose_nodes_the_collection_does_not_configure_are_no_mig_hosts():
    result, message = run(
        {
            "a": {"aligned_dra_mig": {"mode": "dynamic", "configure_nodes": False}},
            "b": {"aligned_dra_mig": {"mode": "dynamic"}},
        }
    )
    assert message is None and result["mig_hosts"] == ["b"]


def test_a_layout_that_does_not_fit_is_said_once_per_site_naming_the_hosts_and_the_input():
    mig = {"mode": "static", "mig_configs": CONFIGS, "layout": "all-1g"}
    result, message = run({f"gpu-0{i}": {"aligned_dra_mig": mig, "aligned_dra_site": "west"} for i in range(2)})
    assert result["site_inputs"] == {}
    assert "site west, 2 hosts (gpu-00, gpu-01): aligned_dra_mig = " in message
    assert "layout all-1g[0] (A100-SXM4-40GB, documented profiles)" in message and "at most 7" in message


def test_dynamic_on_a_135_site_without_the_gate_is_refused():
    settings = {"gpu-01": {"aligned_dra_mig": {"mode": "dynamic"}, "aligned_dra_kubernetes_version": "1.35"}}
    _result, message = run(settings)
    assert "gpu-01: aligned_dra_mig = " in message and "DRAPartitionableDevices" in message
    settings["gpu-01"]["aligned_dra_mig"]["partitionable_devices_gate"] = True
    assert run(settings)[1] is None


def test_the_mig_checks_run_only_with_the_mig_stage():
    mig = {"mode": "static", "mig_configs": CONFIGS, "layout": "all-1g"}
    assert run({"gpu-01": {"aligned_dra_mig": mig}}, stages=("probe",))[1] is None
