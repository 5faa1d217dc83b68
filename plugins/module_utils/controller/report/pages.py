# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The site report: self-contained HTML pages built from topology facts.

One page per site and an index of sites. Per layout (nodes whose hardware is
laid out the same way are drawn once): an SVG picture of the machine (NUMA
nodes, PCIe root complexes, switches, GPUs, NICs with their VFs collapsed per
PF), the GPU x NIC level matrix in the layout of ``nvidia-smi topo -m`` and the
warnings. Per site: the node inventory, the alignment score and, when the
planner ran, what its claim templates achieve.

Levels are never recomputed here: the matrix, the best pairs and the score all
come from the probe's ``links`` and ``nearest_nics`` and from
:func:`topology.site_summary`, the same code the site summary uses.

This module loads the Jinja2 templates, renders the sections and pages and
builds them from the files the topology role wrote. What the pages show comes
from the package's other modules: ``layouts`` (layout fingerprints and the
level matrix), ``svg`` (the pictures' geometry), ``data`` (the rows and
figures of each section), ``replay`` (the replay section and its chart),
``usage`` (GPUs used versus allocated over a window, and its chart),
``jobs`` (the jobs section and each job's picture on the site) and
``inputs`` (the checked plan, teams, utilization, replay and jobs files, and
:class:`ReportError`).

Pages use no network, no fonts, no scripts: one HTML file with inline CSS and
inline SVG. Output is deterministic (no timestamps), so a rerun on the same
facts writes nothing. Pure Python (>= 3.9), no Ansible imports.
"""

from __future__ import annotations

import functools
import hashlib
import json

from ansible_collections.aligned.dra.plugins.module_utils.controller.fabric import rails_summary
from ansible_collections.aligned.dra.plugins.module_utils.controller.inputs.site import InputError, check_topologies
from ansible_collections.aligned.dra.plugins.module_utils.controller.report import driver_metrics
from ansible_collections.aligned.dra.plugins.module_utils.controller.report.data import (
    UNKNOWN_LEVEL,
    alignment_score,
    failed_nodes,
    index_rows,
    inventory_rows,
    layout_view,
    matrix_view,
    plan_view,
    teams_view,
    utilization_view,
)
from ansible_collections.aligned.dra.plugins.module_utils.controller.report.gpudirect import gpudirect_view
from ansible_collections.aligned.dra.plugins.module_utils.controller.report.inputs import (
    ReportError,
    has_allocation,
    summary_rails,
    validate_jobs,
    validate_plan,
    validate_teams,
    validate_utilization,
)
from ansible_collections.aligned.dra.plugins.module_utils.controller.report.jobs import jobs_view
from ansible_collections.aligned.dra.plugins.module_utils.controller.report.layouts import group_layouts
from ansible_collections.aligned.dra.plugins.module_utils.controller.report.mig import layout_view as mig_layout_view
from ansible_collections.aligned.dra.plugins.module_utils.controller.report.mig import validate_replay_mig
from ansible_collections.aligned.dra.plugins.module_utils.controller.report.replay import replay_view
from ansible_collections.aligned.dra.plugins.module_utils.controller.report.svg import (
    LEVEL_COLOURS,
    UNKNOWN_NUMA_COLOUR,
    node_picture,
    usage_chart,
)
from ansible_collections.aligned.dra.plugins.module_utils.controller.report.usage import usage_view
from ansible_collections.aligned.dra.plugins.module_utils.controller.topology.summary import site_summary
from ansible_collections.aligned.dra.plugins.module_utils.dra.device_model import (
    family_counts_text,
    node_devices,
    plural,
)
from ansible_collections.aligned.dra.plugins.module_utils.node.topology import LEVEL_RANK, LEVELS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

REPORT_SCHEMA_VERSION = 1

LEVEL_MEANING = {
    "X": "Self",
    "PIX": "Connection traversing at most a single PCIe bridge",
    "PXB": "Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)",
    "PHB": "Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)",
    "NODE": "Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node",
    "SYS": "Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)",
}


# --------------------------------------------------------------------------
# Templates
# --------------------------------------------------------------------------

# The pages' Jinja2 templates ship in the collection as roles/report/templates/report/.
# The site_report action reads them on the controller and hands their text to
# the module; tests and callers in this checkout read them from disk.
TEMPLATE_NAMES = (
    "page.html.j2",
    "macros.html.j2",
    "site.html.j2",
    "index.html.j2",
    "layout.html.j2",
    "plan.html.j2",
    "teams.html.j2",
    "utilization.html.j2",
    "usage.html.j2",
    "replay.html.j2",
    "jobs.html.j2",
    "mig.html.j2",
)


def default_template_dir() -> str:
    """``roles/report/templates/report`` of the collection this file belongs to."""
    import os

    # plugins/module_utils/controller/report/ -> the collection's root
    root = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), *[os.pardir] * 4))
    return os.path.join(root, "roles", "report", "templates", "report")


def load_templates(directory: str | None = None) -> dict[str, str]:
    """``{name: source}`` of the report's templates, read from ``directory`` (default: the collection's)."""
    import os

    directory = directory or default_template_dir()
    sources = {}
    for name in TEMPLATE_NAMES:
        path = os.path.join(directory, name)
        try:
            with open(path, encoding="utf-8") as handle:
                sources[name] = handle.read()
        except OSError as exc:
            raise ReportError(f"templates: cannot read {path}: {exc.strerror or exc}") from None
    return sources


_ENVIRONMENTS: dict[str, Any] = {}
_CURRENT: dict[str, Any] = {"sources": None}


def use_templates(sources: Mapping[str, str] | None) -> None:
    """Render with these template sources from now on (None: the collection's files)."""
    _CURRENT["sources"] = dict(sources) if sources is not None else None


def _environment() -> Any:
    sources = _CURRENT["sources"]
    if sources is None:
        sources = load_templates()
    missing = [name for name in TEMPLATE_NAMES if not isinstance(sources.get(name), str)]
    if missing:
        raise ReportError(f"templates: {', '.join(missing)} missing or not text")
    key = hashlib.sha256(json.dumps(sources, sort_keys=True).encode()).hexdigest()
    env = _ENVIRONMENTS.get(key)
    if env is None:
        try:
            import jinja2
        except ImportError:
            raise ReportError("templates: the Python package jinja2 is needed to write the report") from None
        env = jinja2.Environment(
            loader=jinja2.DictLoader(sources),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
            keep_trailing_newline=True,
        )
        env.globals.update(
            plural=plural,
            level_colours={**LEVEL_COLOURS, UNKNOWN_LEVEL: UNKNOWN_NUMA_COLOUR},  # an unknown summary: grey
            level_meaning=LEVEL_MEANING,
            level_rank=LEVEL_RANK,
            percent=_percent,
        )
        _ENVIRONMENTS.clear()
        _ENVIRONMENTS[key] = env
    return env


def _render(name: str, **context: Any) -> Any:
    """Render a template; the result is markup that other templates insert as it is."""
    import jinja2
    from markupsafe import Markup

    env = _environment()
    try:
        return Markup(env.get_template(name).render(**context))
    except jinja2.TemplateError as exc:
        where = getattr(exc, "name", None) or name
        line = getattr(exc, "lineno", None)
        raise ReportError(f"templates: {where}{f' line {line}' if line else ''}: {exc}") from None


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.0f} %"


