# SPDX-License-Identifier: Apache-2.0
"""controller/domains/sources.py: every node's domains read from its labels and its DRANET devices.

Fixtures (tests/fixtures/placement_sources/): eight Nodes per provider with the provider's real label
keys, and DRANET-style ResourceSlices (driver ``dra.net``, eight NICs per node, the cloud's topology
under ``attributes.<name>.string``) for GCE, OKE and Azure; values vary per node: the finest level
has one domain per node, each coarser level half as many. Every preset reads them with no problem;
each refusal is checked on a copy with one thing wrong.
"""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from ansible_collections.aligned.dra.plugins.module_utils.controller.domains import levels, sources
from ansible_collections.aligned.dra.plugins.module_utils.controller.domains.level_specs import check_level_specs
from ansible_collections.aligned.dra.plugins.module_utils.controller.domains.shared import PlacementError
from ansible_collections.aligned.dra.tests.support.sites.domain_sources import (
    FILES,
    GCE_DRANET,
    levels_of,
    objects,
    setting,
)

# the first node's values, as the fixtures hold them
FIRST = {
    "gke": ("gke-a4x-pool-0", "28ad5e41bc47fe05f7813641d90c3362"),
    "eks": ("ip-10-0-1-0", "nn-25b40b06dfedabd98"),
    "coreweave": ("g7b2c1-0", "us-east-04a-ib-1"),
    "topograph": ("dgx-0", "core-0"),
}


def place(raw, nodes, slices=None, hosts=None, per_host=None):
    hosts = hosts if hosts is not None else [node["metadata"]["name"] for node in nodes]
    return levels.site_placement(raw, {h: (per_host or {}).get(h) for h in hosts}, {}, nodes=nodes, slices=slices)


def published(spec: dict, node: dict, slices: list) -> str:
    """A node's value for a level, read straight from the objects (the test's own reading)."""
    if spec["source"] == "node_label":
        return node["metadata"]["labels"][spec["key"]]
    devices = [d for s in slices if s["spec"]["nodeName"] == node["metadata"]["name"] for d in s["spec"]["devices"]]
    return devices[0]["attributes"][spec["attribute"]]["string"]


@pytest.mark.parametrize("preset", sorted(FILES))
def test_every_preset_reads_each_nodes_domains_from_the_fixtures(preset):
    nodes, slices = objects(preset)
    placement, problems = place(levels_of(preset), nodes, slices)
    assert problems == []
    specs = check_level_specs(levels_of(preset))
    assert placement["levels"] == [{"name": s["name"], "label": s["label"]} for s in specs]
    assert placement["sources"] == specs
    for node in nodes:
        row = placement["domains"][node["metadata"]["name"]]
        assert row == {spec["name"]: published(spec, node, slices) for spec in specs}
    # values vary per node: the finest level one domain per node, each coarser level half as many
    counts = [len({row[spec["name"]] for row in placement["domains"].values()}) for spec in specs]
    assert counts == [8 >> (len(specs) - 1 - depth) for depth in range(len(specs))]
    tree = levels.domain_tree(placement)
    assert [len(tree["domains"][spec["name"]]) for spec in specs] == counts
    if preset in FIRST:
        host, value = FIRST[preset]
        assert placement["domains"][host][specs[0]["name"]] == value


@pytest.mark.parametrize("preset", sorted(FILES))
def test_cluster_labels_are_used_as_they_are_and_attributes_become_labels_of_ours(preset):
    nodes, slices = objects(preset)
    placement, _problems = place(levels_of(preset), nodes, slices)
    first = levels.node_label_objects(placement, "west")[0]
    labels = first["metadata"]["labels"]
    if preset.endswith("dranet"):
        specs = check_level_specs(levels_of(preset))
        assert sorted(labels) == sorted([f"aligned.dev/{s['name']}" for s in specs] + ["aligned.dev/site"])
    else:
        assert labels == {"aligned.dev/site": "west"}  # nothing of the provider's is written


