# SPDX-License-Identifier: Apache-2.0
"""controller/mig/checks.py: aligned_dra_mig refused before any change, each problem naming the host and input."""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.mig import checks

A100 = {"kind": "gpu", "vendor_id": "0x10de", "device_id": "0x20b0", "pci_address": "0000:18:00.0"}
H100 = {"kind": "gpu", "vendor_id": "0x10de", "device_id": "0x2330", "pci_address": "0000:2a:00.0"}
L40S = {"kind": "gpu", "vendor_id": "0x10de", "device_id": "0x26b9", "pci_address": "0000:3b:00.0"}
CONFIGS = {
    "all-1g": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 7}}],
    "too-many": [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.20gb": 2, "4g.20gb": 1}}],
    "h100-mixed": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 3, "3g.40gb": 1}}],
}


def static(layout: str, **more) -> dict:
    return {"mode": "static", "mig_configs": CONFIGS, "layout": layout, **more}


def reasons(mig, devices=None, minor="1.36", gates=None, extra_args=None):
    settings = {"aligned_dra_mig": mig, "aligned_dra_driver_extra_args": extra_args}
    if devices is not None:
        settings["aligned_dra_topology"] = {"devices": devices}
    return [reason for _h, _v, _x, reason in checks.host_problems("gpu-01", settings, minor, gates or {})]


def test_a_layout_that_fits_every_selected_gpu_passes():
    assert reasons(static("all-1g"), [A100, L40S]) == []
    assert reasons(static("h100-mixed", gpus={"device_ids": ["0x2330"]}), [A100, H100]) == []


def test_an_unknown_profile_for_the_gpus_model_names_the_gpu_and_the_profiles_it_has():
    (reason,) = reasons(static("h100-mixed"), [A100])
    assert "layout h100-mixed[0] on GPU 0000:18:00.0 (A100-SXM4-40GB, documented profiles)" in reason
    assert "profile 3g.40gb is not one of this GPU's" in reason


def test_counts_that_do_not_fit_are_refused_with_the_packers_reason():
    (reason,) = reasons(static("too-many"), [A100])
    assert reason.startswith("layout too-many[0] on GPU 0000:18:00.0")


def test_without_a_probe_the_entries_device_filter_models_are_checked():
    configs = {
        "x": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 8}, "device-filter": ["0x20B010DE"]}]
    }
    (reason,) = reasons({"mode": "static", "mig_configs": configs, "layout": "x"})
    assert "A100-SXM4-40GB" in reason and "at most 7" in reason


def test_nvmls_profiles_from_the_probe_decide_over_the_table():
    nvml = [
        {
            "id": 0,
            "name": "1g.6gb",
            "slices": 1,
            "instance_count": 2,
            "placements": [{"start": 0, "size": 1}, {"start": 1, "size": 1}],
        }
    ]
    gpu = {**A100, "mig": {"readable": True, "mig_capable": True, "profiles": nvml, "name": "NVIDIA A100-SXM4-40GB"}}
    (reason,) = reasons(static("all-1g"), [gpu])
    assert "nvml profiles" in reason and "1g.5gb is not one" in reason


def test_the_layout_must_name_one_of_the_configs_and_static_needs_one():
    assert reasons(static("nope"), [A100]) == [
        "layout: no config 'nope' in mig_configs (its configs: all-1g, h100-mixed, too-many)"
    ]
    assert reasons({"mode": "static", "mig_configs": CONFIGS}) == [
        "mode static needs layout (the name of one of the mig-configs)"
    ]


def test_malformed_entries_are_refused_naming_the_entry():
    bad = {
        "a": [{"devices": "all", "mig-enabled": False, "mig-devices": {"1g.5gb": 1}}],
        "b": [{"devices": [0], "mig-enabled": True, "mig-devices": {}}, {"devices": [0, 1], "mig-enabled": False}],
        "c": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": "seven"}}],
        "d": [{"devices": "all", "mig-enabled": True, "gpu-filter": []}],
    }
    # each config alone: the node reads every config of the mapping, and so does the check
    said = {name: reasons({"mode": "static", "mig_configs": {name: bad[name]}, "layout": name}) for name in bad}
    assert said["a"] == ["mig_configs.a[0].mig-devices: MIG devices included when mig-enabled is false"]
    assert said["b"] == ["mig_configs.b[1].devices: GPU 0 is in mig_configs.b[0] too"]
    assert "whole number" in said["c"][0]
    assert said["d"] == [
        "mig_configs.d[0].gpu-filter: unexpected field (devices, mig-enabled, mig-devices, device-filter)"
    ]