# --------------------------------------------------------------------------
# Sections: data rendered by their templates
# --------------------------------------------------------------------------


def matrix_html(matrix: Mapping[str, Any]) -> Any:
    """The accelerator x NIC table and its legends, laid out like ``nvidia-smi topo -m``."""
    return _render("layout.html.j2", part="matrix", matrix=matrix_view(matrix))


def node_svg(model: Mapping[str, Any], matrix: Mapping[str, Any] | None = None) -> Any:
    """SVG picture of one layout (the ``picture`` macro over :func:`node_picture`)."""
    return _render("layout.html.j2", part="picture", picture=node_picture(model, matrix))


def plan_html(plan: Mapping[str, Any], max_errors: int = 20) -> Any:
    """Capacity per claim template and the worst level inside allocations."""
    return _render("plan.html.j2", plan=plan_view(plan, max_errors))


def teams_html(teams: Mapping[str, Any]) -> Any:
    """Teams of the site and their guaranteed quotas against each class's capacity."""
    return _render("teams.html.j2", **teams_view(teams))


def utilization_svg(classes: Mapping[str, Mapping[str, Any]]) -> Any:
    """A small horizontal bar chart: allocated and idle devices per class."""
    chart = usage_chart(classes)
    return _render("utilization.html.j2", part="chart", chart=chart) if chart else ""


