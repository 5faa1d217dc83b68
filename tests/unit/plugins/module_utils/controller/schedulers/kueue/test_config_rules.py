# SPDX-License-Identifier: Apache-2.0
"""The rendered Kueue Configuration against Kueue's own validation rules, kept as data taken from upstream's
source (tests/support/sites/kueue_config_rules.yaml, kubernetes-sigs/kueue v0.19.2, each rule naming its file
and function). The rules are read by this file's own small interpreter: no code of the collection decides
what is valid here, so a mapping our render emits and our own validation lets through is still caught."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml

from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import burst
from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import render as claims
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers import mig as schedulers_mig
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kueue import checks as kueue_checks
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kueue import mig as kueue_mig
from ansible_collections.aligned.dra.plugins.module_utils.controller.stages import teams_render as teams
from ansible_collections.aligned.dra.tests.support.sites.kueue_teams import CAPACITY_TEAMS, render, rich
from ansible_collections.aligned.dra.tests.support.sites.report_sites import topology_of

RULES = yaml.safe_load(
    (Path(__file__).resolve().parents[7] / "tests" / "support" / "sites" / "kueue_config_rules.yaml").read_text()
)

# apimachinery's patterns, written from the Kubernetes API conventions (not from this collection)
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")


def _dns_subdomain(value) -> bool:
    return isinstance(value, str) and 0 < len(value) <= 253 and all(_DNS_LABEL.match(p) for p in value.split("."))


def _label_key(value) -> bool:
    if not isinstance(value, str) or len(value) > 253:
        return False
    prefix, _slash, name = value.rpartition("/")
    if "/" in prefix:
        return False
    return (not prefix or _dns_subdomain(prefix)) and len(name) <= 63 and bool(_NAME_PART.match(name))


def _walk(node, parts: list[str], path: str):
    """Every ``(path, value)`` a rule path names: ``a.b[*].c``, ``*`` any key of a mapping."""
    if not parts:
        yield path, node
        return
    head, rest = parts[0], parts[1:]
    each = head.endswith("[*]")
    key = head[:-3] if each else head
    if key == "*":
        for name, value in (node or {}).items() if isinstance(node, dict) else []:
            yield from _walk(value, rest, f"{path}.{name}")
        return
    if not isinstance(node, dict) or key not in node:
        return
    value, here = node[key], f"{path}.{key}" if path else key
    if each:
        for i, item in enumerate(value or []):
            yield from _walk(item, rest, f"{here}[{i}]")
    else:
        yield from _walk(value, rest, here)


def _paths(cfg: dict, path: str):
    return list(_walk(cfg, path.split("."), ""))


def _gates(cfg: dict) -> dict:
    gates = dict(RULES["feature_gates"]["defaults"])
    gates.update(cfg.get("featureGates") or {})
    return gates


def _classes_once(cfg: dict) -> list[str]:
    seen: dict[str, tuple[str, str | None]] = {}
    found = []
    for i, mapping in enumerate((cfg.get("resources") or {}).get("deviceClassMappings") or []):
        sources = mapping.get("sources") or []
        counter = ((sources[0] or {}).get("counter") or {}).get("name") if sources else None
        for cls in mapping.get("deviceClassNames") or []:
            if cls in seen and seen[cls][0] != mapping.get("name"):
                if counter is None or seen[cls][1] is None or seen[cls][1] == counter:
                    found.append(f"resources.deviceClassMappings[{i}]: {cls}")
            seen.setdefault(cls, (mapping.get("name"), counter))
    return found


def violations(cfg: dict) -> list[str]:
    """``rule id: where`` for every rule of the data that ``cfg`` breaks."""
    found = []
    for rule in RULES["rules"]:
        check, rid = rule["check"], rule["id"]
        targets = _paths(cfg, rule.get("each") or rule.get("path") or "")
        bad: list[str] = []
        if check == "max_items":
            bad = [p for p, v in targets if len(v or []) > rule["limit"]]
        elif check == "min_items":
            bad = [p for p, v in targets if len(v or []) < rule["limit"]]
        elif check == "label_key":
            bad = [p for p, v in targets if not _label_key(v)]
        elif check == "dns_label":
            bad = [p for p, v in targets if not (isinstance(v, str) and len(v) <= 63 and _DNS_LABEL.match(v))]
        elif check == "dns_subdomain":
            bad = [p for p, v in targets if not _dns_subdomain(v) or len(v) > rule["max_length"]]
        elif check == "required_text":
            bad = [p for p, v in targets if not isinstance(v, str) or not v]
        elif check == "unique":
            if rule["each"].endswith("[*].name"):
                values = [v for _path, v in targets]
                bad = [p for i, (p, v) in enumerate(targets) if v in values[:i]]
            else:
                bad = [p for p, v in targets if len(set(v or [])) != len(v or [])]
        elif check == "exactly_one_of":
            bad = [p for p, v in targets if sum(1 for k in rule["keys"] if (v or {}).get(k) is not None) != 1]
        elif check == "not_both_kinds":
            bad = [p for p, v in targets if all(any((s or {}).get(k) for s in v or []) for k in rule["keys"])]
        elif check == "gate_for_key":
            bad = [p for p, v in targets if (v or {}).get(rule["key"]) and not _gates(cfg)[rule["gate"]]]
        elif check == "one_of":
            bad = [p for p, v in targets if v is not None and v not in rule["values"]]
        elif check == "absent_when":
            (when,) = [v for _path, v in _paths(cfg, rule["when"]["path"])] or [None]
            bad = [p for p, v in targets if v and when == rule["when"]["equals"]]
        elif check == "gate_requires":
            gates = _gates(cfg)
            bad = [g for g in rule["gates"] if gates.get(g) and not gates.get(rule["requires"])]
        elif check == "class_once_unless_other_counter":
            bad = _classes_once(cfg)
        else:
            raise AssertionError(f"rule {rid}: unknown check {check!r}")
        found += [f"{rid}: {where}" for where in bad]
    return found


@pytest.fixture(scope="module")
def configurations() -> dict[str, dict]:
    """The Configurations the collection renders: devices, consumable capacity, and MIG memory counters."""
    dgx = topology_of("dgx-h100")
    mig = {"h1": {"mode": "dynamic"}}
    objects = burst.render({}, "s", "1.36", None, mig=mig, topologies={"h1": dgx})["objects"]
    site = schedulers_mig.site(mig, {"h1": dgx})
    site["published"] = schedulers_mig.published_per_gpu({"h1": dgx}, mig)
    raw = {
        "engine": "kueue",
        "teams": [
            {"name": "inference", "tier": "production", "templates": ["mig-1g-10gb"], "quotas": {"mig": "160Gi"}},
            {"name": "training", "tier": "production", "quotas": {"gpu": 2, "nic": 2}},
        ],
    }
    keys = claims.settings({})["classes"]
    counted = teams.render(raw, "s", objects, "1.36", class_keys=keys, mig=site)["kueue"]["configuration"]
    return {
        "devices": rich()["configuration"],
        "capacity": render(CAPACITY_TEAMS)["configuration"],
        "counter": counted,
    }


def test_every_rule_names_its_upstream_file_and_function_at_a_version():
    assert RULES["upstream"] == {"repository": "kubernetes-sigs/kueue", "version": "v0.19.2"}
    for rule in RULES["rules"]:
        assert rule["source"]["file"].startswith("pkg/") and rule["source"]["function"], rule["id"]
    assert RULES["charge"]["source"] == {"file": "pkg/dra/counters.go", "function": "computeCounterCharges"}


def test_the_rendered_configurations_keep_every_rule_of_upstream(configurations):
    assert configurations["counter"]["resources"]["deviceClassMappings"][-1]["sources"][0]["counter"]["name"]
    for name, cfg in configurations.items():
        assert violations(cfg) == [], name


def _mutate(cfg: dict, how: str) -> dict:
    cfg = copy.deepcopy(cfg)
    mappings = cfg["resources"]["deviceClassMappings"]
    last = mappings[-1]
    if how == "too-many-classes":
        last["deviceClassNames"] = [f"class-{i}" for i in range(9)]
    elif how == "class-twice":
        mappings.append({"name": "example.com/again", "deviceClassNames": [last["deviceClassNames"][0]]})
    elif how == "counter-gate-off":
        cfg.setdefault("featureGates", {})["KueueDRAIntegrationPartitionableDevices"] = False
    elif how == "bad-counter-name":
        last["sources"][0]["counter"]["name"] = "Memory_GiB"
    elif how == "long-driver":
        last["sources"][0]["counter"]["driver"] = "d" * 60 + ".example.com"
    elif how == "no-selector":
        last["sources"][0]["counter"]["deviceSelector"]["cel"]["expression"] = ""
    elif how == "counter-and-capacity":
        last["sources"].append({"capacity": dict(last["sources"][0]["counter"])})
    elif how == "dra-off":
        cfg.setdefault("featureGates", {})["KueueDRAIntegration"] = False
    elif how == "strategy":
        cfg["resources"]["quotaCheckStrategy"] = "Sometimes"
    return cfg


MUTATIONS = {
    "too-many-classes": "mapping-classes-at-most-8",
    "class-twice": "class-in-one-mapping",
    "counter-gate-off": "counter-needs-gate",
    "bad-counter-name": "counter-name-dns-label",
    "long-driver": "source-driver",
    "no-selector": "source-selector-required",
    "counter-and-capacity": "no-counter-and-capacity-in-one-mapping",
    "dra-off": "dra-gates-need-kueue-dra-integration",
    "strategy": "quota-check-strategy-values",
}


@pytest.mark.parametrize("how", sorted(MUTATIONS))
def test_upstreams_rules_catch_each_broken_counter_mapping_and_our_validation_agrees(configurations, how):
    broken = _mutate(configurations["counter"], how)
    found = violations(broken)
    assert any(v.startswith(MUTATIONS[how] + ":") for v in found), found
    # the collection's own check refuses it too (it must never let through what upstream refuses)
    assert kueue_checks.validate_configuration(broken) != []


def test_kueues_charge_and_minimum_are_the_ones_the_collection_states():
    text = (Path(__file__).resolve().parents[7] / "docs" / "teams.md").read_text(encoding="utf-8")
    assert kueue_mig.KUBERNETES_MINIMUM == RULES["counter_quota_kubernetes_minimum"]
    assert f"Kubernetes {RULES['counter_quota_kubernetes_minimum']}" in text
    assert "largest" in RULES["charge"]["rule"] and "largest counter value of the matching devices" in text
