# SPDX-License-Identifier: Apache-2.0
"""aligned.dra.site_settings in a real ansible-playbook run: per site, on the controller, as the roles
call it. Each setting is the site's first host's value (null included), else a given default, else the
role's default, templated for the host the task runs for - never that host's inventory value when it is
of another site (``hostvars[first].NAME | default(NAME)`` read that: site B got site A's settings). In
a playbook, the play's own value stands, another site's host's value is refused by name, and a wrong
name fails the task naming it.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from ansible_collections.aligned.dra.tests.support.harnesses.playbook_runs import (
    recap,
    run_playbook,
    write_inventory,
    write_play,
)

NAMES = ("aligned_dra_claims", "aligned_dra_teams", "aligned_dra_jobs", "aligned_dra_kubernetes_version")
ROLE_DEFAULTS = {
    "aligned_dra_claims": {"role": True},
    # a template, rendered for the host the task runs for
    "aligned_dra_teams": "{{ {'for': inventory_hostname} }}",
    "aligned_dra_jobs": [],
    "aligned_dra_kubernetes_version": "1.35",
}


def jinja(expression: str) -> str:
    return "{{ " + expression + " }}"


def site_task(site: str) -> dict:
    """Both reads of ``site``'s settings (the lookup, and the expressions it replaces), kept per site."""
    first = f"groups['{site}'] | sort | first"
    old = ", ".join(f"'{name}': hostvars[_first].{name} | default({name})" for name in NAMES)
    quoted = ", ".join(f"'{name}'" for name in NAMES)
    return {
        "name": f"The settings of {site}",
        "ansible.builtin.set_fact": {
            "read": jinja(f"read | default({{}}) | combine({{'{site}': {{'new': _new, 'old': _old}}}})"),
        },
        "vars": {
            "_first": jinja(first),
            "_new": jinja(f"lookup('aligned.dra.site_settings', {quoted}, host=_first)"),
            "_old": jinja("{" + old + "}"),
        },
        "delegate_to": "localhost",
        "run_once": True,
    }


def refused(name: str, expression: str) -> dict:
    return {
        "name": name,
        "ansible.builtin.set_fact": {"never": jinja(expression)},
        "register": "refusal_" + name.split()[0],
        "ignore_errors": True,
        "run_once": True,
    }


def playbook_tasks(tmp_path: Path) -> list[dict]:
    """Outside a role: west's settings, for e1 (of east), with the play's own version."""
    return [
        {
            "name": "The play's own value stands",
            "ansible.builtin.set_fact": {
                "played": "{{ lookup('aligned.dra.site_settings', 'aligned_dra_kubernetes_version', host='w1') }}"
            },
            "run_once": True,
        },
        refused("leaked claims", "lookup('aligned.dra.site_settings', 'aligned_dra_claims', host='w1')"),
        {
            "name": "Keep what the play read",
            "ansible.builtin.copy": {
                "content": "{{ {'played': played, 'leaked': refusal_leaked.msg | default('')} | to_json }}",
                "dest": str(tmp_path / "played.json"),
                "mode": "0644",
            },
            "delegate_to": "localhost",
            "run_once": True,
        },
    ]


def test_the_lookup_reads_the_site_or_the_roles_default_never_another_sites_and_refuses_wrong_names(tmp_path: Path):
    role = tmp_path / "roles" / "reader"
    (role / "defaults").mkdir(parents=True)
    (role / "defaults" / "main.yml").write_text(yaml.safe_dump(ROLE_DEFAULTS))
    (role / "tasks").mkdir()
    tasks = [
        site_task("east"),
        site_task("west"),
        {
            "name": "A default given replaces the task's own",
            "ansible.builtin.set_fact": {
                "given": "{{ lookup('aligned.dra.site_settings', 'aligned_dra_jobs', 'aligned_dra_placement_levels', "
                "host='w1', defaults={'aligned_dra_jobs': ['given'], 'aligned_dra_placement_levels': []}) }}"
            },
            "run_once": True,
        },
        refused("unknown name", "lookup('aligned.dra.site_settings', 'aligned_dra_claim', host='e1')"),
        refused("unset setting", "lookup('aligned.dra.site_settings', 'aligned_dra_rails', host='e1')"),
        refused("stranger host", "lookup('aligned.dra.site_settings', 'aligned_dra_jobs', host='nobody')"),
        {
            "name": "Keep what was read",
            "ansible.builtin.copy": {
                "content": "{{ {'read': read, 'given': given, 'refusals': [refusal_unknown.msg, refusal_unset.msg,"
                " refusal_stranger.msg]} | to_json }}",
                "dest": str(tmp_path / "read.json"),
                "mode": "0644",
            },
            "delegate_to": "localhost",
            "run_once": True,
        },
    ]
    (role / "tasks" / "main.yml").write_text(yaml.safe_dump(tasks))
    # east sets its claims (and null teams) in its group; west sets nothing; w1 and e2 set their own jobs
    inventory = write_inventory(
        tmp_path / "inventory.yml",
        {"e1": {}, "e2": {"aligned_dra_jobs": ["e2's"]}, "w1": {"aligned_dra_jobs": ["w1's"]}, "w2": {}},
        {},
        groups={
            "east": {
                "hosts": {"e1": None, "e2": None},
                "vars": {"aligned_dra_site": "east", "aligned_dra_claims": {"east": 1}, "aligned_dra_teams": None},
            },
            "west": {"hosts": {"w1": None, "w2": None}, "vars": {"aligned_dra_site": "west"}},
        },
    )
    play = write_play(
        tmp_path / "play.yml",
        [
            {"hosts": "aligned_dra_nodes", "gather_facts": False, "roles": [str(role)]},
            {
                "hosts": "aligned_dra_nodes",
                "gather_facts": False,
                "vars": {"aligned_dra_kubernetes_version": "1.34"},
                "tasks": playbook_tasks(tmp_path),
            },
        ],
    )

    run = run_playbook(inventory, play)

    assert recap(run.stdout)["failed"] == 0, run.output
    result = json.loads((tmp_path / "read.json").read_text())
    assert result["read"]["east"]["new"] == result["read"]["east"]["old"]
    assert result["read"]["east"]["new"]["aligned_dra_jobs"] == []
    # the task runs for e1 (the play's first host, of east): west's first host (w1) sets only its jobs,
    # so the rest is the role's defaults (teams rendered for e1), not the east group's claims and null
    # teams, which the old expressions read
    west = result["read"]["west"]
    assert west["new"] == {
        "aligned_dra_claims": {"role": True},
        "aligned_dra_teams": {"for": "e1"},
        "aligned_dra_jobs": ["w1's"],
        "aligned_dra_kubernetes_version": "1.35",
    }
    assert (west["old"]["aligned_dra_claims"], west["old"]["aligned_dra_teams"]) == ({"east": 1}, None)
    assert result["given"] == {"aligned_dra_jobs": ["w1's"], "aligned_dra_placement_levels": []}
    unknown, unset, stranger = result["refusals"]
    assert "unknown setting 'aligned_dra_claim'" in unknown
    assert "aligned_dra_rails is set neither on e1 (the site's first host) nor here" in unset
    assert "host must be an inventory host (got 'nobody')" in stranger
    played = json.loads((tmp_path / "played.json").read_text())
    assert played["played"] == {"aligned_dra_kubernetes_version": "1.34"}
    assert "aligned_dra_claims is not set on w1 (the site's first host) and has no default here" in played["leaked"]
    assert "the value here is e1's own" in played["leaked"]
    assert "set aligned_dra_claims for the site (its group_vars) or pass defaults=" in played["leaked"]
