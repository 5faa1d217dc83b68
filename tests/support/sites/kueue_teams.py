# SPDX-License-Identifier: Apache-2.0
"""TEST FIXTURE: team settings and the Kueue queues they render to, for the kueue tests.

The tests of ``plugins/module_utils/controller/schedulers/kueue/`` render their
queues with these helpers. Never shipped.
"""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import render as claims
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kueue import objects as kueue
from ansible_collections.aligned.dra.plugins.module_utils.controller.teams import settings as teams

CLASS_KEYS = claims.settings({})["classes"]
KUEUE_TEAM_KEYS = ("quotas", "borrowing_limit", "lending_limit", "department", "node_group")
GPU, NIC = "aligned-gpu", "aligned-nic"


def claim_objects(minor: str = "1.36", **gates: bool) -> list[dict]:
    return claims.render({}, "s", minor, gates or None)["objects"]


def conf_for(
    teams_raw: list[dict],
    minor: str = "1.36",
    objects: list[dict] | None = None,
    engine: str = "kueue",
    kueue_conf: dict | None = None,
    **raw: object,
) -> dict:
    """Checked settings as teams.settings gives them, with the Kueue keys of each team laid over.

    The team settings' own checks (names, tiers, templates) run in teams.settings;
    the amounts go in as the settings would give them (DeviceClass names), so the
    checks under test are kueue's.
    """
    objects = objects if objects is not None else claim_objects(minor)
    base = [{k: v for k, v in t.items() if k not in KUEUE_TEAM_KEYS} for t in teams_raw]
    conf = teams.settings(dict(raw, teams=base), objects, CLASS_KEYS)
    for team, given in zip(conf["teams"], teams_raw, strict=True):
        for key in ("quotas", "borrowing_limit", "lending_limit"):
            team[key] = {CLASS_KEYS.get(k, k): v for k, v in (given.get(key) or {}).items()}
        team["department"] = given.get("department")
        team["node_group"] = given.get("node_group")
    conf["engine"] = engine
    conf["kueue"] = dict({"cohort": None, "node_groups": {}, "resource_names": {}}, **(kueue_conf or {}))
    return conf


def render(teams_raw: list[dict], minor: str = "1.36", objects: list[dict] | None = None, **kwargs) -> dict:
    options = {k: kwargs.pop(k) for k in ("plan", "feature_gates", "in_use") if k in kwargs}
    objects = objects if objects is not None else claim_objects(minor)
    conf = conf_for(teams_raw, minor, objects, **kwargs)
    return kueue.render(conf, "s", objects, minor=minor, **options)


def queue(result: dict, name: str) -> dict:
    return next(o for o in result["objects"] if o["kind"] == "ClusterQueue" and o["metadata"]["name"] == name)


RICH = [
    {
        "name": "vision",
        "namespaces": ["vision-a", "vision-b"],
        "tier": "production",
        "templates": ["gpu-only", "gpu-nic-pair-1"],
        "quotas": {"gpu": 4, "nic": 2},
        "borrowing_limit": {"gpu": 2},
        "lending_limit": {"gpu": 6},
        "department": "ml",
        "node_group": "h100",
    },
    {
        "name": "nlp",
        "tier": "research",
        "templates": ["gpu-only"],
        "quotas": {"gpu": 2},
        "department": "ml",
        "node_group": "a100",
    },
    {"name": "batch", "tier": "opportunistic", "quotas": {"gpu": 3}, "node_group": "a100"},
]
NODE_GROUPS = {
    "h100": {"node_labels": {"aligned.dev/gpu-model": "h100"}},
    "a100": {"node_labels": {"aligned.dev/gpu-model": "a100", "aligned.dev/pool": "batch"}},
}
PLAN = {"classes": {GPU: {"devices": 16}, NIC: {"devices": 8}}}


def rich(**kwargs) -> dict:
    return render(RICH, kueue_conf={"node_groups": NODE_GROUPS}, plan=PLAN, **kwargs)


# quotas in GPU memory: counted by consumable capacity
CAPACITY_TEAMS = [
    {"name": "vision", "namespaces": ["vision-a", "vision-b"], "tier": "production", "quotas": {"gpu": "160Gi"}},
    {
        "name": "nlp",
        "tier": "research",
        "templates": ["fractional-gpu"],
        "quotas": {"gpu": "80Gi"},
        "lending_limit": {"gpu": "40Gi"},
    },
]
