# SPDX-License-Identifier: Apache-2.0
"""Summaries of probed nodes and sites (used by the topology role's site summary and the report).

Controller-side: this file, and the device model it uses, travel to no node
with the probe.
"""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.fabric import rails_summary
from ansible_collections.aligned.dra.plugins.module_utils.controller.topology import gpudirect
from ansible_collections.aligned.dra.plugins.module_utils.dra import device_model
from ansible_collections.aligned.dra.plugins.module_utils.node.topology import GPU_KINDS, LEVELS, NIC_KINDS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any


def node_summary(
    topology: dict[str, Any],
    warn_levels: Iterable[str] = ("SYS",),
    device_options: dict[str, Any] | None = None,
    rails: Any = None,
    node_name: str = "node",
) -> dict[str, Any]:
    """Counts, best GPU<->NIC level per GPU, rails and warnings of one node.

    A GPU whose nearest physical NIC is at one of ``warn_levels``, or that has
    no NIC at all, adds a warning to the node's probe warnings.

    ``gpus``, ``nics`` and ``best_level_per_gpu`` count what the probe found
    (every GPU/accelerator, every physical NIC). ``accelerators``,
    ``rdma_nics`` and ``best_rdma_level_per_accelerator`` are the planner's
    view from :func:`device_model.node_devices` (what the driver publishes
    with ``device_options``): the report's counts and alignment score.

    ``rails`` is the node's ``aligned_dra_rails`` (``None``: no rule) and
    ``node_name`` its Kubernetes node name (a per-node map is keyed by it):
    ``rails`` in the result gives each RDMA NIC's rail or why it is on none
    (:func:`rails_summary.node_rails_summary`); what the validation would refuse is
    in the warnings too.

    Levels are those the traffic flows at: a GPU x NIC pair whose
    peer-to-peer path goes through the host bridge counts at PHB
    (:func:`gpudirect.flowing_nearest`). Where the node's facts have the
    probe's ``p2p`` or ``gpudirect``, ``gpudirect`` is the node's GPUDirect
    RDMA (:func:`gpudirect.node_gpudirect`); facts without them give the
    summary they gave before.
    """
    warn = set(warn_levels)
    model = device_model.node_devices(topology, device_options)
    devices = topology.get("devices", [])
    gpus = [d for d in devices if d["kind"] in GPU_KINDS]
    nics = [d for d in devices if d["kind"] in NIC_KINDS and not d.get("physfn")]
    nearest = gpudirect.flowing_nearest(topology)
    best = {}
    warnings = list(topology.get("warnings", []))
    for gpu in gpus:
        bdf = gpu["pci_address"]
        entry = nearest.get(bdf) or {"level": None, "nics": []}
        best[bdf] = entry
        if entry["level"] is None:
            warnings.append(f"{gpu['kind']} {bdf} has no NIC on this node")
        elif entry["level"] in warn:
            warnings.append(f"{gpu['kind']} {bdf} has no NIC closer than {entry['level']}")
    levels = [e["level"] for e in best.values()]
    rails_entry = rails_summary.node_rails_summary(topology, rails, node_name)
    if rails_entry is not None:
        warnings.extend(f"rails: {problem}" for problem in rails_entry["problems"])
    found = {
        "hostname": topology.get("hostname"),
        "numa_nodes": len(topology.get("numa_nodes", [])),
        "gpus": len(gpus),
        "nics": len(nics),
        "vfs": sum(1 for d in devices if d.get("physfn")),
        "best_level_per_gpu": best,
        "level_histogram": {lv: levels.count(lv) for lv in LEVELS if lv in levels},
        "warnings": warnings,
        "accelerators": {key: model["counts"][key] for key in ("gpu", "ve", "accelerator")},
        "rdma_nics": model["counts"]["rdma_nics"],
        "best_rdma_level_per_accelerator": model["nearest"],
        "rails": rails_entry,
    }
    if gpudirect.has_gpudirect_facts(topology):
        found["gpudirect"] = gpudirect.node_gpudirect(topology, device_options)
    return found