def test_the_gke_clique_is_the_nvlink_level_and_a_node_without_it_is_not_ready():
    nodes, _slices = objects("gke")
    placement, problems = place({"preset": "gke", "nvlink": True}, nodes)
    assert problems == []
    assert len({row["nvlink"] for row in placement["domains"].values()}) == 4
    del nodes[5]["metadata"]["labels"]["nvidia.com/gpu.clique"]
    _placement, problems = place({"preset": "gke", "nvlink": True}, nodes)
    assert problems == [
        "host gke-a4x-pool-5: level nvlink (node label nvidia.com/gpu.clique) = (not set): the NVLink fabric is "
        "not ready on this node (nvidia.com/gpu.clique is set once it is)"
    ]


def test_coreweaves_own_nvlink_domain_as_docs_jobs_md_sets_it_holds_the_racks():
    nodes, _slices = objects("coreweave")
    raw = {"preset": "coreweave", "nvlink": {"key": "ds.coreweave.com/nvlink.domain"}}
    placement, problems = place(raw, nodes)
    assert problems == []
    assert [level["name"] for level in placement["levels"]] == ["fabric", "superpod", "leafgroup", "nvlink", "rack"]
    assert all(row["nvlink"] for row in placement["domains"].values())


def test_an_oke_node_without_its_gpu_memory_fabric_is_not_ready():
    nodes, slices = objects("oke-dranet")
    raw = {"preset": "oke-dranet", "nvlink": {"source": "device_attribute", "driver": "dra.net",
                                              "attribute": "oke.dra.net/gpuMemoryFabricId", "after": "local-block"}}  # fmt: skip
    assert place(raw, nodes, slices)[1] == []
    for device in slices[2]["spec"]["devices"]:
        del device["attributes"]["oke.dra.net/gpuMemoryFabricId"]
    problems = place(raw, nodes, slices)[1]
    assert problems == [
        "host oke-bm-gpu-gb200-2: level nvlink (device attribute oke.dra.net/gpuMemoryFabricId of driver dra.net) "
        "= (not set): the NVLink fabric is not ready on this node (nvidia.com/gpu.clique is set once it is)"
    ]


def test_a_node_in_scope_without_a_value_is_refused_and_nodes_out_of_scope_are_not_read():
    nodes, _slices = objects("gke")
    del nodes[3]["metadata"]["labels"]["cloud.google.com/gce-topology-subblock"]
    _placement, problems = place({"preset": "gke"}, nodes)
    assert problems == [
        "host gke-a4x-pool-3: level subblock (node label cloud.google.com/gce-topology-subblock) = (not set): "
        "every node in scope needs a value at every level (levels: block, subblock, host)"
    ]
    hosts = [f"gke-a4x-pool-{i}" for i in (0, 1, 2)]
    placement, problems = place({"preset": "gke"}, nodes, hosts=hosts)
    assert problems == [] and sorted(placement["domains"]) == hosts


def test_a_child_in_two_parents_is_refused_unless_the_level_composes():
    nodes, _slices = objects("eks")
    key = "topology.k8s.aws/network-node-layer-2"
    nodes[4]["metadata"]["labels"][key] = shared = nodes[0]["metadata"]["labels"][key]
    nodes[4]["metadata"]["labels"]["topology.k8s.aws/network-node-layer-3"] = "nn-moved"
    _placement, problems = place({"preset": "eks"}, nodes)
    parent = {i: nodes[i]["metadata"]["labels"]["topology.k8s.aws/network-node-layer-1"] for i in (0, 4)}
    assert problems == [
        f"3 hosts (ip-10-0-1-0, ip-10-0-1-1, ip-10-0-1-4): level layer-2 (node label {key}) = {shared}: layer-2 "
        f"{shared} is in layer-1 {parent[0]} (2 hosts (ip-10-0-1-0, ip-10-0-1-1)) and layer-1 {parent[4]} "
        "(host ip-10-0-1-4); a domain sits inside one domain of the level above (where layer-2 values are unique "
        "only inside their layer-1, set compose: true on level layer-2)"
    ]
    composed = {"preset": "eks", "levels": [{"name": "layer-2", "compose": True}]}
    placement, problems = place(composed, nodes)
    assert problems == []
    assert placement["domains"]["ip-10-0-1-4"]["layer-2"] == f"{parent[4]}.{shared}"
    assert placement["domains"]["ip-10-0-1-0"]["layer-2"] == f"{parent[0]}.{shared}"
    # a composed level is written under a label of ours, since the cluster's label does not hold it
    labels = levels.node_label_objects(placement)[4]["metadata"]["labels"]
    assert labels == {"aligned.dev/layer-2": f"{parent[4]}.{shared}"}


