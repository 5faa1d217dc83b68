# SPDX-License-Identifier: Apache-2.0
"""node/mig/layout.py: mig-parted's configs read as mig-parted reads them (its own example configs), the GPU
selector, and an entry's counts checked against a GPU's profiles from NVML (the strict fake)."""

from __future__ import annotations

import pytest
import yaml

from ansible_collections.aligned.dra.plugins.module_utils.node.mig import apply, layout
from ansible_collections.aligned.dra.tests.support.fakes.nvml_lab import A100, H100, L40S, three_gpus

# As mig-parted's example and default configs write them (a whole file, version v1).
MIG_PARTED_FILE = """
version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false

  all-enabled:
    - devices: all
      mig-enabled: true
      mig-devices: {}

  all-1g.5gb:
    - devices: all
      mig-enabled: true
      mig-devices:
        "1g.5gb": 7

  all-balanced:
    # H100-80GB, H800-80GB, A100-80GB, A800-80GB
    - device-filter: ["0x233010DE", "0x233110DE", "0x232210DE", "0x20B210DE", "0x20B510DE", "0x20F310DE"]
      devices: all
      mig-enabled: true
      mig-devices:
        "1g.10gb": 2
        "2g.20gb": 1
        "3g.40gb": 1

    # A100-40GB, A800-40GB
    - device-filter: ["0x20B010DE", "0x20B110DE", "0x20F110DE", "0x20F610DE"]
      devices: all
      mig-enabled: true
      mig-devices:
        "1g.5gb": 2
        "2g.10gb": 1
        "3g.20gb": 1

    # A30-24GB
    - device-filter: "0x20B710DE"
      devices: all
      mig-enabled: true
      mig-devices:
        "1g.6gb": 2
        "2g.12gb": 1

  custom-config:
    - devices: [0]
      mig-enabled: false
    - devices: [1]
      mig-enabled: true
      mig-devices:
        "1g.10gb+me": 1
"""


@pytest.fixture
def nvml():
    return three_gpus()


def gpus_of(nvml):
    return apply.node_gpus(nvml)


def test_mig_parted_s_example_file_reads_as_it_is():
    configs = layout.parse_configs(yaml.safe_load(MIG_PARTED_FILE))
    assert sorted(configs) == ["all-1g.5gb", "all-balanced", "all-disabled", "all-enabled", "custom-config"]
    (disabled,) = configs["all-disabled"]
    assert (disabled["devices"], disabled["mig_enabled"], disabled["mig_devices"]) == ("all", False, {})
    (enabled,) = configs["all-enabled"]
    assert enabled["mig_enabled"] and enabled["mig_devices"] == {}
    assert configs["all-1g.5gb"][0]["mig_devices"] == {"1g.5gb": 7}
    h100, a100, a30 = configs["all-balanced"]
    assert h100["device_filter"][0] == (0x2330, 0x10DE, None) and len(h100["device_filter"]) == 6
    assert a100["device_filter"][0] == (0x20B0, 0x10DE, None)
    assert a30["device_filter"] == [(0x20B7, 0x10DE, None)]  # a single string, as mig-parted allows
    assert a30["where"] == "mig_configs.mig-configs.all-balanced[2]"
    assert configs["custom-config"][0]["devices"] == [0]


def test_the_mig_configs_mapping_alone_reads_too():
    configs = layout.parse_configs(yaml.safe_load(MIG_PARTED_FILE)["mig-configs"])
    assert configs["all-balanced"][1]["where"] == "mig_configs.all-balanced[1]"


