# SPDX-License-Identifier: Apache-2.0
"""The one reading of a pair's level (issue 77): the level traffic flows at, with the pair's path."""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.dra import device_model
from ansible_collections.aligned.dra.tests.unit.plugins.module_utils.controller.topology.gpudirect_sites import (
    GPU,
    NIC,
    dgx_topology,
    without_gpudirect,
)


def test_a_pair_through_the_host_bridge_is_phb_an_unknown_path_keeps_its_level_and_links_stay_physical():
    topology = dgx_topology()
    links, p2p = topology["links"], topology["p2p"]
    assert device_model.pair_level(links, GPU["A"], NIC["A"], p2p) == "PIX"
    assert device_model.pair_level(links, GPU["B"], NIC["B"], p2p) == "PHB"
    assert links[GPU["B"]][NIC["B"]] == "PIX"  # never rewritten
    assert device_model.pair_level(links, GPU["C"], NIC["C"], p2p) == "PIX"
    assert device_model.pair_level(links, GPU["A"], NIC["B"], p2p) == "NODE"  # beyond the host bridge: as it was
    assert device_model.pair_level(links, GPU["B"], NIC["B"]) == "PIX"  # no p2p map: the physical level
    nearest = device_model.node_devices(topology)["nearest"]
    assert nearest[GPU["B"]] == {"level": "PHB", "nics": [NIC["B"]]}
    assert device_model.node_devices(without_gpudirect(topology))["nearest"][GPU["B"]] == {
        "level": "PIX",
        "nics": [NIC["B"]],
    }


def test_joined_pairs_carry_their_path_only_where_the_probe_read_paths():
    topology = dgx_topology()
    probed = device_model.probed_node(topology)
    join = {bdf: device_model.join_device("dra.aligned.dev", {"resource.kubernetes.io/pciBusID": bdf}, probed)
            for bdf in (*GPU.values(), *NIC.values())}  # fmt: skip
    links, p2p = topology["links"], topology["p2p"]

    def pair(g: str, n: str, paths=p2p) -> dict:
        return device_model.joined_pair_level(join[GPU[g]], join[NIC[n]], links, paths)

    assert pair("A", "A") == {"level": "PIX", "exact": True, "source": "topology", "path": "direct"}
    assert pair("B", "B") == {"level": "PHB", "exact": True, "source": "topology", "path": "host_bridge",
                              "physical_level": "PIX"}  # fmt: skip
    assert pair("C", "C") == {"level": "PIX", "exact": True, "source": "topology", "path": "unknown"}
    assert pair("A", "B")["path"] == "host_bridge"
    # older facts: exactly the result before paths were read
    assert pair("B", "B", None) == {"level": "PIX", "exact": True, "source": "topology"}
    # a p2p map without the pair: unverified
    assert pair("A", "A", {GPU["B"]: {}})["path"] == "unknown"
