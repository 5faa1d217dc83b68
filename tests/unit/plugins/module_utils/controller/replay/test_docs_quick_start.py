# SPDX-License-Identifier: Apache-2.0
"""The Quick start of docs/replay.md prints what the demo prints: its sample lines are pinned.

The demo's site ai-west (inventories/demo) is built as ``site.yml`` builds it, without the playbook: each
host's sysfs tree (``aligned_dra_fixture``, the trees scripts/demo.sh materialises) probed, the claim
catalogue of the site's group_vars rendered with every host's rail rule, and its ``plan.json`` written by
the ``aligned.dra.plan`` module as the claims role calls it. The inventory's own trace
(``aligned_dra_replay.trace``, relative to the inventory) is then replayed on that plan by the
``aligned.dra.replay`` module with both policies and the replay role's defaults, and each result is
printed with the replay role's own message template (roles/replay/tasks/site.yml). The lines must be the
Quick start's, as the page wraps them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import render as claims
from ansible_collections.aligned.dra.plugins.modules import plan as plan_module
from ansible_collections.aligned.dra.plugins.modules import replay as replay_module
from ansible_collections.aligned.dra.tests.support.harnesses.role_messages import role_message, run_module
from ansible_collections.aligned.dra.tests.support.sites.report_sites import topology_of

REPO = Path(__file__).resolve().parents[6]
PAGE = REPO / "docs" / "replay.md"
DEMO = REPO / "inventories" / "demo"
GROUP = "ai_west"
ROLE_TASKS = REPO / "roles" / "replay" / "tasks" / "site.yml"
SAY_TASK = "Replay | Pods placed and GPUs taken per policy"


def demo_site() -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """``(the site group's variables, {host: its variables})`` of the demo's ai_west, group_vars merged."""
    inventory = yaml.safe_load((DEMO / "hosts.yml").read_text(encoding="utf-8"))
    hosts = inventory["aligned_dra_nodes"]["children"][GROUP]["hosts"]
    shared = yaml.safe_load((DEMO / "group_vars" / "all.yml").read_text(encoding="utf-8"))
    shared.update(yaml.safe_load((DEMO / "group_vars" / f"{GROUP}.yml").read_text(encoding="utf-8")))
    return shared, {host: {**shared, **(own or {})} for host, own in hosts.items()}


def write_plan(shared: dict[str, Any], hostvars: dict[str, dict[str, Any]], dest: Path) -> None:
    """The site's plan.json, by the plan module with the arguments the claims role gives it."""
    site, settings = shared["aligned_dra_site"], shared.get("aligned_dra_claims") or {}
    rules = {host: variables["aligned_dra_rails"] for host, variables in hostvars.items()}
    rendered = claims.render(
        settings, site, shared["aligned_dra_kubernetes_version"], shared.get("aligned_dra_feature_gates") or {},
        rail_rules=rules,
    )  # fmt: skip
    run_module(
        plan_module,
        {
            "site": site,
            "kubernetes_version": rendered["minor"],
            "objects": rendered["objects"],
            "required": rendered["required"],
            "topologies": {host: topology_of(variables["aligned_dra_fixture"]) for host, variables in hostvars.items()},
            "device_options": shared.get("aligned_dra_device_options") or {},
            "rail_rules": rules,
            "dest": str(dest),
            "return_plan": "summary",
        },
    )


def printed(site: str, replay: dict[str, Any]) -> str:
    """The replay role's line for one policy, rendered as Ansible renders it."""
    return role_message(ROLE_TASKS, SAY_TASK, {"aligned_dra_replay_site": site, "item": replay})


def quick_start_lines(site: str) -> list[str]:
    """The sample lines of the Quick start, each wrapped line joined to the one it continues."""
    text = PAGE.read_text(encoding="utf-8")
    body = re.search(r"^## Quick start\n(.*?)(?=^## |\Z)", text, re.M | re.S).group(1)
    blocks = [c for info, c in re.findall(r"^```(\w*)\n(.*?)^```$", body, re.M | re.S) if c.startswith(f"{site}: ")]
    assert len(blocks) == 1, "the Quick start shows one block of the demo's lines"
    return re.sub(r"\n\s+", " ", blocks[0].strip()).splitlines()


def test_the_quick_start_lines_are_what_the_demo_prints(tmp_path):
    shared, hostvars = demo_site()
    site, conf = shared["aligned_dra_site"], shared["aligned_dra_replay"]
    # the replay role's GPU class and fractional template are the module's defaults where the claims name none
    assert not {"classes", "gpu_driver"} & set(shared.get("aligned_dra_claims") or {})
    assert "name" not in (shared["aligned_dra_claims"].get("templates") or {}).get("fractional_gpu", {})
    plan = tmp_path / site / "plan.json"
    plan.parent.mkdir()
    write_plan(shared, hostvars, plan)
    trace = DEMO / conf["trace"]  # the inventory's own file: relative to the inventory
    lines = []
    for policy in ("whole", "fractional"):
        args = {
            "trace": str(trace),
            "trace_format": conf.get("trace_format", "openb"),
            "plan": str(plan),
            "policy": policy,
            "order": conf.get("order", "pack"),
            "mode": conf.get("mode", "timeline"),
        }
        result = run_module(replay_module, args)["replay"]
        assert result["nodes"]["count"] == len(hostvars) and result["policy_applied"] == policy
        lines.append(printed(site, result))
    assert lines == quick_start_lines(site)
