# SPDX-License-Identifier: Apache-2.0
"""controller/domains/level_specs.py and presets.py: the source and preset forms of the levels, checked."""

from __future__ import annotations

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.domains import levels, presets
from ansible_collections.aligned.dra.plugins.module_utils.controller.domains.level_specs import (
    check_level_specs,
    levels_of,
)
from ansible_collections.aligned.dra.plugins.module_utils.controller.domains.levels import (
    check_levels,
)
from ansible_collections.aligned.dra.plugins.module_utils.controller.domains.shared import PlacementError

GKE = [
    {"name": "block", "label": "cloud.google.com/gce-topology-block"},
    {"name": "subblock", "label": "cloud.google.com/gce-topology-subblock"},
    {"name": "host", "label": "cloud.google.com/gce-topology-host"},
]


def names(raw) -> list[str]:
    return [spec["name"] for spec in check_level_specs(raw)]


# -- presets ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("preset", "keys"),
    [
        (
            "gke",
            [
                "cloud.google.com/gce-topology-block",
                "cloud.google.com/gce-topology-subblock",
                "cloud.google.com/gce-topology-host",
            ],
        ),
        (
            "eks",
            [
                "topology.k8s.aws/network-node-layer-1",
                "topology.k8s.aws/network-node-layer-2",
                "topology.k8s.aws/network-node-layer-3",
            ],
        ),
        (
            "oke",
            [
                "oci.oraclecloud.com/rdma.hpc_island_id",
                "oci.oraclecloud.com/rdma.network_block_id",
                "oci.oraclecloud.com/rdma.local_block_id",
            ],
        ),
        (
            "nebius",
            ["topology.nebius.com/gpu-cluster-id", "topology.nebius.com/tier-2", "topology.nebius.com/tier-1"],
        ),
        (
            "coreweave",
            [
                "backend.coreweave.cloud/fabric",
                "ib.coreweave.cloud/superpod",
                "backend.coreweave.cloud/leafgroup",
                "node.coreweave.cloud/rack",
            ],
        ),
        ("topograph", ["fabric.topograph.run/tier-2", "fabric.topograph.run/tier-1", "fabric.topograph.run/tier-0"]),
    ],
)
def test_node_label_presets_read_the_providers_keys_coarse_to_fine_and_write_nothing(preset, keys):
    specs = check_level_specs({"preset": preset})
    assert [spec["key"] for spec in specs] == keys
    assert [spec["label"] for spec in specs] == keys  # the schedulers read the provider's own labels
    assert all(spec["source"] == "node_label" and not spec["written"] for spec in specs)
    assert check_levels({"preset": preset}) == levels_of(specs)


@pytest.mark.parametrize(
    ("preset", "attributes"),
    [
        ("azure-dranet", ["azure.dra.net/interconnectGroupId", "azure.dra.net/interconnectSubgroupId"]),
        (
            "oke-dranet",
            ["oke.dra.net/hpcIslandId", "oke.dra.net/networkBlockId", "oke.dra.net/localBlockId", "oke.dra.net/rackId"],
        ),
    ],
)
def test_dranet_presets_read_device_attributes_and_write_labels_of_their_own(preset, attributes):
    specs = check_level_specs({"preset": preset})
    assert [(spec["driver"], spec["attribute"]) for spec in specs] == [("dra.net", a) for a in attributes]
    assert [spec["label"] for spec in specs] == [f"aligned.dev/{spec['name']}" for spec in specs]
    assert all(spec["written"] for spec in specs)


def test_nvlink_adds_the_clique_level_where_the_preset_puts_it():
    assert names({"preset": "gke", "nvlink": True}) == ["block", "subblock", "nvlink", "host"]
    assert names({"preset": "eks", "nvlink": True}) == ["layer-1", "layer-2", "layer-3", "nvlink"]
    nvlink = check_level_specs({"preset": "eks", "nvlink": True})[-1]
    assert nvlink == {
        "name": "nvlink",
        "label": "nvidia.com/gpu.clique",
        "source": "node_label",
        "key": "nvidia.com/gpu.clique",
        "written": False,
        "compose": False,
        "nvlink": True,
    }
    assert names({"preset": "eks", "nvlink": False}) == ["layer-1", "layer-2", "layer-3"]


