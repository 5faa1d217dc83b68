# SPDX-License-Identifier: Apache-2.0
"""The driver's attributes and GPUDirect RDMA (issue 77): ``pcieSwitch`` only where the path up to the switch
does not redirect, ``gpudirectRDMA`` on GPUs, both as the planner's allocator reads them.

The node is the DGX-like topology of ``controller/topology/gpudirect_sites.py``: switch A direct, switch B
with ACS redirect on the GPU's downstream port, switch C with a NIC port whose ACS could not be read.
"""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import plan as planner
from ansible_collections.aligned.dra.plugins.module_utils.dra import cel as dra_cel
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra
from ansible_collections.aligned.dra.tests.support.sites.plan_inputs import (
    CLASSES,
    KIND,
    device_class,
    exactly,
    template,
)
from ansible_collections.aligned.dra.tests.unit.plugins.module_utils.controller.topology.gpudirect_sites import (
    GPU,
    NIC,
    dgx_topology,
    without_gpudirect,
)

SWITCH = dra.DRIVER_NAME + "/pcieSwitch"
READY = dra.DRIVER_NAME + "/" + dra.GPUDIRECT_ATTRIBUTE


def attributes(topology: dict) -> dict[str, dict]:
    return {d["name"]: d["attributes"] for d in dra.devices_from_topology(topology)}


def test_no_pcie_switch_on_a_function_whose_path_to_the_switch_redirects_and_gpus_say_if_gpudirect_is_ready():
    found = attributes(dgx_topology())
    gpu = {name: found[dra.device_name("gpu", GPU[name])] for name in GPU}
    nic = {name: found[dra.device_name("nic", NIC[name])] for name in NIC}
    assert gpu["A"][SWITCH] == nic["A"][SWITCH] == {"string": "0000:11:00.0"}
    assert SWITCH not in gpu["B"]  # its downstream port 0000:22:00.0 redirects
    assert nic["B"][SWITCH] == {"string": "0000:21:00.0"}  # nothing redirects on the NIC's way
    assert gpu["C"][SWITCH] == nic["C"][SWITCH] == {"string": "0000:31:00.0"}  # unread: kept
    assert all(g[READY] == {"bool": True} for g in gpu.values())
    assert all(READY not in n for n in nic.values())
    assert all(g[READY] == {"bool": False} for name, g in attributes(dgx_topology(ready=False)).items()
               if name.startswith("gpu-"))  # fmt: skip
    assert not any(READY in a for a in attributes(dgx_topology(ready=None)).values())


def test_facts_without_acs_or_gpudirect_publish_what_they_did_before():
    old = attributes(without_gpudirect(dgx_topology()))
    for name in GPU:
        assert old[dra.device_name("gpu", GPU[name])][SWITCH] == {"string": f"0000:{GPU[name][5]}1:00.0"}
    assert not any(READY in a for a in old.values())
    # the attributes of the new facts are those of the old ones but for the two the issue adds or removes
    new = attributes(dgx_topology())
    for name, found in new.items():
        expected = {
            k: v for k, v in old[name].items() if not (name == dra.device_name("gpu", GPU["B"]) and k == SWITCH)
        }
        assert {k: v for k, v in found.items() if k != READY} == expected


def plan_of(topologies: dict, templates: list, classes: list | None = None) -> dict:
    nodes = planner.nodes_from_topologies(topologies)
    result = planner.plan("s", nodes, CLASSES if classes is None else classes, templates)
    return {t["name"]: t for t in result["templates"]}


def test_a_template_matching_pcie_switch_never_lands_on_a_pair_that_goes_through_the_host_bridge():
    pair = template(
        "switch-pair",
        [exactly("gpu", "gpu"), exactly("nic", "nic")],
        [{"requests": ["gpu", "nic"], "matchAttribute": SWITCH}],
    )
    found = plan_of({"dgx": dgx_topology()}, [pair])["switch-pair"]["nodes"]["dgx"]
    assert found["fits"] == 2
    held = [a["devices"] for a in found["allocations"]]
    assert held == [
        {"gpu": [dra.device_name("gpu", GPU[n])], "nic": [dra.device_name("nic", NIC[n])]}
        for n in ("A", "C")
    ]  # fmt: skip
    # the direct pair is verified, the unread one is PIX and unverified
    assert [(a["worst_level"], a["paths"]["direct"], a["paths"]["unknown"]) for a in found["allocations"]] == [
        ("PIX", 1, 0), ("PIX", 0, 1)
    ]  # fmt: skip
    # with facts from before the probe read ACS, the B pair is a PIX pair on one switch again
    old = plan_of({"dgx": without_gpudirect(dgx_topology())}, [pair])["switch-pair"]["nodes"]["dgx"]
    assert old["fits"] == 3
    assert all("paths" not in a for a in old["allocations"]) and "paths" not in old


def test_a_cel_selector_on_gpudirect_rdma_selects_only_the_gpus_of_ready_nodes():
    ready_gpu = device_class(
        "gpudirect-gpu", f'device.driver == "dra.aligned.dev" && {KIND} == "gpu" && '
        f'device.attributes["dra.aligned.dev"].gpudirectRDMA == true'
    )  # fmt: skip
    assert dra_cel.check_expression(ready_gpu["spec"]["selectors"][0]["cel"]["expression"]) == []
    one = template("one", [exactly("gpu", "gpudirect-gpu")])
    topologies = {"ready": dgx_topology(), "not-ready": dgx_topology(ready=False)}
    found = plan_of(topologies, [one], CLASSES + [ready_gpu])["one"]["nodes"]
    assert (found["ready"]["fits"], found["not-ready"]["fits"]) == (3, 0)


def test_the_static_cel_checks_know_gpudirect_rdma_as_a_bool():
    assert dra_cel.KNOWN_ATTRIBUTES[dra.DRIVER_NAME][dra.GPUDIRECT_ATTRIBUTE] == "bool"
    wrong = 'device.attributes["dra.aligned.dev"].gpudirectRDMA == "yes"'
    assert dra_cel.check_expression(wrong) != []
