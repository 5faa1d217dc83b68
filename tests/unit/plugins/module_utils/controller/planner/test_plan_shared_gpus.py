# SPDX-License-Identifier: Apache-2.0
"""The planner plans probed GPUs shareable exactly where the bundled driver publishes them so.

On a minor that serves consumable capacity (``DRAConsumableCapacity``: on from
1.36, or declared) the driver publishes its GPUs with
``allowMultipleAllocations`` and ``memory``/``compute`` capacities
(``dra.make_shareable``); the planner's nodes from topologies do the same, and
the allocator consumes capacity as kube-scheduler does: a claim that requests
no ``compute`` consumes the policy's default, all of it (100).
"""

from __future__ import annotations

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import inputs as planner_inputs
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import plan as planner
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra
from ansible_collections.aligned.dra.tests.support.sites.plan_inputs import CLASSES, exactly, template

GI = 2**30

# two H100 80GB, each on a host bridge of its own
TOPOLOGY = {
    "devices": [
        {
            "pci_address": f"0000:{bus}:00.0",
            "kind": "gpu",
            "pcie_root": f"pci0000:{bus}",
            "numa_node": 0,
            "vendor_id": "0x10de",
            "gpu": {"model": "NVIDIA H100 80GB HBM3"},
        }
        for bus in ("1b", "2b")
    ],
    "links": {},
}


def shares(memory: str, compute: str | None = None, limit: str | None = None) -> dict:
    """A fractional template: a memory request (and a compute one), burstable with a memory limit."""
    requests = {"memory": memory} | ({"compute": compute} if compute else {})
    name = f"share-{memory}-{compute or 'all'}".lower()
    item = template(name, [exactly("gpu", "gpu", capacity={"requests": requests})])
    if limit:
        parameters = {"kind": "GpuConfig", "sharing": {"strategy": "MPS", "mps": {"limits": {"memory": limit}}}}
        item["spec"]["spec"]["devices"]["config"] = [
            {"requests": ["gpu"], "opaque": {"driver": dra.DRIVER_NAME, "parameters": parameters}}
        ]
    return item


def site(minor: str | None, gates: dict | None = None, templates: list | None = None) -> planner_inputs.SiteInput:
    params = {"objects": CLASSES + (templates or []), "topologies": {"n1": TOPOLOGY}, "kubernetes_version": minor}
    return planner_inputs.load_site(params | ({"feature_gates": gates} if gates else {}))


@pytest.mark.parametrize(
    ("minor", "gates", "shared"),
    [
        ("1.36", None, True),
        ("1.37", None, True),
        ("1.34", None, False),
        ("1.35", {"DRAConsumableCapacity": True}, True),  # declared on: the claims render uses capacity too
        ("1.36", {"DRAConsumableCapacity": False}, False),
        (None, None, False),  # no minor: as before
    ],
)
def test_gpus_are_shareable_where_the_minor_serves_consumable_capacity(minor, gates, shared):
    devices = site(minor, gates).nodes["n1"]["devices"]
    assert [bool(d.get("allowMultipleAllocations")) for d in devices] == [shared, shared]
    if shared:
        # the driver's publication, from the one source both use
        published = dra.devices_from_topology(TOPOLOGY)
        assert devices[0]["capacity"] == dra.make_shareable(published[0])["capacity"]
        assert devices[0]["capacity"]["memory"]["requestPolicy"]["validRange"]["max"] == "80Gi"


def test_a_bad_minor_names_the_option():
    with pytest.raises(planner_inputs.InputError, match="kubernetes_version"):
        site("1.12")


def _plan(minor: str, templates: list) -> dict:
    loaded = site(minor, templates=templates)
    result = planner.plan("s", loaded.nodes, loaded.classes, loaded.templates, kubernetes_version=minor)
    return {t["name"]: t for t in result["templates"]} | {"thin": result["thin"]}


def test_on_136_an_80gi_gpu_fits_four_20gi_shares_that_ask_for_compute():
    burst = shares("20Gi", "25", limit="40Gi")
    result = _plan("1.36", [shares("20Gi", "25"), burst])
    assert result["share-20gi-25"]["fits_total"] == 8  # 4 per GPU: memory 4 x 20Gi, compute 4 x 25 %
    assert result["share-20gi-25"]["nodes"]["n1"]["fits"] == 8
    (thin,) = result["thin"]
    assert thin["template"] == burst["metadata"]["name"]
    gpu = thin["nodes"]["n1"]["gpus"]["gpu-0000-1b-00-0"]
    assert gpu == {"claims": 4, "memory": 80 * GI, "promised": 160 * GI, "ratio": 2.0}  # 4 x 40Gi / 80Gi
    assert thin["ratio"] == 2.0


def test_on_136_a_memory_only_share_takes_the_gpus_whole_compute():
    # the scheduler consumes compute's default (100) for a claim without a compute request
    result = _plan("1.36", [shares("20Gi"), shares("20Gi", limit="40Gi") | {"metadata": {"name": "burst"}}])
    assert result["share-20gi-all"]["fits_total"] == 2
    (thin,) = result["thin"]
    assert thin["nodes"]["n1"]["gpus"]["gpu-0000-1b-00-0"]["claims"] == 1
    assert thin["ratio"] == 0.5


def test_on_134_a_gpu_is_taken_whole_as_before():
    result = _plan("1.34", [shares("20Gi"), shares("20Gi", limit="40Gi") | {"metadata": {"name": "b"}}])
    assert result["share-20gi-all"]["fits_total"] == 2  # one claim per GPU
    (thin,) = result["thin"]
    assert thin["nodes"]["n1"]["gpus"]["gpu-0000-1b-00-0"]["claims"] == 1
    assert thin["ratio"] == 0.5
    # no compute capacity is published there: a share that asks for compute fits nowhere
    assert _plan("1.34", [shares("20Gi", "25")])["share-20gi-25"]["fits_total"] == 0