def test_nvlink_may_name_the_providers_own_domain_and_where_it_goes():
    specs = check_level_specs({"preset": "coreweave", "nvlink": presets.NVLINK_ALTERNATIVES["coreweave"]})
    # an NVL72 rack is one NVLink domain: the domain sits right above the rack
    assert [spec["name"] for spec in specs] == ["fabric", "superpod", "leafgroup", "nvlink", "rack"]
    assert specs[3]["key"] == "ds.coreweave.com/nvlink.domain" and specs[3]["nvlink"]
    oke = check_level_specs({"preset": "oke-dranet", "nvlink": presets.NVLINK_ALTERNATIVES["oke-dranet"]})
    assert oke[-1]["attribute"] == "oke.dra.net/gpuMemoryFabricId" and "key" not in oke[-1]
    assert oke[-1]["label"] == "aligned.dev/nvlink" and oke[-1]["written"]
    assert names({"preset": "eks", "nvlink": {"after": "layer-2", "name": "nvl"}}) == [
        "layer-1",
        "layer-2",
        "nvl",
        "layer-3",
    ]


def test_levels_override_add_and_drop():
    specs = check_level_specs(
        {
            "preset": "eks",
            "levels": [
                {"name": "layer-3", "compose": True},
                {"name": "layer-4", "source": "node_label", "key": "topology.k8s.aws/network-node-layer-4"},
            ],
        }
    )
    assert [spec["name"] for spec in specs] == ["layer-1", "layer-2", "layer-3", "layer-4"]
    # composed: the collection writes the parent.child value under a label of its own
    assert specs[2]["compose"] and specs[2]["written"] and specs[2]["label"] == "aligned.dev/layer-3"
    assert names({"preset": "gke", "drop": ["host"]}) == ["block", "subblock"]
    # a level moved to another source loses the preset's key
    moved = check_level_specs({"preset": "gke", "levels": [{"name": "host", "source": "inventory", "label": "a/h"}]})
    assert moved[2] == {
        "name": "host",
        "label": "a/h",
        "source": "inventory",
        "written": True,
        "compose": False,
        "nvlink": False,
    }
    added = {"name": "row", "source": "inventory", "label": "aligned.dev/row", "after": "block"}
    assert names({"preset": "gke", "levels": [added]}) == ["block", "row", "subblock", "host"]
    assert "after" in added  # the inventory's value is not changed


def test_list_form_entries_with_a_source():
    specs = check_level_specs(
        [
            {"name": "zone", "label": "aligned.dev/zone"},  # inventory, as today
            {"name": "block", "source": "device_attribute", "driver": "dra.net", "attribute": "gce.dra.net/block"},
            {"name": "rack", "source": "node_label", "key": "example.com/rack", "label": "example.com/rack"},
            {"name": "nvlink", "source": "node_label", "key": "nvidia.com/gpu.clique"},
        ]
    )
    assert [(s["source"], s["label"], s["written"], s["nvlink"]) for s in specs] == [
        ("inventory", "aligned.dev/zone", True, False),
        ("device_attribute", "aligned.dev/block", True, False),
        ("node_label", "example.com/rack", False, False),
        ("node_label", "nvidia.com/gpu.clique", False, True),
    ]


def test_the_inventory_form_is_checked_as_before():
    inventory = [{"name": "block", "label": "aligned.dev/block"}, {"name": "rack", "label": "aligned.dev/rack"}]
    assert not levels.is_sourced(inventory) and not levels.is_sourced({"name": "rack"})
    assert check_levels(inventory) == inventory
    with pytest.raises(
        PlacementError, match=r"\[0\]: unknown key 'lable'; did you mean label\? \(known: name, label\)"
    ):
        check_levels([{"name": "rack", "lable": "a/b"}])
    with pytest.raises(PlacementError, match=r"^aligned_dra_placement_levels: must be a list .*\(got dict\)"):
        check_levels({"name": "rack"})


