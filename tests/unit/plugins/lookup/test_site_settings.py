# SPDX-License-Identifier: Apache-2.0
"""aligned.dra.site_settings: its documentation names the settings it knows, each is one the roles
document, and no role or playbook reads a site setting from a host's variables past it (the old
``hostvars[first].NAME | default(NAME)``, inline or through an alias of ``hostvars[...]``).

How the lookup reads (first host, default, the caller's own) is tested in
tests/unit/plugins/module_utils/controller/inputs/test_site.py, and in a real run in
tests/integration/plugins/lookup/test_site_settings.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from ansible_collections.aligned.dra.plugins.lookup import site_settings
from ansible_collections.aligned.dra.plugins.module_utils.controller.inputs.site import RUN_FACTS, SITE_SETTINGS

REPO = Path(__file__).resolve().parents[4]
KNOWN = SITE_SETTINGS + RUN_FACTS
_NAME = "|".join(KNOWN)
# hostvars[...] (brackets inside allowed once), then .NAME or ['NAME']
_DIRECT = re.compile(r"hostvars\[(?:[^\[\]]|\[[^\[\]]*\])+\]\s*(?:\.|\[\s*['\"])(" + _NAME + r")\b")
# an alias bound to one host's variables: `_first: "{{ hostvars[...] }}"`
_ALIAS = re.compile(r"^\s*(\w+):\s*[\"']?\{\{\s*hostvars\[(?:[^\[\]]|\[[^\[\]]*\])+\]\s*\}\}", re.MULTILINE)


def reads_past_the_lookup(text: str) -> list[str]:
    """The site settings ``text`` (a role's or playbook's YAML) reads from a host's variables directly."""
    found = [match.group(1) for match in _DIRECT.finditer(text)]
    for alias in sorted(set(_ALIAS.findall(text))):
        found += re.findall(r"\b" + re.escape(alias) + r"(?:\.|\[\s*['\"])(" + _NAME + r")\b", text)
    return found


def yaml_files() -> list[Path]:
    return sorted(p for tree in ("roles", "playbooks") for p in (REPO / tree).rglob("*.yml"))


def test_no_role_or_playbook_reads_a_site_setting_past_the_lookup():
    offenders = {str(p.relative_to(REPO)): reads_past_the_lookup(p.read_text()) for p in yaml_files()}
    assert len(offenders) > 50
    assert {path: names for path, names in offenders.items() if names} == {}


def test_the_check_sees_each_old_form():
    assert reads_past_the_lookup(
        'x: "{{ hostvars[aligned_dra_claims_hosts[0]].aligned_dra_claims | default(aligned_dra_claims) }}"\n'
        "y: \"{{ hostvars[aligned_dra_what_if_host]['aligned_dra_rails'] | default(omit, true) }}\"\n"
    ) == ["aligned_dra_claims", "aligned_dra_rails"]
    aliased = (
        '    kubernetes_version: "{{ _first.aligned_dra_kubernetes_version | default(aligned_dra_kubernetes_version) }}"\n'
        "  vars:\n"
        '    _first: "{{ hostvars[aligned_dra_teams_hosts[0]] }}"\n'
    )
    assert reads_past_the_lookup(aliased) == ["aligned_dra_kubernetes_version"]
    # each host's own variables (a loop over hosts) and names that are no site setting are not site reads
    assert reads_past_the_lookup("{{ hostvars[host].aligned_dra_driver_node_name | default(host) }}") == []
    assert reads_past_the_lookup('_vars: "{{ hostvars[h] }}"\nx: "{{ _vars.inventory_dir }}"\n') == []


def test_the_documentation_names_every_known_setting_and_no_other():
    doc = yaml.safe_load(site_settings.DOCUMENTATION)
    text = " ".join(doc["options"]["_terms"]["description"])
    named = re.findall(r"C\((aligned_dra_\w+)\)", text.split("The known ones are", 1)[1])
    assert sorted(named) == sorted(KNOWN)
    assert sorted(doc["options"]) == ["_terms", "defaults", "host"]


def test_every_site_setting_is_documented_by_a_role_and_every_fact_set_by_one():
    documented = set()
    for spec in (REPO / "roles").glob("*/meta/argument_specs.yml"):
        for entry in yaml.safe_load(spec.read_text())["argument_specs"].values():
            documented |= set(entry.get("options", {}))
    assert set(SITE_SETTINGS) <= documented, sorted(set(SITE_SETTINGS) - documented)
    tasks = "\n".join(p.read_text() for p in (REPO / "roles").glob("*/tasks/*.yml"))
    for fact in RUN_FACTS:
        assert re.search(r"set_fact:\n\s+" + fact + ":", tasks), fact
        assert fact not in documented
