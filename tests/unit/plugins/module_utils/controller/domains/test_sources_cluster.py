# SPDX-License-Identifier: Apache-2.0
"""Levels read from a cluster: the fixtures' Nodes and DRANET ResourceSlices served by the fake API server
(which validates them against the official schema), read through the ``kubernetes`` client, give what the
files give; and the validation stage's check of a site whose levels come from the cluster."""

from __future__ import annotations

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.domains import levels, sources
from ansible_collections.aligned.dra.plugins.module_utils.controller.validation import validate_placement
from ansible_collections.aligned.dra.tests.support.fakes.apiserver import FakeApiServer
from ansible_collections.aligned.dra.tests.support.sites.domain_sources import (
    FILES,
    levels_of,
    objects,
    setting,
)

OKE_NVLINK = {
    "preset": "oke-dranet",
    "nvlink": {
        "source": "device_attribute",
        "driver": "dra.net",
        "attribute": "oke.dra.net/gpuMemoryFabricId",
        "after": "local-block",
    },
}


@pytest.fixture(scope="module")
def served():
    """GKE's labelled Nodes and OKE's DRANET Nodes and slices, in one fake cluster."""
    gke, _none = objects("gke")
    oke, slices = objects("oke-dranet")
    with FakeApiServer(minor="1.35") as api:
        for obj in [*gke, *oke, *slices]:
            api.create(obj)
        yield api, gke + oke, slices


def test_nodes_and_slices_read_from_the_api_server_give_what_the_files_give(served, tmp_path):
    api, nodes, slices = served
    assert api.rejections == []
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    client = sources.api_client({"source": "cluster", "kubeconfig": str(kubeconfig), "context": "fake"})
    try:
        read_nodes, read_slices = sources.read_cluster(client, sources.Needs(nodes=True, slices=True))
        only_nodes = sources.read_cluster(client, sources.Needs(nodes=True, slices=False))
    finally:
        client.close()
    assert only_nodes[1] is None and len(only_nodes[0]) == 16
    assert len(read_nodes) == 16 and len(read_slices) == 8
    for raw, hosts in (({"preset": "gke", "nvlink": True}, nodes[:8]), (OKE_NVLINK, nodes[8:])):
        scope = dict.fromkeys(node["metadata"]["name"] for node in hosts)
        from_files = levels.site_placement(raw, scope, {}, nodes=nodes, slices=slices)
        from_cluster = levels.site_placement(raw, scope, {}, nodes=read_nodes, slices=read_slices)
        assert from_cluster == from_files and from_files[1] == []


@pytest.fixture(scope="module")
def every_preset():
    """Every fixture's Nodes and slices in one fake cluster (its names differ from fixture to fixture)."""
    found = {preset: objects(preset) for preset in FILES}
    with FakeApiServer(minor="1.35") as api:
        for nodes, slices in found.values():
            for obj in [*nodes, *slices]:
                api.create(obj)
        assert api.rejections == []
        client = api.api_client()
        try:
            yield found, sources.read_cluster(client, sources.Needs(nodes=True, slices=True))
        finally:
            client.close()


@pytest.mark.parametrize("preset", sorted(FILES))
def test_every_preset_read_from_the_api_server_places_and_refuses_as_from_its_files(every_preset, preset):
    found, (served_nodes, served_slices) = every_preset
    nodes, slices = found[preset]
    hosts = dict.fromkeys(node["metadata"]["name"] for node in nodes)
    assert levels.site_placement(levels_of(preset), hosts, {}, nodes=served_nodes, slices=served_slices) == (
        levels.site_placement(levels_of(preset), hosts, {}, nodes=nodes, slices=slices)
    )
    # and a node the cluster's objects leave without a value is refused alike, naming node, level and value
    missing = {**hosts, "not-in-the-cluster": None}
    from_cluster = levels.site_placement(levels_of(preset), missing, {}, nodes=served_nodes, slices=served_slices)
    assert (
        from_cluster[1]
        and from_cluster[1] == levels.site_placement(levels_of(preset), missing, {}, nodes=nodes, slices=slices)[1]
    )
    assert all("not-in-the-cluster" in problem for problem in from_cluster[1])