def test_the_checked_levels_are_what_kueue_and_the_jobs_read():
    assert check_levels({"preset": "gke"}) == GKE
    assert levels.topology_levels(check_levels({"preset": "gke", "nvlink": True}))[2:] == [
        {"nodeLabel": "nvidia.com/gpu.clique"},
        {"nodeLabel": "cloud.google.com/gce-topology-host"},
        {"nodeLabel": "kubernetes.io/hostname"},
    ]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"preset": "gek"}, r"^aligned_dra_placement_levels\.preset: 'gek' is not a preset; did you mean gke\?"),
        ({"preset": "gke", "nvlnk": True}, r"unknown key 'nvlnk'; did you mean nvlink\?"),
        ({"preset": "gke", "drop": ["hst"]}, r"\.drop\[0\]: preset gke has no level 'hst'; did you mean host\?"),
        ({"preset": "gke", "drop": "host"}, r"\.drop: must be a list"),
        ({"preset": "gke", "levels": {"name": "x"}}, r"\.levels: must be a list"),
        ({"preset": "gke", "levels": ["x"]}, r"\.levels\[0\]: must be a mapping"),
        ({"preset": "gke", "levels": [{"name": "host", "after": "block"}]}, r"host is a level of preset gke"),
        ({"preset": "gke", "levels": [{"name": "x", "label": "a/x", "after": "rak"}]}, r"\.after: no level 'rak'"),
        ({"preset": "gke", "nvlink": "yes"}, r"\.nvlink: must be true or a level entry"),
        ([{"name": "x", "source": "labels", "key": "a/x"}], r"\[0\]\.source: 'labels' is not a source"),
        ([{"name": "x", "source": "node_label", "key": "bad key"}], r"\[0\]\.key: 'bad key' is not a label key"),
        ([{"name": "x", "source": "node_label"}], r"\[0\]\.key: None is not a label key"),
        ([{"name": "x", "source": "node_label", "key": "a/x", "driver": "d"}], r"\.driver: not a key of source"),
        ([{"name": "x", "source": "inventory", "key": "a/x"}], r"\[0\]\.key: not a key of source inventory"),
        (
            [{"name": "x", "source": "device_attribute", "driver": "Bad_Driver", "attribute": "a"}],
            r"\.driver: 'Bad_Driver' is not a driver name",
        ),
        (
            [{"name": "x", "source": "device_attribute", "driver": "dra.net", "attribute": "a-b"}],
            r"\.attribute: 'a-b' is not a device attribute name",
        ),
        (
            [{"name": "x", "source": "device_attribute", "driver": "dra.net", "attribute": "x" * 33}],
            r"is not a device attribute name",
        ),
        (
            [{"name": "x", "source": "node_label", "key": "a/x", "label": "a/y"}],
            r"\.label: 'a/y': a level read from node label a/x is used as it is",
        ),
        (
            [
                {
                    "name": "x",
                    "source": "device_attribute",
                    "driver": "dra.net",
                    "attribute": "a",
                    "label": "nvidia.com/gpu.clique",
                }
            ],
            r"is a provider's label; the collection never writes it",
        ),
        (
            [{"name": "x", "source": "node_label", "key": "a/x", "compose": True}],
            r"\[0\]\.compose: the widest level has no level above",
        ),
        ([{"name": "a", "label": "a/a"}, {"name": "x", "label": "a/x", "compose": "yes"}], r"\.compose: must be true"),
        ([{"name": "x", "source": "node_label", "key": "a/x", "kee": 1}], r"unknown key 'kee'; did you mean key\?"),
        ([{"name": "x", "label": "a/x", "compose": False, "after": "y"}], r"\[0\]\.after: only for a level added"),
        ([{"name": "Host", "source": "node_label", "key": "a/x"}], r"\[0\]\.name: 'Host' is not a DNS label"),
        (
            [{"name": "h", "source": "node_label", "key": "kubernetes.io/hostname"}],
            r"\.label: kubernetes.io/hostname is the implied last level",
        ),
        (
            [{"name": "a", "source": "node_label", "key": "a/x"}, {"name": "b", "source": "node_label", "key": "a/x"}],
            r"\[1\]\.label: 'a/x' is also the label of level 0",
        ),
    ],
)
def test_bad_levels_name_the_field(raw, message):
    with pytest.raises(PlacementError, match=message):
        check_levels(raw)