def test_values_that_are_not_label_values():
    nodes, slices = objects("azure-dranet")
    for device in slices[1]["spec"]["devices"]:
        device["attributes"]["azure.dra.net/interconnectSubgroupId"] = {"string": "s" * 64}  # DRA takes 64
    problems = place({"preset": "azure-dranet"}, nodes, slices)[1]
    assert problems == [
        "host aks-ndgb200-vmss00000-1: level interconnect-subgroup (device attribute "
        'azure.dra.net/interconnectSubgroupId of driver dra.net) = "' + "s" * 64 + '": 64 characters: a node '
        "label value holds at most 63 (a device attribute may hold 64)"
    ]
    gke, _none = objects("gke")
    gke[2]["metadata"]["labels"]["cloud.google.com/gce-topology-host"] = "not a value!"
    problems = place({"preset": "gke"}, gke)[1]
    assert len(problems) == 1 and problems[0].startswith(
        'host gke-a4x-pool-2: level host (node label cloud.google.com/gce-topology-host) = "not a value!": '
        "'not a value!' is not a valid label value"
    )


def test_a_composed_value_over_63_characters_is_refused():
    nodes, slices = objects("oke-dranet")
    raw = {"preset": "oke-dranet", "levels": [{"name": "network-block", "compose": True}]}
    placement, problems = place(raw, nodes, slices)
    # said once per composed value (the hosts of each hpc island)
    assert len(problems) == 2 and problems[0].startswith("4 hosts (oke-bm-gpu-gb200-0, oke-bm-gpu-gb200-1, ")
    assert "level network-block (device attribute oke.dra.net/networkBlockId of driver dra.net)" in problems[0]
    assert problems[0].endswith(": 97 characters: a node label value holds at most 63 (a device attribute may "
                                "hold 64) (composed parent.child)")  # fmt: skip
    assert all(row["network-block"] is None for row in placement["domains"].values())


def test_devices_of_one_node_that_disagree():
    nodes, slices = objects("oke-dranet")
    devices = slices[2]["spec"]["devices"]
    devices[5]["attributes"]["oke.dra.net/rackId"] = {"string": "rack-b"}
    devices[6]["attributes"]["oke.dra.net/rackId"] = {"string": "rack-b"}
    mine = devices[0]["attributes"]["oke.dra.net/rackId"]["string"]
    problems = place({"preset": "oke-dranet"}, nodes, slices)[1]
    others = ", ".join(d["name"] for i, d in enumerate(devices) if i not in (5, 6))
    assert problems == [
        "host oke-bm-gpu-gb200-2: level rack (device attribute oke.dra.net/rackId of driver dra.net) = "
        f'["{mine}", "rack-b"]: the devices of driver dra.net on the node disagree ({others} {mine!r}; '
        f"{devices[5]['name']}, {devices[6]['name']} 'rack-b'); a node is in one domain"
    ]


