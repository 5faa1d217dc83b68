# SPDX-License-Identifier: Apache-2.0
"""The validation stage's MIG part: ``aligned_dra_mig`` of every host, per site (:mod:`controller.mig.checks`).

:func:`problems` adds the MIG problems to those :func:`validate.validate` found (a host whose
``aligned_dra_mig`` broke its argument spec is not checked again); :func:`mig_hosts` names the hosts whose
mode is not ``off``, which ``playbooks/mig.yml`` rolls (the validation read every host's settings once
already, so the playbook reads none again).

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.mig import checks
from ansible_collections.aligned.dra.plugins.module_utils.controller.validation import validate
from ansible_collections.aligned.dra.plugins.module_utils.dra import gates as dra_gates
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


def mig_hosts(hosts: list[str], setting: Callable[[str, str, Any], Any]) -> list[str]:
    """The hosts whose ``aligned_dra_mig.mode`` is ``static`` or ``dynamic``, in the order given, less those whose
    ``configure_nodes`` is false (their MIG is left to the driver or to another tool: the MIG stage skips them)."""
    found = []
    for host in hosts:
        mig = setting(host, checks.VARIABLE, None)
        if not isinstance(mig, dict) or mig.get("configure_nodes", True) is False:
            continue
        if mig.get("mode", "off") not in ("off", None, False):
            found.append(host)
    return found


def problems(
    found: list[validate.Problem], hosts: list[str], sites: dict[str, str], setting: Callable[[str, str, Any], Any]
) -> list[validate.Problem]:
    """``found`` and the MIG problems of every site, sorted."""
    flagged = {problem.host for problem in found if problem.variable == checks.VARIABLE}
    by_site: dict[str, list[str]] = {}
    for host in hosts:
        if host not in flagged:
            by_site.setdefault(sites.get(host, ""), []).append(host)
    more = []
    for site, members in sorted(by_site.items()):
        first = members[0]
        gates = setting(first, "aligned_dra_feature_gates", None) or {}
        try:
            minor = dra_gates.minor_of(setting(first, "aligned_dra_kubernetes_version", None) or validate.DEFAULT_MINOR)
            shares = dra_gates.shares_gpus(minor, gates if isinstance(gates, dict) else {})
        except dra.DeviceModelError:
            minor, shares = None, False  # said once per site by the site checks
        for host, variable, value, reason in checks.site_problems(site, members, setting, minor, gates, shares):
            more.append(validate.Problem(host, variable, validate.show(value), reason))
    return sorted(set(found) | set(more))