def test_each_config_entry_goes_to_the_gpus_its_device_filter_names(nvml):
    entries = layout.parse_configs(yaml.safe_load(MIG_PARTED_FILE))["all-balanced"]
    chosen = layout.wanted(entries, layout.select(gpus_of(nvml), {}))
    assert chosen[A100]["mig_devices"] == {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}
    assert chosen[H100]["mig_devices"] == {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
    assert L40S not in chosen  # not MIG-capable: never selected


def test_devices_indexes_every_gpu_in_pci_order(nvml):
    entries = layout.parse_configs(yaml.safe_load(MIG_PARTED_FILE))["custom-config"]
    chosen = layout.wanted(entries, layout.select(gpus_of(nvml), {}))
    assert chosen[A100]["mig_enabled"] is False
    assert chosen[H100]["mig_devices"] == {"1g.10gb+me": 1}


def test_device_filter_with_a_subsystem_matches_only_that_subsystem(nvml):
    gpus = layout.select(gpus_of(nvml), {})
    entry = {"devices": "all", "mig-enabled": False}
    matching = layout.parse_configs({"x": [dict(entry, **{"device-filter": "0x20B010DE:0x146310DE"})]})["x"]
    other = layout.parse_configs({"x": [dict(entry, **{"device-filter": "0x20B010DE:0x000010DE"})]})["x"]
    assert layout.wanted(matching, gpus)[A100] is not None
    assert layout.wanted(other, gpus)[A100] is None


@pytest.mark.parametrize(
    ("configs", "message"),
    [
        ({}, "mig_configs: a mapping of config names"),
        ({"a": []}, "mig_configs.a: a list of at least one entry"),
        ({"a": [{"mig-enabled": False}]}, "mig_configs.a[0].devices: missing required field"),
        ({"a": [{"devices": "all"}]}, "mig_configs.a[0].mig-enabled: missing required field"),
        ({"a": [{"devices": "some", "mig-enabled": False}]}, "mig_configs.a[0].devices: 'all' or a list"),
        ({"a": [{"devices": [-1], "mig-enabled": False}]}, "mig_configs.a[0].devices: 'all' or a list"),
        ({"a": [{"devices": "all", "mig-enabled": "yes"}]}, "mig_configs.a[0].mig-enabled: true or false"),
        ({"a": [{"devices": "all", "mig-enabled": True}]}, "mig_configs.a[0].mig-devices: missing required field"),
        (
            {"a": [{"devices": "all", "mig-enabled": False, "mig-devices": {"1g.5gb": 1}}]},
            "mig_configs.a[0].mig-devices: MIG devices included when mig-enabled is false",
        ),
        (
            {"a": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 0}}]},
            "mig_configs.a[0].mig-devices: all counts are 0",
        ),
        (
            {"a": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": -1}}]},
            "mig_configs.a[0].mig-devices.1g.5gb: the count",
        ),
        (
            {"a": [{"devices": "all", "mig-enabled": True, "mig-devices": {"5gb": 1}}]},
            "mig_configs.a[0].mig-devices.5gb: not a MIG profile",
        ),
        ({"a": [{"devices": "all", "mig-enabled": False, "colour": 1}]}, "mig_configs.a[0].colour: unexpected field"),
        (
            {"a": [{"devices": "all", "mig-enabled": False, "device-filter": "A100"}]},
            "mig_configs.a[0].device-filter: 'A100' is not a PCI device ID",
        ),
        ({"version": "v2", "mig-configs": {}}, "mig_configs.version: unknown version 'v2'"),
    ],
)
def test_malformed_configs_are_refused_naming_the_field(configs, message):
    with pytest.raises(layout.LayoutError) as caught:
        layout.parse_configs(configs)
    assert str(caught.value).startswith(message)


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("1g.5gb", (1, 1, 5, (), False)),
        ("1c.3g.20gb", (1, 3, 20, (), False)),
        ("1g.10gb+me", (1, 1, 10, ("me",), False)),
        ("1g.24gb+me.all", (1, 1, 24, ("me.all",), False)),
        ("1g.24gb-me", (1, 1, 24, ("me",), True)),
    ],
)
def test_profile_names_parse_as_mig_parted_s(text, parsed):
    assert layout.parse_profile(text) == parsed


@pytest.mark.parametrize("text", ["", "1g", "1g.5", "g.5gb", " 1g.5gb", "1g.5gb+", "1g.5gb+me-gfx", "1g.5gb+1me"])
def test_what_is_no_profile_name(text):
    with pytest.raises(ValueError):
        layout.parse_profile(text)


@pytest.mark.parametrize(
    ("text", "packed"), [("0x20B010DE", 0x20B010DE), ("548409566", 0x20B010DE), ("04054010336", 0x20B010DE)]
)
def test_device_filters_read_with_go_s_base_prefixes(text, packed):
    assert layout.device_id(text, "f") == (packed >> 16, packed & 0xFFFF, None)