def test_devices_without_the_attribute_are_passed_over_and_other_drivers_ignored():
    nodes, slices = objects("gce-dranet")
    extra = copy.deepcopy(slices[0])
    extra["metadata"]["name"] = "gpu-slice"
    extra["spec"].update(driver="gpu.nvidia.com", pool={"name": "p", "generation": 1, "resourceSliceCount": 1})
    extra["spec"]["devices"][0]["attributes"]["gce.dra.net/block"] = {"string": "other"}
    slices[0]["spec"]["devices"].append({"name": "eth0", "attributes": {"dra.net/ifName": {"string": "eth0"}}})
    before = place(GCE_DRANET, *objects("gce-dranet"))[0]
    assert place(GCE_DRANET, nodes, [*slices, extra]) == (before, [])


def test_only_the_newest_generation_of_a_pool_counts_and_short_attribute_names_are_the_drivers():
    nodes, slices = objects("gce-dranet")
    stale = copy.deepcopy(slices[0])
    stale["metadata"]["name"] = "stale"
    stale["spec"]["pool"]["generation"] = 0
    for device in stale["spec"]["devices"]:
        device["attributes"]["gce.dra.net/host"] = {"string": "old-host"}
    before = place(GCE_DRANET, nodes, slices)[0]
    assert place(GCE_DRANET, nodes, [stale, *slices]) == (before, [])
    short = [dict(spec, driver="gce.dra.net", attribute=spec["attribute"].split("/")[1]) for spec in GCE_DRANET]
    for item in slices:
        item["spec"]["driver"] = "gce.dra.net"
        for device in item["spec"]["devices"]:
            device["attributes"] = {k.split("/")[1]: v for k, v in device["attributes"].items()}
    placement, problems = place(short, nodes, slices)
    assert problems == [] and placement["domains"] == before["domains"]


def test_levels_whose_domains_nest_the_other_way_round():
    nodes, _slices = objects("gke")
    raw = [
        {"name": "rack", "source": "node_label", "key": "cloud.google.com/gce-topology-subblock"},
        {"name": "zone", "source": "node_label", "key": "example.com/zone"},
    ]
    for node in nodes:
        labels = node["metadata"]["labels"]
        labels["example.com/zone"] = "z-" + labels["cloud.google.com/gce-topology-block"][:8]
    problems = place(raw, nodes)[1]
    assert problems == [
        "8 hosts (gke-a4x-pool-0, gke-a4x-pool-1, gke-a4x-pool-2 and 5 more): aligned_dra_placement_levels = "
        "rack (node label cloud.google.com/gce-topology-subblock) before zone (node label example.com/zone): the "
        "levels are not coarse → fine: each of the 4 rack domains sits inside one of the 2 zone domains; list zone "
        "before rack"
    ]


def test_objects_not_read_missing_nodes_devices_and_wrong_attribute_kinds():
    nodes, slices = objects("oke-dranet")
    raw = {"preset": "gke"}
    problems = levels.site_placement(raw, {"n1": None}, {})[1]
    assert problems == [
        f"host n1: level {level} (node label cloud.google.com/gce-topology-{level}) = (not read): the cluster's "
        "Nodes were not read (aligned_dra_placement_cluster)"
        for level in ("block", "host", "subblock")
    ]
    assert levels.site_placement({"preset": "oke-dranet"}, {"n1": None}, {})[1][0].endswith(
        "= (not read): the cluster's ResourceSlices were not read (aligned_dra_placement_cluster)"
    )
    gke, _none = objects("gke")
    problems = levels.site_placement(raw, {"h1": None}, {"h1": "gone"}, nodes=gke)[1]
    assert problems[0] == (
        "host h1: level block (node label cloud.google.com/gce-topology-block of node gone) = (no such Node): "
        "the cluster has no Node gone (aligned_dra_driver_node_name names it)"
    )
    lonely = [s for s in slices if s["spec"]["nodeName"] != "oke-bm-gpu-gb200-1"]
    problems = place({"preset": "oke-dranet"}, nodes, lonely)[1]
    assert problems[0] == (
        "host oke-bm-gpu-gb200-1: level hpc-island (device attribute oke.dra.net/hpcIslandId of driver dra.net) = "
        "(no devices): the node publishes no device of driver dra.net in a ResourceSlice"
    )
    slices[0]["spec"]["devices"][0]["attributes"]["oke.dra.net/rackId"] = {"bool": True}
    problems = place({"preset": "oke-dranet"}, nodes, slices)[1]
    assert problems == [
        'host oke-bm-gpu-gb200-0: level rack (device attribute oke.dra.net/rackId of driver dra.net) = {"bool": '
        'true}: device pci-0000-18-00-0: {"bool": true} is not a string, int or version attribute'
    ]
    slices[0]["spec"]["devices"][0]["attributes"]["oke.dra.net/rackId"] = {"int": 7}
    slices[0]["spec"]["devices"][1]["attributes"]["oke.dra.net/rackId"] = {"int": 7}
    for device in slices[0]["spec"]["devices"][2:]:
        device["attributes"]["oke.dra.net/rackId"] = {"version": "7"}
    assert place({"preset": "oke-dranet"}, nodes, slices)[0]["domains"]["oke-bm-gpu-gb200-0"]["rack"] == "7"


