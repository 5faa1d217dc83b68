# SPDX-License-Identifier: Apache-2.0
"""On the controller after the whole rollout: facts, claims, plan and report agree with each other.

The facts are the per-node topology files the probe wrote (the re-probe
after the network stage included): every count the summaries, the plan, the
HTML pages and the driver's ResourceSlices show must be the one counted here
from those facts. These tests take no ``host``, so they run once.
"""

from __future__ import annotations

import html
import json
import os
import re
import urllib.request
from pathlib import Path

import pytest
import yaml

from ansible_collections.aligned.dra.plugins.module_utils.dra import device_model

EPHEMERAL = Path(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "/nonexistent"))
OUTPUT = EPHEMERAL / "output"
SITE = "lab"
MINOR = "1.35"
NODES = ["site-cpu", "site-dgx", "site-mi300x"]
# What molecule.yml asks: VFs per node.
VFS = {"site-cpu": 0, "site-dgx": 4, "site-mi300x": 2}


def facts(node):
    return json.loads((OUTPUT / SITE / "nodes" / f"{node}.json").read_text())


def counted(node):
    """GPUs, physical NICs and VFs of a node, counted from its facts."""
    devices = facts(node)["devices"]
    return {
        "gpus": sum(d["kind"] in ("gpu", "accelerator") for d in devices),
        "nics": sum(d["kind"] in ("nic", "rdma") and not d.get("physfn") for d in devices),
        "vfs": sum(bool(d.get("physfn")) for d in devices),
    }


def on_page(node):
    """What the report shows for a node: accelerators and RDMA NICs as the planner sees them, and the VFs."""
    model = device_model.node_devices(facts(node))
    return {
        "accelerators": ", ".join(device_model.family_counts_text(model["counts"])) or "0",
        "rdma_nics": model["counts"]["rdma_nics"],
        "vfs": counted(node)["vfs"],
    }


def api_get(path):
    url = (EPHEMERAL / "apiserver" / "url").read_text().strip()
    with urllib.request.urlopen(url + path, timeout=10) as response:
        return json.loads(response.read())


def cells(row):
    return [html.unescape(re.sub(r"<[^>]+>", "", cell)).strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", row)]


def test_facts_describe_each_node_as_built():
    assert sorted(p.stem for p in (OUTPUT / SITE / "nodes").glob("*.json")) == NODES
    assert counted("site-dgx")["gpus"] == counted("site-mi300x")["gpus"] == 8
    assert counted("site-cpu")["gpus"] == 0
    for node, vfs in VFS.items():
        # The probe after the network stage saw the VFs it created.
        assert counted(node)["vfs"] == vfs, node
        assert facts(node)["sysfs_root"] == "/fixture/sys"
    # Different topologies: NVIDIA behind PCIe switches, AMD on the host bridge.
    levels = {node: {v["level"] for v in facts(node)["nearest_nics"].values()} for node in NODES}
    assert levels == {"site-cpu": set(), "site-dgx": {"PXB"}, "site-mi300x": {"PHB"}}


def test_summary_and_index_agree_with_the_facts():
    summary = json.loads((OUTPUT / SITE / "summary.json").read_text())
    assert sorted(summary["per_node"]) == NODES
    for node in NODES:
        got = {key: summary["per_node"][node][key] for key in ("gpus", "nics", "vfs")}
        assert got == counted(node), node
    index = json.loads((OUTPUT / "index.json").read_text())
    assert [s["site"] for s in index["sites"]] == [SITE]
    entry = index["sites"][0]
    assert entry["nodes"] == len(NODES)
    assert entry["gpus"] == sum(counted(n)["gpus"] for n in NODES)
    assert entry["nics"] == sum(counted(n)["nics"] for n in NODES)


def test_site_page_lists_every_node_with_its_counts():
    page = (OUTPUT / SITE / "report.html").read_text()
    rows = dict(re.findall(r'<tr id="node-[^"]+" data-host="([^"]+)">(.*?)</tr>', page, re.S))
    assert sorted(rows) == NODES
    for node in NODES:
        # node, layout, NUMA nodes, accelerators, RDMA NICs, VFs, levels, warnings
        row = cells(rows[node])
        assert row[0] == node
        assert [row[3], int(row[4]), int(row[5])] == list(on_page(node).values()), (node, row)
    # Three different machines: three layouts drawn.
    assert len({cells(rows[node])[1] for node in NODES}) == 3


def test_index_page_shows_the_site_totals():
    page = (OUTPUT / "index.html").read_text()
    row = re.search(r'<tr data-site="lab">(.*?)</tr>', page, re.S)
    assert row, "the index page has no row for the site"
    # site, nodes, failed or unreachable, layouts, accelerators, RDMA NICs, aligned share, plan, warnings
    values = cells(row.group(1))
    assert values[0] == SITE
    assert int(values[1]) == len(NODES)
    families = {key: 0 for key, _prefix, _names in device_model.FAMILIES}
    for node in NODES:
        for key in families:
            families[key] += device_model.node_devices(facts(node))["counts"][key]
    assert values[4] == ", ".join(device_model.family_counts_text(families))
    assert int(values[5]) == sum(on_page(n)["rdma_nics"] for n in NODES)
    assert values[7] != "-", "the report does not show the plan"


def test_claims_rendered_for_the_scenarios_minor():
    claims = sorted((OUTPUT / SITE / "claims").glob("*.yaml"))
    objects = [p for p in claims if p.name != "kustomization.yaml"]
    assert objects
    for path in objects:
        assert f"for site {SITE}, Kubernetes {MINOR}." in path.read_text().splitlines()[1], path.name
        assert yaml.safe_load(path.read_text())["apiVersion"] == "resource.k8s.io/v1"
    # Applied to the fake API server, which serves MINOR and checks every object against its schema.
    classes = {item["metadata"]["name"] for item in api_get("/apis/resource.k8s.io/v1/deviceclasses")["items"]}
    assert {"aligned-gpu", "aligned-nic", "aligned-vf"} <= classes
    assert api_get("/version")["minor"].rstrip("+") == MINOR.split(".")[1]


def test_plan_uses_every_node_and_its_devices():
    plan = json.loads((OUTPUT / SITE / "plan.json").read_text())
    assert plan["kubernetes_version"] == MINOR
    assert plan["nodes"] == NODES
    assert plan["required_unsatisfied"] == []
    assert plan["classes"]["aligned-gpu"]["nodes"] == {n: counted(n)["gpus"] for n in NODES}
    assert plan["classes"]["aligned-vf"]["nodes"] == {n: counted(n)["vfs"] for n in NODES}


@pytest.mark.parametrize("node", NODES)
def test_driver_publishes_what_the_facts_show(node):
    slices = api_get(f"/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName%3D{node}")
    devices = [d for item in slices["items"] for d in item["spec"]["devices"]]
    bus_ids = {d["attributes"].get("resource.kubernetes.io/pciBusID", {}).get("string") for d in devices}
    gpus = {d["pci_address"] for d in facts(node)["devices"] if d["kind"] in ("gpu", "accelerator")}
    vfs = {d["pci_address"] for d in facts(node)["devices"] if d.get("physfn")}
    # The CPU-only node has no driver (aligned_dra_driver_state: absent): nothing published.
    assert gpus | vfs <= bus_ids
    assert sum(d["name"].startswith(("gpu-", "acc-")) for d in devices) == len(gpus)