def test_a_mig_parted_file_works_as_it_is_and_both_ways_at_once_are_refused(tmp_path):
    path = tmp_path / "mig-parted.yaml"
    path.write_text(
        "version: v1\nmig-configs:\n  all-1g:\n    - devices: all\n      mig-enabled: true\n      mig-devices:\n        1g.5gb: 8\n"
    )
    (reason,) = reasons({"mode": "static", "mig_configs_file": str(path), "layout": "all-1g"}, [A100])
    assert "at most 7" in reason
    both = reasons({"mode": "static", "mig_configs": CONFIGS, "mig_configs_file": str(path), "layout": "all-1g"})
    assert both == ["mig_configs and mig_configs_file: give the layouts one way, not both"]
    assert "cannot be read" in reasons({"mode": "static", "mig_configs_file": str(tmp_path / "no"), "layout": "x"})[0]


def test_a_gpu_picked_by_address_must_be_there_and_have_mig():
    mig = {"mode": "dynamic", "gpus": {"pci_addresses": ["0000:3b:00.0", "0000:99:00.0"]}}
    assert reasons(mig, [A100, L40S]) == [
        "gpus.pci_addresses: GPU 0000:3b:00.0 (0x26b9) has no MIG",
        "gpus.pci_addresses: no NVIDIA GPU 0000:99:00.0 on the node",
    ]


def test_dynamic_takes_no_layout():
    (reason,) = reasons({"mode": "dynamic", "layout": "all-1g"})
    assert reason.startswith("layout and mig-configs are for mode static")


def test_dynamic_on_134_and_135_needs_the_gate_said_on():
    for minor in ("1.34", "1.35"):
        (reason,) = reasons({"mode": "dynamic"}, minor=minor)
        assert "DRAPartitionableDevices" in reason and minor in reason
        assert reasons({"mode": "dynamic", "partitionable_devices_gate": True}, minor=minor) == []
        assert reasons({"mode": "dynamic"}, minor=minor, gates={"DRAPartitionableDevices": True}) == []
    assert reasons({"mode": "dynamic"}, minor="1.36") == []
    (contradiction,) = reasons(
        {"mode": "dynamic", "partitionable_devices_gate": True}, minor="1.35", gates={"DRAPartitionableDevices": False}
    )
    assert "the site says one thing" in contradiction


def test_static_and_dynamic_on_one_gpu_through_the_drivers_flag_is_refused():
    found = checks.host_problems(
        "gpu-01",
        {"aligned_dra_mig": {"mode": "dynamic"}, "aligned_dra_driver_extra_args": ["--mig=static"]},
        "1.36",
        {},
    )
    assert [(v, r.split(":")[0]) for _h, v, _x, r in found] == [
        ("aligned_dra_driver_extra_args", "the driver would run --mig=static while aligned_dra_mig.mode is dynamic")
    ]
    assert checks.driver_mig_mode(["--mig", "dynamic", "--log-level=INFO"]) == "dynamic"
    assert checks.driver_mig_mode(None) is None


def test_mig_beside_mps_fractions_on_every_gpu_of_the_site_is_refused_per_host():
    settings = {
        "a": {"aligned_dra_mig": {"mode": "dynamic"}, "aligned_dra_topology": {"devices": [A100]}},
        "b": {"aligned_dra_mig": {"mode": "dynamic"}, "aligned_dra_topology": {"devices": [H100]}},
    }

    def setting(host, name, default):
        return settings[host].get(name, default)

    found = checks.fractional_problems("west", ["a", "b"], setting, shares=True)
    assert [h for h, *_rest in found] == ["a", "b"] and "fractional template" in found[0][3]
    assert checks.fractional_problems("west", ["a", "b"], setting, shares=False) == []
    settings["b"]["aligned_dra_topology"] = {"devices": [H100, L40S]}  # a GPU left for the shares
    assert checks.fractional_problems("west", ["a", "b"], setting, shares=True) == []
    settings["b"]["aligned_dra_topology"] = {"devices": [H100]}
    settings["a"]["aligned_dra_claims"] = {"templates": {"fractional_gpu": {"enabled": False}}}
    assert checks.fractional_problems("west", ["a", "b"], setting, shares=True) == []


def test_a_site_without_aligned_dra_mig_is_not_looked_at():
    def setting(host, name, default):
        if name == "aligned_dra_mig":
            return None
        raise AssertionError(f"{name} read on a site without MIG")

    assert checks.site_problems("west", ["a", "b"], setting, "1.34", {}, True) == []


def test_selectors_pick_by_address_id_model_glob_and_index():
    gpus = [A100, H100, {**L40S, "mig": {"readable": True, "name": "NVIDIA L40S"}}]

    def pick(selector):
        return [i for i, _d in checks.selected(gpus, selector)]

    assert pick({}) == [0, 1, 2]
    assert pick({"pci_addresses": ["0000:2a:00.0"]}) == [1]
    assert pick({"device_ids": ["0x20B0"]}) == [0]
    assert pick({"models": ["NVIDIA L40*"]}) == [2]
    assert pick({"indices": [0, 2], "device_ids": ["0x26b9"]}) == [2]