def test_inventory_levels_mix_with_cluster_ones():
    nodes, _slices = objects("gke")
    row = {"name": "row", "source": "inventory", "label": "aligned.dev/row", "after": "block"}
    raw = {"preset": "gke", "levels": [row]}
    per_host = {node["metadata"]["name"]: {"row": f"row{i // 4}"} for i, node in enumerate(nodes)}
    placement, problems = place(raw, nodes, per_host=per_host)
    assert problems == []
    assert placement["domains"]["gke-a4x-pool-7"]["row"] == "row1"
    labels = levels.node_label_objects(placement, "west")[7]["metadata"]["labels"]
    assert labels == {"aligned.dev/row": "row1", "aligned.dev/site": "west"}
    per_host["gke-a4x-pool-0"] = {"row": "row0", "block": "b1", "rwo": "x"}
    per_host["gke-a4x-pool-1"] = {}
    per_host["gke-a4x-pool-2"] = ["row0"]
    problems = place(raw, nodes, per_host=per_host)[1]
    assert problems == [
        "2 hosts (gke-a4x-pool-1, gke-a4x-pool-2): aligned_dra_placement.row = (not set): every host needs a "
        "domain at every level (levels: block, row, subblock, host)",
        'host gke-a4x-pool-0: aligned_dra_placement.block = "b1": level block is read from the node label '
        "cloud.google.com/gce-topology-block; leave it out of aligned_dra_placement",
        "host gke-a4x-pool-0: aligned_dra_placement.rwo = \"x\": the site declares no level 'rwo'; did you mean "
        "row? (levels: block, row, subblock, host)",
        'host gke-a4x-pool-2: aligned_dra_placement = ["row0"]: must map each level name to the host\'s domain',
    ]


def test_two_hosts_on_one_node_are_refused_as_with_the_inventory():
    nodes, _slices = objects("gke")
    problems = levels.site_placement(
        {"preset": "gke"}, {"a": None, "b": None}, {"a": "gke-a4x-pool-0", "b": "gke-a4x-pool-0"}, nodes=nodes
    )[1]
    assert problems[-1] == (
        '2 hosts (a, b): aligned_dra_driver_node_name = "gke-a4x-pool-0": 2 hosts (a, b) are all Kubernetes node '
        "gke-a4x-pool-0; one host per node"
    )


