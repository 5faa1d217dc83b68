# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Filters that turn per-node topology facts into site summaries."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Mapping
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.aligned.dra.plugins.module_utils.controller.inputs.site import kubernetes_node_name, site_of
from ansible_collections.aligned.dra.plugins.module_utils.controller.topology import fact as topology_fact
from ansible_collections.aligned.dra.plugins.module_utils.controller.topology.accounting import (
    node_accounting,
    node_counts_line,
)
from ansible_collections.aligned.dra.plugins.module_utils.controller.topology.summary import (
    node_summary,
    site_summary_markdown,
    site_summary_of,
)
from ansible_collections.aligned.dra.plugins.module_utils.node.topology import LEVELS


def topology_site_summaries(
    hostvars: Mapping[str, Any],
    hosts: Iterable[str],
    warn_levels: Iterable[str] = ("SYS",),
    accounting: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Group ``hosts`` by ``aligned_dra_site`` and summarise each site.

    Each host's ``aligned_dra_rails`` is read against its probe, with its
    Kubernetes node name (``aligned_dra_driver_node_name``, default the host):
    ``per_node.<host>.rails`` and the site's ``rails``.

    With ``accounting`` (what ``topology_node_accounting`` returns), the nodes
    it lists as failed are left out whatever facts they have, every site of it
    gets a summary (one whose nodes all failed too), with its ``nodes_failed``
    and ``node_counts``.
    """
    warn_levels = list(warn_levels)
    unknown = [level for level in warn_levels if level not in LEVELS]
    if unknown:
        raise AnsibleFilterError(f"warn_levels: unknown level(s) {unknown}; use {list(LEVELS)}")
    accounting = accounting or {}
    failed = {host for entry in accounting.values() for host in entry["nodes_failed"]}
    sites: dict[str, dict[str, Any]] = {site: {} for site in accounting}
    for host in hosts:
        if host in failed:
            continue
        facts = hostvars[host]
        fact = facts.get("aligned_dra_topology")
        if fact is None:
            raise AnsibleFilterError(f"{host}: no aligned_dra_topology fact; was the probe skipped?")
        # one whole topology at a time: each node is summarised as it is read
        try:
            topology = topology_fact.full_topology(host, fact)
        except topology_fact.TopologyFactError as exc:
            raise AnsibleFilterError(str(exc)) from None
        sites.setdefault(site_of(facts), {})[host] = node_summary(
            topology, warn_levels, rails=facts.get("aligned_dra_rails"), node_name=kubernetes_node_name(host, facts)
        )
    summaries = {site: site_summary_of(site, nodes) for site, nodes in sorted(sites.items())}
    for site, entry in accounting.items():
        summaries[site]["nodes_failed"] = entry["nodes_failed"]
        summaries[site]["node_counts"] = entry["node_counts"]
    return summaries


def topology_node_accounting(
    hostvars: Mapping[str, Any],
    hosts: Iterable[str],
    ok_hosts: Iterable[str],
    stage: str,
    output_dir: str | None = None,
) -> dict[str, Any]:
    """Per site of ``hosts`` (the nodes the play targets): which failed, in which stage, and the counts.

    A node's ``aligned_dra_node_failure`` fact (``state``, ``stage``, ``task``,
    ``error``) makes it failed; a node of ``hosts`` that is not in ``ok_hosts``
    and has no such fact is unreachable in ``stage``. A failed node's facts file
    ``<output_dir>/<site>/nodes/<host>.json`` from an earlier run is reported with
    its age (``stale_facts``), never used.
    """
    ok = set(ok_hosts)
    sites: dict[str, list[str]] = {}
    failures: dict[str, dict[str, Any]] = {}
    for host in hosts:
        facts = hostvars[host]
        sites.setdefault(site_of(facts), []).append(host)
        failure = facts.get("aligned_dra_node_failure")
        if failure is not None:
            if not isinstance(failure, Mapping):
                raise AnsibleFilterError(f"{host}: aligned_dra_node_failure must be a dict (got {failure!r})")
            failures[host] = dict(failure)
    now = time.time()
    result = {}
    for site, site_hosts in sorted(sites.items()):
        stale = {}
        if output_dir:
            for host in site_hosts:
                if host in failures or host not in ok:
                    try:
                        stale[host] = int(
                            now - os.stat(os.path.join(output_dir, site, "nodes", f"{host}.json")).st_mtime
                        )
                    except OSError:
                        pass
        try:
            entry = node_accounting(site_hosts, ok, failures, stage, stale)
        except ValueError as exc:
            raise AnsibleFilterError(str(exc)) from None
        entry["line"] = node_counts_line(site, entry["node_counts"])
        # unreachable nodes without a recorded failure: the caller may record them
        entry["unrecorded"] = [host for host in entry["nodes_failed"] if host not in failures]
        result[site] = entry
    return result


def topology_site_index(summaries: Mapping[str, Any], output_dir: str | None = None) -> dict[str, Any]:
    """Index of sites: counts and where each site's files are (relative paths).

    With ``output_dir``, the sites of the ``index.json`` already there that
    this run did not summarise (a run limited to other sites, ``--limit``)
    stay listed as they were, as long as their ``summary.json`` is still there.
    """
    entries = {
        site: {
            "site": site,
            "nodes": summary["nodes"],
            "gpus": summary["gpus"],
            "nics": summary["nics"],
            "warnings": len(summary["warnings"]),
            "summary": f"{site}/summary.json",
            "summary_markdown": f"{site}/summary.md",
            "node_files": [f"{site}/nodes/{node}.json" for node in summary["per_node"]],
            **({"node_counts": summary["node_counts"]} if "node_counts" in summary else {}),
        }
        for site, summary in summaries.items()
    }
    for entry in _earlier_index(output_dir) if output_dir else []:
        site = entry.get("site") if isinstance(entry, Mapping) else None
        if (
            isinstance(site, str)
            and site not in entries
            and "/" not in site
            and os.path.isfile(os.path.join(output_dir, site, "summary.json"))
        ):
            entries[site] = dict(entry)
    return {"sites": [entries[site] for site in sorted(entries)]}


def _earlier_index(output_dir: str) -> list[Any]:
    """The sites of ``<output_dir>/index.json``; none when it is missing or not an index."""
    try:
        with open(os.path.join(output_dir, "index.json"), encoding="utf-8") as handle:
            sites = json.load(handle).get("sites")
    except (OSError, ValueError, AttributeError):
        return []
    return sites if isinstance(sites, list) else []


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "topology_site_summaries": topology_site_summaries,
            "topology_site_index": topology_site_index,
            "topology_node_accounting": topology_node_accounting,
            "topology_summary_markdown": site_summary_markdown,
        }
