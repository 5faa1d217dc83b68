# SPDX-License-Identifier: Apache-2.0
"""roles/mig/meta/argument_specs.yml: wrong aligned_dra_mig input refused by the validation before anything changes."""

from __future__ import annotations

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.validation import validate


def errors(settings: dict) -> list[str]:
    return [f"{p.variable}: {p.reason}" for p in validate.check_host_settings("gpu-01", settings, stages=("mig",))]


def test_a_full_static_setting_and_the_reboot_switch_pass():
    mig = {
        "mode": "static",
        "gpus": {
            "pci_addresses": ["0000:18:00.0"],
            "device_ids": ["0x20b0"],
            "models": ["NVIDIA A100*"],
            "indices": [0],
        },
        "mig_configs": {"all-1g": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 7}}]},
        "layout": "all-1g",
        "partitionable_devices_gate": False,
    }
    assert errors({"aligned_dra_mig": mig, "aligned_dra_mig_reboot": True}) == []


@pytest.mark.parametrize(
    ("mig", "said"),
    [
        ({"mode": "on"}, "value of mode must be one of"),
        ({"mode": "static", "layouts": "x"}, "layouts"),
        ({"gpus": {"index": [0]}}, "index"),
        ({"gpus": {"indices": ["first"]}}, "indices"),
        ({"mig_configs": ["all-1g"]}, "mig_configs"),
    ],
)
def test_wrong_input_is_refused_naming_the_option(mig, said):
    (error,) = errors({"aligned_dra_mig": mig})
    assert error.startswith("aligned_dra_mig: ") and said in error


def test_the_reboot_switch_is_a_bool_and_a_misspelt_name_gets_the_closest_one():
    assert "aligned_dra_mig_reboot" in errors({"aligned_dra_mig_reboot": "sometimes"})[0]
    assert "did you mean aligned_dra_mig_reboot?" in errors({"aligned_dra_mig_rebot": True})[0]


def test_a_site_list_of_gpu_clients_passes():
    clients = {
        "systemd_units": ["nvidia-dcgm.service", "nvidia-persistenced.service"],
        "daemonset_pods": [
            {"namespace": "gpu-operator", "labels": {"app": "nvidia-dcgm-exporter"}, "node_label": "nvidia.com/x"}
        ],
        "bundled_driver": False,
    }
    assert errors({"aligned_dra_mig_gpu_clients": clients, "aligned_dra_mig_gpu_clients_timeout": 60}) == []


def test_clients_by_node_selector_the_images_and_the_cdi_switch_pass():
    clients = {"daemonset_pods": [{"node_label": "nvidia.com/gpu.deploy.client", "match_node_selector": True}]}
    settings = {
        "aligned_dra_mig_gpu_clients": clients,
        "aligned_dra_mig_gpu_client_images": ["k8s-device-plugin", "gpu-agent"],
        "aligned_dra_mig_cdi_refresh": False,
    }
    assert errors(settings) == []
    assert errors({"aligned_dra_mig_gpu_client_images": []}) == []


@pytest.mark.parametrize(
    ("settings", "said"),
    [
        ({"aligned_dra_mig_cdi_refresh": "sometimes"}, "aligned_dra_mig_cdi_refresh"),
        ({"aligned_dra_mig_gpu_client_images": {"dcgm": True}}, "aligned_dra_mig_gpu_client_images"),
        ({"aligned_dra_mig_gpu_clients": {"daemonset_pods": [{"node_label": "x"}]}}, "labels, match_node_selector"),
        (
            {"aligned_dra_mig_gpu_clients": {"daemonset_pods": [{"node_label": "x", "match_node_selector": "z"}]}},
            "match_node_selector",
        ),
    ],
)
def test_wrong_clients_by_image_or_node_selector_and_cdi_switch_are_refused(settings, said):
    (error,) = errors(settings)
    assert error.startswith(f"{next(iter(settings))}: ") and said in error, error


@pytest.mark.parametrize(
    ("clients", "said"),
    [
        ({"bundled_driver": "sometimes"}, "bundled_driver"),
        ({"daemonset_pods": [{"labels": {"app": "x"}}]}, "node_label"),
        ({"daemonset_pods": [{"node_label": "x"}]}, "one of the following is required: labels, match_node_selector"),
        ({"daemonset_pods": [{"labels": {"app": "x"}, "node_label": "x", "selector": "a=b"}]}, "selector"),
        ({"stop_units": []}, "stop_units"),
    ],
)
def test_wrong_gpu_clients_are_refused_naming_the_option(clients, said):
    (error,) = errors({"aligned_dra_mig_gpu_clients": clients})
    assert error.startswith("aligned_dra_mig_gpu_clients: ") and said in error, error
