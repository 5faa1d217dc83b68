# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Filters that turn per-node topology facts into site summaries."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.aligned.dra.plugins.module_utils.topology import (
    LEVELS,
    site_summary,
    site_summary_markdown,
)


def topology_site_summaries(
    hostvars: Mapping[str, Any], hosts: Iterable[str], warn_levels: Iterable[str] = ("SYS",)
) -> dict[str, Any]:
    """Group ``hosts`` by ``aligned_dra_site`` and summarise each site."""
    warn_levels = list(warn_levels)
    unknown = [level for level in warn_levels if level not in LEVELS]
    if unknown:
        raise AnsibleFilterError(f"warn_levels: unknown level(s) {unknown}; use {list(LEVELS)}")
    sites: dict[str, dict[str, Any]] = {}
    for host in hosts:
        facts = hostvars[host]
        topology = facts.get("aligned_dra_topology")
        if topology is None:
            raise AnsibleFilterError(f"{host}: no aligned_dra_topology fact; was the probe skipped?")
        sites.setdefault(str(facts.get("aligned_dra_site", "default")), {})[host] = topology
    return {site: site_summary(site, nodes, warn_levels) for site, nodes in sorted(sites.items())}


def topology_site_index(summaries: Mapping[str, Any]) -> dict[str, Any]:
    """Index of sites: counts and where each site's files are (relative paths)."""
    return {
        "sites": [
            {
                "site": site,
                "nodes": summary["nodes"],
                "gpus": summary["gpus"],
                "nics": summary["nics"],
                "warnings": len(summary["warnings"]),
                "summary": f"{site}/summary.json",
                "summary_markdown": f"{site}/summary.md",
                "node_files": [f"{site}/nodes/{node}.json" for node in summary["per_node"]],
            }
            for site, summary in sorted(summaries.items())
        ]
    }


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "topology_site_summaries": topology_site_summaries,
            "topology_site_index": topology_site_index,
            "topology_summary_markdown": site_summary_markdown,
        }
