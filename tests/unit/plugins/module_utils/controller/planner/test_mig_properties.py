# SPDX-License-Identifier: Apache-2.0
"""The plan's MIG counts against an independent allocator (tests/support/sites/kep4815_allocator.py).

Random catalogues of MIG templates (seeded: the same cases every run) on one dynamic GPU of the DGX
fixture, an H100 80GB or the same GPU as an A100 40GB (its PCI device ID changed), documented geometry.
For each template the planner's ``alone`` count and layout, and the catalogue ``mix``, must be the
reference's, which applies KEP-4815's rules to the same GPU written from NVIDIA's published figures, naming
and counters (``tests/support/sites/mig_slices``: no code of the collection), in the preference order the
collection's driver documents.
"""

from __future__ import annotations

import copy
import random

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import mig as planner_mig
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import plan as planner
from ansible_collections.aligned.dra.tests.support.fuzzing import profiles as fuzz_profiles
from ansible_collections.aligned.dra.tests.support.sites import kep4815_allocator as reference
from ansible_collections.aligned.dra.tests.support.sites import mig_slices as nvidia
from ansible_collections.aligned.dra.tests.support.sites.plan_inputs import device_class, exactly, template
from ansible_collections.aligned.dra.tests.support.sites.report_sites import topology_of

KIND = 'device.attributes["dra.aligned.dev"]'
CLASSES = [
    device_class("mig", f'device.driver == "dra.aligned.dev" && {KIND}.kind == "mig"'),
    device_class("gpu-or-mig", f'device.driver == "dra.aligned.dev" && ({KIND}.kind == "gpu" || {KIND}.kind == "mig")'),
]
MODELS = {"A100-40GB": "0x20b0", "H100-80GB": "0x2330"}
CASES = fuzz_profiles.examples(60, minimum=6)  # per model, a share of them in the quick tier


@pytest.fixture(scope="module")
def dgx():
    return topology_of("dgx-h100")


def random_catalogue(rng: random.Random, profiles: list[str]) -> list[tuple[dict, reference.Template]]:
    """1 to 4 templates of 1 or 2 requests, each 1 or 2 devices: a profile, any MIG device, or the GPU
    whole or a MIG device; as (ResourceClaimTemplate, the reference's requests)."""
    found = []
    for number in range(rng.randint(1, 4)):
        requests, wanted = [], []
        for index in range(rng.choice((1, 1, 2))):
            count = rng.choice((1, 1, 2))
            shape = rng.choice(("profile", "profile", "profile", "any-mig", "any"))
            if shape == "profile":
                name = rng.choice(profiles)
                selector = [{"cel": {"expression": f'{KIND}.profile == "{name}"'}}]
                requests.append(exactly(f"r{index}", "mig", count, selectors=selector))
                wanted.append((lambda a, name=name: a.get("type") == "mig" and a.get("profile") == name, count))
            elif shape == "any-mig":
                requests.append(exactly(f"r{index}", "mig", count))
                wanted.append((lambda a: a.get("type") == "mig", count))
            else:
                requests.append(exactly(f"r{index}", "gpu-or-mig", count))
                wanted.append((lambda a: a.get("type") in ("gpu", "mig"), count))
        found.append((template(f"t{number}", requests), wanted))
    return found


def gpu_node(topology: dict, device_id: str) -> tuple[dict, reference.Node]:
    """The planner's node with its first GPU dynamic (as ``device_id``), and the reference's GPU of that model
    as NVIDIA publishes it."""
    topology = copy.deepcopy(topology)
    first = next(d for d in topology["devices"] if d["pci_address"] == "0000:1a:00.0")
    first["device_id"] = device_id
    nodes = planner.nodes_from_topologies({"n1": topology}, mig={"n1": {"mode": "dynamic", "gpus": {"indices": [0]}}})
    counter_set, devices = nvidia.gpu_devices(0, device_id)
    sets = {counter_set["name"]: {c: v["value"] for c, v in counter_set["counters"].items()}}
    return nodes, reference.Node(devices, sets)


def described(node: reference.Node, claims: list[list[int]]) -> tuple[list[tuple], int]:
    """The placements (profile, start) the claims hold in order, and how many took the GPU whole."""
    layout, whole = [], 0
    for devices in claims:
        for index in devices:
            attributes = node.attributes[index]
            if attributes.get("type") == "mig":
                layout.append((attributes["profile"], attributes["placementStart"]))
        whole += any(node.attributes[i].get("type") == "gpu" for i in devices)
    return layout, whole


@pytest.mark.parametrize("model", sorted(MODELS))
def test_alone_and_mix_counts_match_the_reference_allocator(dgx, model):
    profiles = [p.name for p in nvidia.PROFILES[MODELS[model]][1]]
    rng = random.Random(f"mig-{model}")
    checked = 0
    for case in range(CASES):
        catalogue = random_catalogue(rng, profiles)
        nodes, fresh = gpu_node(dgx, MODELS[model])
        section = planner_mig.section(nodes, CLASSES, [item for item, _wanted in catalogue])
        (gpu,) = section["nodes"]["n1"]["gpus"]
        mig_devices = [i for i, a in enumerate(fresh.attributes) if a.get("type") == "mig"]
        landing = [
            (item["metadata"]["name"], wanted)
            for item, wanted in catalogue
            if any(predicate(fresh.attributes[i]) for predicate, _count in wanted for i in mig_devices)
        ]
        assert list(gpu["templates"]) == [name for name, _wanted in landing], case
        for name, wanted in landing:
            node = gpu_node(dgx, MODELS[model])[1]
            claims = reference.alone(node, wanted)
            layout, whole = described(node, claims)
            planned = gpu["templates"][name]
            assert planned["claims"] == len(claims), (case, name)
            assert [(p["profile"], p["start"]) for p in planned["layout"]] == layout, (case, name)
            assert planned["whole_gpu"] == whole, (case, name)
            checked += 1
        node = gpu_node(dgx, MODELS[model])[1]
        mixed = reference.mix(node, landing)
        assert gpu["mix"]["total"] == len(mixed), case
        assert gpu["mix"]["claims"] == {name: sum(1 for n, _d in mixed if n == name) for name, _w in landing}, case
        layout = [(n, *p) for n, devices in mixed for p in described(node, [devices])[0]]
        assert [(p["template"], p["profile"], p["start"]) for p in gpu["mix"]["layout"]] == layout, case
    assert checked >= CASES  # most catalogues land somewhere: the check is not vacuous


def test_the_reference_keeps_the_gpu_whole_and_its_partitions_apart(dgx):
    """The reference's own rule, checked once: after any partition the GPU whole no longer fits, and after
    the GPU whole no partition does. (An A100 in dynamic MIG publishes no GPU whole: Ampere changes MIG mode
    only with a reset, so the catalogues above reach its partitions only.)"""
    assert not any(a.get("type") == "gpu" for a in gpu_node(dgx, MODELS["A100-40GB"])[1].attributes)
    _nodes, node = gpu_node(dgx, MODELS["H100-80GB"])
    whole = next(i for i, a in enumerate(node.attributes) if a.get("type") == "gpu")
    parts = [i for i, a in enumerate(node.attributes) if a.get("type") == "mig"]
    node.take(parts[0])
    assert not node.fits(whole)
    node.take(parts[0], -1)
    node.take(whole)
    assert not any(node.fits(i) for i in parts)