def test_neither_a_list_nor_a_mapping():
    with pytest.raises(PlacementError, match=r"must be a list of levels or a mapping with a preset \(got str\)"):
        check_level_specs("gke")


def test_at_most_fifteen_levels_with_a_preset():
    extra = [{"name": f"l{i}", "source": "inventory", "label": f"aligned.dev/l{i}"} for i in range(11)]
    assert len(check_levels({"preset": "coreweave", "levels": extra[:10], "nvlink": True})) == 15
    with pytest.raises(PlacementError, match="16 levels; at most 15"):
        check_levels({"preset": "coreweave", "levels": extra, "nvlink": True})
    sixteen = [{"name": f"l{i}", "source": "node_label", "key": f"example.com/l{i}"} for i in range(16)]
    with pytest.raises(PlacementError, match="16 levels; at most 15"):
        check_levels(sixteen)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            [
                {"name": "layer-3", "source": "node_label", "key": "topology.k8s.aws/network-node-layer-3"},
                {"name": "layer-1", "source": "node_label", "key": "topology.k8s.aws/network-node-layer-1"},
            ],
            r"\[1\]: level layer-1 \(topology.k8s.aws/network-node-layer-1\) is coarser than level layer-3 .*"
            r"levels go coarse → fine \(layer-1 → layer-2 → layer-3 → layer-4\)",
        ),
        (
            [
                {"name": "t0", "source": "node_label", "key": "fabric.topograph.run/tier-0"},
                {"name": "t2", "source": "node_label", "key": "fabric.topograph.run/tier-2"},
            ],
            r"level t2 .* is coarser than level t0",
        ),
        (
            [
                {"name": "rack", "source": "device_attribute", "driver": "dra.net", "attribute": "oke.dra.net/rackId"},
                {
                    "name": "isl",
                    "source": "device_attribute",
                    "driver": "dra.net",
                    "attribute": "oke.dra.net/hpcIslandId",
                },
            ],
            r"coarse → fine \(hpcIslandId → networkBlockId → localBlockId → rackId\)",
        ),
        (
            [
                {"name": "host", "source": "device_attribute", "driver": "dra.net", "attribute": "gce.dra.net/host"},
                {"name": "block", "source": "device_attribute", "driver": "gce.dra.net", "attribute": "block"},
            ],
            r"level block \(gce.dra.net/block\) is coarser than level host",
        ),
        (
            [
                {"name": "t1", "source": "node_label", "key": "topology.nebius.com/tier-1"},
                {"name": "c", "source": "node_label", "key": "topology.nebius.com/gpu-cluster-id"},
            ],
            r"level c .* is coarser than level t1",
        ),
        (
            {
                "preset": "gke",
                "levels": [
                    {
                        "name": "up",
                        "source": "node_label",
                        "key": "cloud.google.com/gce-topology-block",
                        "after": "host",
                    }
                ],
                "drop": ["block"],
            },
            r"level up .* is coarser than level host",
        ),
    ],
)
def test_levels_listed_fine_before_coarse_are_refused_where_the_keys_say_so(raw, message):
    with pytest.raises(PlacementError, match=message):
        check_levels(raw)


def test_known_ranks_and_provider_keys():
    assert presets.known_rank("topology.k8s.aws/network-node-layer-4")[:2] == ("eks", 4)
    assert presets.known_rank("example.com/rack") is None and presets.known_rank(None) is None
    assert presets.known_rank("node.coreweave.cloud/rack")[:2] == ("coreweave", 3)
    assert {"nvidia.com/gpu.clique", "ds.coreweave.com/nvlink.domain"} <= presets.provider_keys()
    assert presets.qualified("dra.net", "block") == "dra.net/block" and presets.qualified(None, "a") is None
    with pytest.raises(KeyError):
        presets.preset_levels("aks")
