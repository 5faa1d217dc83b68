# SPDX-License-Identifier: Apache-2.0
"""The validation stage's one entry: :func:`run`, which the ``validate`` module and its action call.

The checks are :func:`validate.validate`'s; :func:`run` gives the result both
return (``changed``, ``hosts``, ``sites``, ``problems``, ``site_inputs``, ``mig_hosts``) and the
message that says every problem, each caller reading the hosts' variables its
own way (the module from its ``settings`` argument, the action from ``hostvars``).
``site_inputs`` is what ``site.yml`` compares with the last run per site
(:mod:`stages.site_state`), made from the same one read of each host.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

import os

from ansible_collections.aligned.dra.plugins.module_utils.controller.stages import site_state
from ansible_collections.aligned.dra.plugins.module_utils.controller.validation import validate, validate_mig

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any


def run(
    hosts: list[str],
    names: Callable[[str], Iterable[str]],
    setting: Callable[[str, str, Any], Any],
    stages: Iterable[str],
) -> tuple[dict[str, Any], str | None]:
    """``(result, message)``: what the stage returns, and the message of its problems (None when there are none).

    ``names(host)`` lists a host's variable names and ``setting(host, name,
    default)`` reads one; ``stages`` are the stages of this run
    (:data:`validate.STAGES`).
    """
    read: dict[str, dict[str, Any]] = {}

    def kept(host: str, name: str, default: Any) -> Any:
        value = setting(host, name, default)
        read.setdefault(host, {})[name] = value
        return value

    problems, sites = validate.validate(hosts, names, kept, stages)

    def known(host: str, name: str, default: Any) -> Any:
        return read.get(host, {}).get(name, default)

    if "mig" in stages:
        problems = validate_mig.problems(problems, hosts, sites, known)
    result = {
        "changed": False,
        "hosts": len(hosts),
        "sites": sorted(set(sites.values())),
        "problems": [problem.__dict__.copy() for problem in problems],
        "site_inputs": {} if problems else site_inputs(hosts, sites, read, setting),
        # the hosts playbooks/mig.yml rolls: their aligned_dra_mig.mode is not off
        "mig_hosts": validate_mig.mig_hosts(hosts, known),
    }
    return result, validate.report(problems, sites) if problems else None


def site_inputs(
    hosts: list[str],
    sites: dict[str, str],
    read: dict[str, dict[str, Any]],
    setting: Callable[[str, str, Any], Any],
) -> dict[str, dict[str, Any]]:
    """Per site, what :func:`site_state.run` compares: its settings' digest, inventory folders, the files the
    settings name, whether it reads the cluster or Prometheus, its output directory, its hosts, and which of
    them run a driver that reads the cluster on the node's behalf."""
    members: dict[str, list[str]] = {}
    for host in hosts:
        members.setdefault(sites[host], []).append(host)
    found = {}
    for site, names in members.items():
        settings = [
            (host, {k: v for k, v in read.get(host, {}).items() if k not in validate.RUNTIME_NAMES}) for host in names
        ]
        folders = [str(folder) for folder in (setting(host, "inventory_dir", None) for host in names) if folder]
        output_dir = settings[0][1].get("aligned_dra_output_dir") or os.path.join(
            folders[0] if folders else ".", "output"
        )
        found[site] = {
            "settings": site_state.settings_digest(settings, folders),
            "inventory_dirs": sorted(set(folders)),
            "files": sorted(set().union(*(site_state.paths_in(values) for _host, values in settings))),
            "live": next((reason for _host, values in settings if (reason := site_state.live_reason(values))), None),
            "output_dir": str(output_dir),
            "hosts": names,
            "nodes_live": {
                host: reason
                for host in names
                if (
                    reason := site_state.node_live_reason(lambda name, default, host=host: setting(host, name, default))
                )
            },
        }
    return found