def test_the_selector_picks_by_every_key_given(nvml):
    gpus = gpus_of(nvml)
    assert [g["pci_address"] for g in layout.select(gpus, {})] == [A100, H100]
    assert [g["pci_address"] for g in layout.select(gpus, {"device_ids": ["0x2330"]})] == [H100]
    assert [g["pci_address"] for g in layout.select(gpus, {"models": ["NVIDIA A100*"]})] == [A100]
    assert [g["pci_address"] for g in layout.select(gpus, {"indices": [1]})] == [H100]
    assert [g["pci_address"] for g in layout.select(gpus, {"pci_addresses": ["18:00.0"]})] == [A100]
    assert layout.select(gpus, {"indices": [0], "models": ["NVIDIA A100*"]})[0]["pci_address"] == A100


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        ({"pci_addresses": ["0000:ff:00.0"]}, "gpus.pci_addresses[0]: no GPU 0000:ff:00.0 on this node"),
        ({"pci_addresses": [L40S]}, f"gpus.pci_addresses[0]: GPU {L40S} (NVIDIA L40S) is not MIG-capable"),
        ({"indices": [7]}, "gpus.indices[0]: no GPU 7 on this node"),
        ({"device_ids": ["20b0"]}, "gpus.device_ids[0]: '20b0' is not a PCI device ID"),
        ({"models": ["*B200*"]}, "gpus: selects no MIG-capable GPU of this node"),
        ({"colour": ["red"]}, "gpus.colour: unknown key"),
    ],
)
def test_a_selector_that_selects_wrongly_is_refused(nvml, selector, message):
    with pytest.raises(layout.LayoutError) as caught:
        layout.select(gpus_of(nvml), selector)
    assert str(caught.value).startswith(message)


def test_a_gpu_two_entries_match_is_refused(nvml):
    entries = layout.parse_configs(
        {"x": [{"devices": "all", "mig-enabled": False}, {"devices": [0], "mig-enabled": False}]}
    )["x"]
    with pytest.raises(
        layout.LayoutError, match=r"mig_configs.x\[1\]: GPU 0000:18:00.0 .* matched by mig_configs.x\[0\]"
    ):
        layout.wanted(entries, layout.select(gpus_of(nvml), {}))


def test_a_profile_the_gpu_lacks_is_refused_naming_the_gpu_and_the_profile(nvml):
    nvml.enable_mig(A100)
    (entry,) = layout.parse_configs(
        {"all-1g.10gb": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 4}}]}
    )["all-1g.10gb"]
    state = gpus_of(nvml)[0]["state"]
    with pytest.raises(layout.LayoutError) as caught:
        layout.profile_counts(entry, state)
    assert str(caught.value) == (
        f"mig_configs.all-1g.10gb[0].mig-devices.1g.10gb: GPU {A100} (NVIDIA A100-SXM4-40GB) has no MIG profile "
        "1g.10gb (its profiles: 1g.5gb, 2g.10gb, 3g.20gb, 4g.20gb, 7g.40gb)"
    )


def test_profiles_map_to_nvml_s_names_and_counts_that_do_not_fit_are_refused(nvml):
    nvml.enable_mig(H100)
    state = gpus_of(nvml)[1]["state"]
    (entry,) = layout.parse_configs(
        {"m": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb+me": 1, "1c.1g.10gb": 2}}]}
    )["m"]
    assert layout.profile_counts(entry, state) == {"1g.10gb+me": 1, "1g.10gb": 2}
    (big,) = layout.parse_configs(
        {"m": [{"devices": "all", "mig-enabled": True, "mig-devices": {"4g.40gb": 1, "3g.40gb": 2}}]}
    )["m"]
    counts = layout.profile_counts(big, state)
    with pytest.raises(layout.LayoutError) as caught:
        layout.check_fits(big, state, counts)
    assert str(caught.value).startswith(
        f"mig_configs.m[0].mig-devices: the counts do not fit GPU {H100} (NVIDIA H100 80GB HBM3): "
    )
    assert "need 12 memory slices, 8 of 8 are free" in str(caught.value)


def test_compute_instance_profiles_are_refused(nvml):
    nvml.enable_mig(A100)
    (entry,) = layout.parse_configs({"m": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1c.3g.20gb": 1}}]})[
        "m"
    ]
    with pytest.raises(layout.LayoutError, match="compute-instance profiles"):
        layout.profile_counts(entry, gpus_of(nvml)[0]["state"])


def test_a_layout_name_that_is_not_there_is_refused():
    configs = layout.parse_configs({"a": [{"devices": "all", "mig-enabled": False}]})
    with pytest.raises(layout.LayoutError, match=r"^layout: no config 'b' in mig_configs \(its configs: a\)$"):
        layout.choose(configs, "b")
    with pytest.raises(layout.LayoutError, match=r"^layout: the name of the config to apply is required"):
        layout.choose(configs, None)