def utilization_html(used: Mapping[str, Any]) -> Any:
    """Devices published, allocated and idle per class, node and team; shared devices; measured levels;
    then, where the file has ``usage``, the GPUs used versus allocated over a window (a file with ``usage``
    alone, from a site without ResourceSlices, shows that part only)."""
    allocation = _render("utilization.html.j2", part="all", **utilization_view(used)) if has_allocation(used) else ""
    if not used.get("usage"):
        return allocation
    return allocation + _render("usage.html.j2", **usage_view(used["usage"]))


def replay_html(replay: Mapping[str, Any]) -> Any:
    """A workload trace replayed on the site's plan: the ratio of pods placed, the chart, a row per policy."""
    view = replay_view(replay)
    return _render("replay.html.j2", **view) if view else ""


def mig_html(site: str, nodes: Mapping[str, Mapping[str, Any]], mig: Mapping[str, Any] | None) -> Any:
    """The site's MIG GPUs: each static layout drawn, dynamic GPUs counted; None when the site has none."""
    view = mig_layout_view(nodes, mig, site)
    return _render("mig.html.j2", **view) if view else None


def jobs_html(jobs: Mapping[str, Any]) -> Any:
    """The site's multi-node jobs: a row per job and each job on a picture of the site's domains and nodes."""
    return _render("jobs.html.j2", **jobs_view(jobs))


# --------------------------------------------------------------------------
# Pages
# --------------------------------------------------------------------------


def site_report(
    site: str,
    nodes: Mapping[str, Mapping[str, Any]],
    warn_levels: Iterable[str] = ("SYS",),
    plan: Mapping[str, Any] | None = None,
    teams: Mapping[str, Any] | None = None,
    utilization: Mapping[str, Any] | None = None,
    device_options: Mapping[str, Any] | None = None,
    summary_file: Mapping[str, Any] | None = None,
    replay: Mapping[str, Any] | None = None,
    jobs: Mapping[str, Any] | None = None,
    driver: bool = False,
    mig: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Build a site page. Returns ``{"html", "summary", "score", "layouts", "failed"}``.

    ``replay`` (``<site>/replay.json``) is shown with the plan it was replayed
    on, after the claim templates. ``jobs`` (``<site>/jobs.json``) follows
    them: each job's placement and its picture on the site. ``mig`` (``{host: aligned_dra_mig}``) draws the
    static layouts of the site's MIG GPUs.

    ``summary_file`` is the site's ``summary.json`` as the topology role wrote
    it, read for the nodes that failed (``nodes_failed``, ``node_counts``) and
    each node's rails (the topology role read ``aligned_dra_rails``, which
    the report is not given, against the probe).
    """
    options = dict(device_options) if device_options else None
    summary = site_summary(site, dict(nodes), warn_levels, options)
    rails = summary_rails(summary_file)
    for host, node in summary["per_node"].items():
        node["rails"] = rails.get(host)
        # what the validation would refuse, as summary.json says it
        found = [f"rails: {problem}" for problem in (node["rails"] or {}).get("problems") or []]
        node["warnings"].extend(found)
        summary["warnings"].extend(f"{host}: {warning}" for warning in found)
    summary["rails"] = rails_summary.site_rails_summary(node["rails"] for node in summary["per_node"].values())
    groups = group_layouts(nodes)
    layout_of = {host: index + 1 for index, group in enumerate(groups) for host in group["hosts"]}
    score = alignment_score(summary)
    failed = failed_nodes(plan, summary_file)
    counts = failed["counts"] or {
        "ok": summary["nodes"],
        "failed": sum(1 for r in failed["rows"] if r["state"] != "unreachable"),
        "unreachable": sum(1 for r in failed["rows"] if r["state"] == "unreachable"),
    }
    layouts = []
    for index, group in enumerate(groups):
        first = nodes[group["hosts"][0]]
        rdma = [n["pci_address"] for n in node_devices(first, options)["rdma_nics"]]
        layouts.append(_render("layout.html.j2", part="section", layout=layout_view(index, group, summary, rdma)))
    families = family_counts_text(summary["accelerators"])
    subtitle = " \u00b7 ".join(
        [plural(summary["nodes"], "node")]
        + (families or ["no accelerator"])
        + [
            plural(summary["rdma_nics"], "RDMA NIC"),
            plural(summary["vfs"], "VF"),
            plural(len(summary["warnings"]), "warning"),
        ]
    )
    html = _render(
        "site.html.j2",
        site=site,
        title=f"Site {site}",
        subtitle=subtitle,
        counts=counts,
        score=score,
        gpudirect=gpudirect_view(summary),
        plan=_with_replay(plan_html(plan) if plan is not None else None, replay),
        jobs=jobs_html(jobs) if jobs is not None else None,
        teams=teams_html(teams) if teams is not None else None,
        utilization=utilization_html(utilization) if utilization is not None else None,
        mig=mig_html(site, nodes, mig) if mig else None,
        failed=failed["rows"],
        # a site with the bundled driver: what its /metrics exports (docs/monitoring.md)
        driver_metrics=driver_metrics.rows() if driver else None,
        inventory=inventory_rows(summary, layout_of),
        rails=summary["rails"],
        layouts=layouts,
        layout_count=len(groups),
        node_count=summary["nodes"],
        links={
            "plan": plan is not None,
            "teams": teams is not None,
            "utilization": utilization is not None,
            "replay": replay is not None,
            "jobs": jobs is not None,
        },
    )
    return {"html": html, "summary": summary, "score": score, "layouts": groups, "failed": failed, "counts": counts}


def _with_replay(plan: Any, replay: Mapping[str, Any] | None) -> Any:
    """The plan section followed by the replay on the plan, when there is one."""
    if replay is None:
        return plan
    return (plan or "") + replay_html(replay)


def index_page(sites: Iterable[Mapping[str, Any]]) -> str:
    """Index of sites. Each entry: ``{"site", "summary", "score", "layouts", "plan"}``."""
    rows = index_rows(sites)
    return str(_render("index.html.j2", title="aligned.dra sites", subtitle="Topology of every probed site", rows=rows))


# --------------------------------------------------------------------------
# Files: from what the topology role wrote to the pages
# --------------------------------------------------------------------------


def _read_json(path: str, what: str) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        raise ReportError(f"{what} {path} does not exist") from None
    except (OSError, ValueError) as exc:
        raise ReportError(f"{what} {path} cannot be read: {exc}") from None


def _restores_templates(function: Any) -> Any:
    """The call may set its own templates (:func:`use_templates`); afterwards the process renders with
    those it had before, so one call's templates (a test's, a bad argument's) never reach the next."""

    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> Any:
        previous = _CURRENT["sources"]
        try:
            return function(*args, **kwargs)
        finally:
            _CURRENT["sources"] = previous

    return call