def test_read_cluster_reads_nothing_it_does_not_need():
    assert sources.read_cluster(object(), sources.Needs(nodes=False, slices=False)) == (None, None)
    assert not sources.Needs(False, False).any and sources.Needs(False, True).any


# -- the validation stage ---------------------------------------------------------------------------


def validation(hostvars: dict, name: str = "west") -> list[tuple]:
    hosts = sorted(hostvars)

    def setting(host, name, default):
        return hostvars[host].get(name, default)

    levels_found = validate_placement.check_levels(name, hosts, setting, str)
    assert levels_found[1] == []
    return validate_placement.check_hosts(name, hosts, setting, levels_found[0], str)


def site(preset: str, cluster: dict | None, **extra) -> dict:
    nodes, _slices = objects(preset)
    common = {"aligned_dra_placement_levels": {"preset": preset}, **extra}
    if cluster is not None:
        common["aligned_dra_placement_cluster"] = cluster
    return {node["metadata"]["name"]: dict(common) for node in nodes}


def test_the_validation_reads_files_and_refuses_what_the_placement_would():
    assert validation(site("oke-dranet", setting("oke-dranet"))) == []
    hostvars = site("gke", setting("gke"))
    hostvars["gke-a4x-pool-0"]["aligned_dra_placement"] = {"block": "b1"}
    assert validation(hostvars) == [
        (
            "gke-a4x-pool-0",
            "aligned_dra_placement.block",
            '"b1"',
            "level block is read from the node label cloud.google.com/gce-topology-block; leave it out of "
            "aligned_dra_placement",
        )
    ]
    hostvars = site("gke", setting("gke"))
    hostvars["not-a-node"] = hostvars["gke-a4x-pool-0"]
    found = validation(hostvars)
    assert len(found) == 3 and {item[0] for item in found} == {"not-a-node"}
    assert found[0][2:] == (
        "(no such Node)",
        "the cluster has no Node not-a-node (aligned_dra_driver_node_name names it)",
    )


def test_the_validation_reads_the_api_server_and_refuses_what_the_placement_would(served, tmp_path):
    api, _nodes, _slices = served
    cluster = {"source": "cluster", "kubeconfig": str(api.write_kubeconfig(tmp_path / "kubeconfig")), "context": "fake"}
    assert validation(site("gke", cluster)) == []
    hostvars = site("gke", cluster)
    hostvars["gke-a4x-pool-3"]["aligned_dra_placement"] = {"subblock": "x"}
    assert [item[1] for item in validation(hostvars)] == ["aligned_dra_placement.subblock"]
    # a node the cluster does not have is named as the files would name it
    hostvars = site("gke", cluster)
    hostvars["not-a-node"] = hostvars["gke-a4x-pool-0"]
    assert {item[0] for item in validation(hostvars)} == {"not-a-node"}


def test_the_validation_names_the_setting_when_the_cluster_cannot_be_read(tmp_path):
    with FakeApiServer(minor="1.35") as api:
        kubeconfig = str(api.write_kubeconfig(tmp_path / "kubeconfig"))
    # the server is gone: the connection is refused
    found = validation(site("gke", {"source": "cluster", "kubeconfig": kubeconfig, "context": "fake"}))
    assert len(found) == 8 and {item[1] for item in found} == {"aligned_dra_placement_cluster"}
    assert "cannot read the cluster's Nodes and ResourceSlices" in found[0][3]


def test_the_validation_refuses_a_missing_or_wrong_cluster_setting():
    found = validation(site("eks", None))
    assert len(found) == 8 and found[0][1] == "aligned_dra_placement_cluster"
    assert (
        "site west: aligned_dra_placement_cluster: levels layer-1, layer-2, layer-3 are read from the cluster"
        in (found[0][3])
    )
    found = validation(site("eks", {"source": "files", "node_files": ["/nowhere/nodes.yaml"]}))
    assert len(found) == 8 and "node_files: cannot read /nowhere/nodes.yaml" in found[0][3]


def test_the_inventory_form_is_validated_as_before():
    hostvars = {"h1": {"aligned_dra_placement_levels": [{"name": "rack", "label": "aligned.dev/rack"}]}}
    assert validation(hostvars) == [
        (
            "h1",
            "aligned_dra_placement.rack",
            "(not set)",
            "every host needs a domain at every level (levels: rack)",
        )
    ]