def test_levels_from_node_labels_give_the_same_site_placement_as_from_the_inventory():
    keys = {"block": "topology.example.com/block", "rack": "topology.example.com/rack"}
    inventory = [{"name": name, "label": key} for name, key in keys.items()]
    labelled = [{"name": name, "source": "node_label", "key": key} for name, key in keys.items()]
    per_host = {f"n{i:02d}": {"block": f"b{i // 8}", "rack": f"r{i // 4}"} for i in range(16)}
    names = {host: f"node-{host}" for host in per_host}
    nodes = [
        {"metadata": {"name": names[host], "labels": {keys[level]: value for level, value in row.items()}}}
        for host, row in per_host.items()
    ]
    from_inventory, problems = levels.site_placement(inventory, per_host, names)
    assert problems == []
    from_labels, problems = levels.site_placement(labelled, dict.fromkeys(per_host), names, nodes=nodes)
    assert problems == []
    assert {key: value for key, value in from_labels.items() if key != "sources"} == from_inventory
    assert levels.domain_tree(from_labels) == levels.domain_tree(from_inventory)
    # the inventory's labels are written; the cluster's are used as they are
    assert levels.node_label_objects(from_inventory)[0]["metadata"]["labels"] == {
        "topology.example.com/block": "b0",
        "topology.example.com/rack": "r0",
    }
    assert levels.node_label_objects(from_labels)[0]["metadata"]["labels"] == {}
    # and the inventory form's output is what it always was: no sources key
    assert sorted(from_inventory) == ["domains", "levels", "node_names"]


# -- the cluster setting and the files ------------------------------------------------------------


def test_the_cluster_setting():
    specs = check_level_specs({"preset": "oke-dranet"})
    assert sources.check_cluster_setting({"source": "cluster", "kubeconfig": "/k", "context": "c"}, specs) == {
        "source": "cluster",
        "kubeconfig": "/k",
        "context": "c",
        "node_files": [],
        "slice_files": [],
    }
    assert (
        sources.check_cluster_setting(setting("oke-dranet"), specs)["slice_files"]
        == setting("oke-dranet")["slice_files"]
    )
    inventory = check_level_specs([{"name": "rack", "source": "inventory", "label": "a/rack"}])
    assert sources.check_cluster_setting(None, inventory)["source"] is None


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (None, r"^aligned_dra_placement_cluster: levels hpc-island, .* are read from the cluster; say where from"),
        (["cluster"], r"must be a mapping with a source \(got list\)"),
        ({"source": "cluster", "kubconfig": "/k"}, r"unknown key 'kubconfig'; did you mean kubeconfig\?"),
        ({"source": "api"}, r"\.source: 'api' is not cluster or files"),
        ({"source": "cluster", "slice_files": ["s.yaml"]}, r"\.slice_files: only for source files"),
        ({"source": "files", "slice_files": ["s.yaml"], "kubeconfig": "/k"}, r"\.kubeconfig: only for source cluster"),
        ({"source": "cluster", "context": ""}, r"\.context: a non-empty string"),
        ({"source": "files"}, r"\.slice_files: the levels read the ResourceSlices: list the files"),
        ({"source": "files", "slice_files": "s.yaml"}, r"\.slice_files: must be a list of file paths"),
    ],
)
def test_a_wrong_cluster_setting_names_the_field(raw, message):
    with pytest.raises(PlacementError, match=message):
        sources.check_cluster_setting(raw, check_level_specs({"preset": "oke-dranet"}))


def test_files_hold_the_right_kinds(tmp_path):
    wrong = tmp_path / "pods.yaml"
    wrong.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}))
    with pytest.raises(PlacementError, match=r"^aligned_dra_placement_cluster\.node_files: .*pods.yaml holds a Pod"):
        sources.load_files({"node_files": [str(wrong)]})
    broken = tmp_path / "slices.json"
    broken.write_text(json.dumps([{"kind": "ResourceSlice", "spec": {"devices": {"x": 1}}}]))
    with pytest.raises(PlacementError, match=r"slice_files\[0\]\.spec\.devices"):
        sources.load_files({"slice_files": [str(broken)]})
    with pytest.raises(PlacementError, match=r"node_files: cannot read .*absent.yaml"):
        sources.load_files({"node_files": [str(tmp_path / "absent.yaml")]})