def site_summary(
    site: str,
    nodes: dict[str, dict[str, Any]],
    warn_levels: Iterable[str] = ("SYS",),
    device_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Summary of a site from its nodes' topologies (keyed by inventory name)."""
    return site_summary_of(
        site, {name: node_summary(topology, warn_levels, device_options) for name, topology in nodes.items()}
    )


def site_summary_of(site: str, node_summaries: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Summary of a site from its nodes' :func:`node_summary` (keyed by inventory name)."""
    per_node = {name: node_summaries[name] for name in sorted(node_summaries)}
    histogram: dict[str, int] = {}
    for summary in per_node.values():
        for level, count in summary["level_histogram"].items():
            histogram[level] = histogram.get(level, 0) + count
    found = {
        "site": site,
        "nodes": len(per_node),
        "gpus": sum(s["gpus"] for s in per_node.values()),
        "nics": sum(s["nics"] for s in per_node.values()),
        "vfs": sum(s["vfs"] for s in per_node.values()),
        "accelerators": {
            key: sum(s["accelerators"][key] for s in per_node.values()) for key in ("gpu", "ve", "accelerator")
        },
        "rdma_nics": sum(s["rdma_nics"] for s in per_node.values()),
        "level_histogram": {lv: histogram[lv] for lv in LEVELS if lv in histogram},
        # older node summaries (no rails key) count as nodes without a rule
        "rails": rails_summary.site_rails_summary(s.get("rails") for s in per_node.values()),
        "per_node": per_node,
        "warnings": [f"{name}: {w}" for name, s in per_node.items() for w in s["warnings"]],
    }
    site_gpudirect = gpudirect.site_gpudirect({name: s.get("gpudirect") for name, s in per_node.items()})
    if site_gpudirect is not None:
        found["gpudirect"] = site_gpudirect
    return found


def site_summary_markdown(summary: dict[str, Any]) -> str:
    """Human-readable rendering of :func:`site_summary`."""
    plural = device_model.plural

    families = ", ".join(device_model.family_counts_text(summary["accelerators"])) or "no accelerator"
    lines = [
        f"# Site {summary['site']}",
        "",
        f"{plural(summary['nodes'], 'node')}, {plural(summary['gpus'], 'GPU/accelerator', 'GPUs/accelerators')}, "
        f"{plural(summary['nics'], 'physical NIC')}, {plural(summary['vfs'], 'VF')}.",
        "",
        f"As the planner sees them: {families}; {plural(summary['rdma_nics'], 'RDMA NIC')}.",
        "",
        "Best GPU-to-NIC level per GPU: "
        + (", ".join(f"{lv} {n}" for lv, n in summary["level_histogram"].items()) or "no GPUs"),
        "",
        "| node | NUMA nodes | GPUs | NICs | VFs | GPU: nearest NIC (level) |",
        "|---|---|---|---|---|---|",
    ]
    for name, node in summary["per_node"].items():
        pairs = "; ".join(
            f"{gpu}: {', '.join(best['nics']) or '-'} ({best['level'] or 'none'})"
            for gpu, best in node["best_level_per_gpu"].items()
        )
        lines.append(
            f"| {name} | {node['numa_nodes']} | {node['gpus']} | {node['nics']} | {node['vfs']} | {pairs or '-'} |"
        )
    lines += _rails_markdown(summary)
    lines += _gpudirect_markdown(summary)
    failed = summary.get("nodes_failed") or {}
    if "node_counts" in summary:
        counts = summary["node_counts"]
        lines += [
            "",
            "## Nodes not in this summary",
            "",
            f"{counts['ok']} ok, {counts['failed']} failed, {counts['unreachable']} unreachable.",
            "",
        ]
        for name, entry in sorted(failed.items()):
            stale = entry.get("stale_facts")
            note = f" (facts file of an earlier run, {stale['age_s']} s old, not used)" if stale else ""
            task = f", task {entry['task']}" if entry.get("task") else ""
            lines.append(f"- {name}: {entry['state']} in stage {entry['stage']}{task}: {entry['error']}{note}")
    lines += ["", "## Warnings", ""]
    lines += [f"- {w}" for w in summary["warnings"]] or ["none"]
    return "\n".join(lines) + "\n"


def _rails_markdown(summary: dict[str, Any]) -> list[str]:
    """The rails section of :func:`site_summary_markdown`: every RDMA NIC's rail, per node with a rule."""
    site = summary.get("rails")
    if not site:
        return []
    per_rail = ", ".join(f"rail {rail} {count}" for rail, count in site["per_rail"].items()) or "none"
    lines = [
        "",
        "## Rails",
        "",
        f"{device_model.plural(site['nodes'], 'node')} with a rule (aligned_dra_rails); RDMA NICs per rail: "
        f"{per_rail}; {site['on_no_rail']} on no rail"
        + (f"; {site['unknown']} on an unknown rail" if site.get("unknown") else "")
        + ".",
        "",
        "| node | rule | RDMA NIC: rail |",
        "|---|---|---|",
    ]
    for name, node in summary["per_node"].items():
        entry = node.get("rails")
        if entry is None:
            continue
        nics = "; ".join(f"{rails_summary.nic_label(nic)}: {rails_summary.nic_rail_text(nic)}" for nic in entry["nics"])
        # a pattern may hold '|' (alternation), which would end the table's cell
        cells = [name, entry["rule"] or "not readable", nics or "no RDMA NIC"]
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return lines


def _gpudirect_markdown(summary: dict[str, Any]) -> list[str]:
    """The GPUDirect RDMA section of :func:`site_summary_markdown`: per node ready or not, and the aligned pairs."""
    site = summary.get("gpudirect")
    if not site:
        return []
    nodes, pairs = site["nodes"], site["pairs"]
    lines = [
        "",
        "## GPUDirect RDMA",
        "",
        f"Nodes ready {nodes['ready']}, not ready {nodes['not_ready']}, unknown {nodes['unknown']}. "
        f"{device_model.plural(pairs['aligned'], 'GPU-NIC pair')} aligned on paper (PIX/PXB): "
        f"{pairs['direct']} direct, {pairs['rerouted']} through the host bridge (counted at PHB), "
        f"{pairs['unknown']} unverified.",
        "",
        "| node | GPUDirect RDMA | why | aligned pairs not direct |",
        "|---|---|---|---|",
    ]
    for name, node in summary["per_node"].items():
        entry = node.get("gpudirect")
        if entry is None:
            lines.append(f"| {name} | unknown | not probed | - |")
            continue
        state = {True: "ready", False: "not ready"}.get(entry["ready"], "unknown")
        odd = "; ".join(f"{p['label']}-{p['nic']} {p['physical_level']}: {p['text']}" for p in entry["pairs"]
                        if p["path"] != "direct")  # fmt: skip
        cells = [name, state, "; ".join(entry["reasons"]) or "-", odd or "-"]
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return lines