@_restores_templates
def build_reports(
    output_dir: str,
    sites: Iterable[str] | None = None,
    warn_levels: Iterable[str] = ("SYS",),
    device_options: Mapping[str, Any] | None = None,
    templates: Mapping[str, str] | None = None,
    mig: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Pages for the sites in ``<output_dir>/index.json`` (written by the topology role).

    Reads each site's node files listed in the index and, when present, its
    ``plan.json``, ``teams.json``, ``utilization.json``, ``replay.json``,
    ``jobs.json`` and ``summary.json`` (for the nodes that failed).
    ``device_options`` are the driver's (``aligned_dra_device_options``): they
    decide which devices the planner sees. ``templates`` are the Jinja2
    sources (:func:`load_templates`; default, the collection's files). ``mig`` is each host's
    ``aligned_dra_mig`` (the filter ``aligned.dra.mig_settings``): the static MIG layouts drawn.
    Returns ``{"files": {relative path: html}, "sites": {site: info}}``; writes nothing. Raises :class:`ReportError` naming the file or site at fault.
    """
    import os

    use_templates(templates)
    warn_levels = list(warn_levels)
    unknown = [lv for lv in warn_levels if lv not in LEVEL_RANK]
    if unknown:
        raise ReportError(f"warn_levels: unknown level(s) {unknown}; use {list(LEVELS)}")
    index_path = os.path.join(output_dir, "index.json")
    if not os.path.exists(index_path):
        raise ReportError(f"{index_path} does not exist: run the topology role (playbooks/probe.yml) first")
    index = _read_json(index_path, "site index")
    if not isinstance(index, dict) or not isinstance(index.get("sites"), list):
        raise ReportError(f"site index {index_path} has no 'sites' list")
    available = {str(entry.get("site")): entry for entry in index["sites"] if isinstance(entry, dict)}
    wanted = sorted(available) if sites is None else list(sites)
    missing = [s for s in wanted if s not in available]
    if missing:
        raise ReportError(f"sites {missing} are not in {index_path} (it has {sorted(available)})")
    files: dict[str, str] = {}
    info: dict[str, Any] = {}
    entries = []
    for site in wanted:
        nodes = {}
        for rel in available[site].get("node_files") or []:
            host = os.path.basename(rel)[: -len(".json")] if rel.endswith(".json") else os.path.basename(rel)
            nodes[host] = _read_json(os.path.join(output_dir, rel), f"site {site}: node file")
            if not isinstance(nodes[host], dict) or "devices" not in nodes[host]:
                raise ReportError(f"site {site}: node file {rel} is not a topology (no 'devices')")
            try:
                check_topologies({host: nodes[host]}, "topology")
            except InputError as exc:
                raise ReportError(f"site {site}: node file {rel} is not a topology: {exc}") from None
        plan_path = os.path.join(output_dir, site, "plan.json")
        plan = None
        if os.path.exists(plan_path):
            plan = validate_plan(_read_json(plan_path, f"site {site}: plan"), plan_path)
        extra = {}
        for key, check in (
            ("teams", validate_teams),
            ("utilization", validate_utilization),
            ("replay", validate_replay_mig),
            ("jobs", validate_jobs),
        ):
            path = os.path.join(output_dir, site, f"{key}.json")
            if os.path.exists(path):
                extra[key] = check(_read_json(path, f"site {site}: {key}"), path)
        summary_path = os.path.join(output_dir, site, "summary.json")
        summary_file = _read_json(summary_path, f"site {site}: summary") if os.path.exists(summary_path) else None
        if summary_file is not None and not isinstance(summary_file, dict):
            raise ReportError(f"site {site}: summary {summary_path} is not a JSON object")
        summary_rails(summary_file, summary_path)
        # the driver role writes a driver/ folder in the output of a site with the bundled driver
        extra["driver"] = os.path.isdir(os.path.join(output_dir, site, "driver"))
        result = site_report(
            site, nodes, warn_levels, plan, device_options=device_options, summary_file=summary_file, mig=mig, **extra
        )
        files[f"{site}/report.html"] = result["html"]
        entries.append({"site": site, "plan": plan, **result})
        info[site] = {
            "report": f"{site}/report.html",
            "nodes": result["summary"]["nodes"],
            "layouts": [{"fingerprint": g["fingerprint"], "hosts": g["hosts"]} for g in result["layouts"]],
            "score": {b["key"]: b["count"] for b in result["score"]["buckets"]},
            "gpus": result["score"]["gpus"],
            "accelerators": result["summary"]["accelerators"],
            "rdma_nics": result["summary"]["rdma_nics"],
            "node_counts": result["counts"],
            "plan": plan is not None,
            "warnings": len(result["summary"]["warnings"]),
        }
    # The index lists every site of index.json that has a page, built now or before.
    all_entries = list(entries)
    if sites is not None:
        for site in sorted(set(available) - set(wanted)):
            if os.path.exists(os.path.join(output_dir, site, "report.html")):
                all_entries.append(
                    _index_entry_from_files(output_dir, site, available[site], warn_levels, device_options)
                )
    files["index.html"] = index_page(sorted(all_entries, key=lambda e: e["site"]))
    return {"files": files, "sites": info}


def _index_entry_from_files(
    output_dir: str,
    site: str,
    entry: Mapping[str, Any],
    warn_levels: list[str],
    device_options: Mapping[str, Any] | None = None,
) -> dict:
    """Index row for a site that is not rebuilt this time (recomputed from its files, not drawn)."""
    import os

    nodes = {
        os.path.basename(rel)[: -len(".json")]: _read_json(os.path.join(output_dir, rel), f"site {site}: node file")
        for rel in entry.get("node_files") or []
    }
    summary = site_summary(site, nodes, warn_levels, dict(device_options) if device_options else None)
    plan_path = os.path.join(output_dir, site, "plan.json")
    plan = validate_plan(_read_json(plan_path, "plan"), plan_path) if os.path.exists(plan_path) else None
    summary_path = os.path.join(output_dir, site, "summary.json")
    summary_file = _read_json(summary_path, f"site {site}: summary") if os.path.exists(summary_path) else None
    return {
        "failed": failed_nodes(plan, summary_file if isinstance(summary_file, dict) else None),
        "site": site,
        "summary": summary,
        "score": alignment_score(summary),
        "layouts": group_layouts(nodes),
        "plan": plan,
    }
