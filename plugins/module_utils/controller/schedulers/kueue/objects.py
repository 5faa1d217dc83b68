# SPDX-License-Identifier: Apache-2.0
"""Kueue queues for a site's teams: cohorts, flavors, ClusterQueues, LocalQueues, priorities.

The ``teams`` stage can enforce device quotas with ResourceQuotas, with Kueue
(v0.19.2, API ``kueue.x-k8s.io/v1beta2``) or both (``aligned_dra_teams.engine``).
:func:`render` turns the checked team settings (:func:`teams.settings`) and the
site's claim objects (:mod:`claims`) into:

- one ``Cohort`` for the site (``aligned_dra_teams.kueue.cohort``, default
  ``aligned-<site>``) and one per department, named ``<site cohort>-<department>``,
  whose ``parentName`` is the site cohort. No cohort carries quota or limits of
  its own: every device quota sits in a ClusterQueue;
- one ``ResourceFlavor`` per node group, ``<site>-<group>`` with the group's
  ``nodeLabels`` (Kueue adds them to the pods' node selectors). Without node
  groups the site has one flavor, ``<site>-default``, without labels, and no
  team may name a node group; with node groups every team must name one;
- one ``ClusterQueue`` per team, named like the team, selecting its namespaces
  (``kubernetes.io/metadata.name In [...]``), in its department's cohort or the
  site cohort. One resource group covers every mapped DeviceClass (sorted) and
  lists every flavor of the site, the team's own first (Kueue tries flavors in
  order). On the team's flavor ``nominalQuota`` is its quota *times its namespace
  count*: the ResourceQuota engine grants the quota per namespace, a ClusterQueue
  serves all the team's namespaces at once, so the same settings give the team
  the same total either way. On the other flavors ``nominalQuota`` is 0.
  ``borrowingLimit`` (``borrowing_limit``, a team-wide amount; absent: no limit)
  is set on every flavor, since Kueue limits borrowing per flavor and resource;
  ``lendingLimit`` (``lending_limit``, team-wide, at most the nominal quota) only
  on the team's flavor, the only one with quota to lend. Teams of a tier that is
  not ``guaranteed`` (opportunistic) get ``nominalQuota`` 0 and a
  ``borrowingLimit`` of their quota (times namespaces) on every flavor: they run
  on idle devices only and are the first to be reclaimed; they may not set
  ``borrowing_limit`` or a non-zero ``lending_limit``;
- one ``LocalQueue`` per team namespace, named like the team (workloads set the
  label ``kueue.x-k8s.io/queue-name: <team>``);
- with placement levels (``aligned_dra_placement_levels``, :func:`topology`), one
  ``Topology`` for Topology Aware Scheduling, ``<site>-topology``, whose levels are
  the level labels widest first and ``kubernetes.io/hostname`` last, and every
  ResourceFlavor names it (``topologyName``). Kueue requires node labels on a
  flavor with a topology, so the site's default flavor then selects the site
  label ``aligned.dev/site: <site>`` that the placement stage puts on every node
  of a site with levels, next to the level labels, once it applies them
  (:func:`node_label_note` says so in ``notes``);
- one ``WorkloadPriorityClass`` per tier, with the name and value of the tier's
  ``PriorityClass``.

Preemption follows the tier (:func:`preemption`): a guaranteed tier reclaims its
lent quota with ``reclaimWithinCohort: Any``, because Kueue's ``LowerPriority``
would let a borrower of a higher tier keep a lower tier's *guaranteed* quota for
as long as it runs; ``PreemptLowerPriority`` tiers preempt lower priorities in
their own queue (``withinClusterQueue: LowerPriority``) and, when they borrow,
borrowers of lower tiers in the cohort (``borrowWithinCohort: LowerPriority``
with ``maxPriorityThreshold`` the value of the next lower tier, so workloads of
other priority classes between two tiers are not preempted by borrowers); a
``Never`` tier gets ``Never`` everywhere (a guaranteed ``Never`` tier then gets
its lent quota back only as the borrowers finish). A non-guaranteed tier with
``PreemptLowerPriority`` has ``reclaimWithinCohort: LowerPriority`` (it has no
nominal quota to reclaim; Kueue allows ``borrowWithinCohort`` only with it).

The Kueue manager ``Configuration`` fragment (``configuration``) turns on
``KueueDRAIntegration`` (and ``KueueDRAIntegrationConsumableCapacity`` when a
class is counted by capacity), sets ``resources.quotaCheckStrategy:
IgnoreUndeclared`` (the ClusterQueues cover devices only: CPU and memory of the
same workloads are not held back by them) and maps every DeviceClass any team
has a quota on to one logical resource (``resources.deviceClassMappings``):
``aligned.dev/<class>`` or ``aligned_dra_teams.kueue.resource_names.<class>``.

A class is counted in devices unless every quota and limit on it is a quantity
string (engine ``kueue`` only) *and* a rendered ResourceClaimTemplate requests
capacity from it (the fractional GPU template with consumable capacity): then
the mapping gets a ``capacity`` source (the capacity the template requests,
``memory``; the class's driver; the selector ``device.driver == ... &&
device.allowMultipleAllocations == true``, KEP-2941's mitigation against
charging a share of a device that is allocated whole) and the quota counts GPU
memory. A whole-GPU request on that class is charged what kube-scheduler
allocates to it: the device's request policy default (KEP-2941 Consumable
Capacity, Processing Flow 7). A fractional template on a class counted in
devices is charged one whole device per claim (never less than it uses).

Refused at render time (:class:`KueueError`, naming the setting), each because
Kueue v0.19.2 (commit 8eab6877, ``pkg/dra``) would not admit the workloads or
could not count them (KEP-2941 sections in brackets):

- a team template that is a ``ResourceClaim`` (the shared fractional GPU a site
  renders without consumable capacity): Kueue accounts ResourceClaimTemplates
  only; v0.19.2 charges nothing for a pod's ResourceClaim ("ResourceClaims are not
  supported", Notes/Constraints; Drawbacks);
- a capacity amount (quantity string) on a class without a consumable-capacity
  template, in particular one whose fractional template fell back to the shared
  claim (same reason); amounts mixing device counts and capacity on one class;
- a team template with ``firstAvailable`` (the pairs fallback templates):
  "FirstAvailable device selection is not supported" (Non-Goals; GA criteria);
- ``admin_access`` teams: their templates use ``adminAccess`` and
  ``allocationMode: All``; v0.19.2 refuses both ("AdminAccess is not supported",
  "AllocationMode 'All' is not supported"; Risks and Mitigations 2-3), and
  any other team template with either;
- a team template requesting a DeviceClass that no team has a quota on: Kueue
  marks workloads with unmapped classes inadmissible (Workload Processing Flow 4);
- a capacity source on a class with an extended resource name: extended
  resource requests of a class with sources are inadmissible (Consumable
  Capacity, Path Interactions), and a capacity source where the Kubernetes gate
  ``DRAConsumableCapacity`` is off (Design Details, feature gates);
- a DeviceClass name that is not a qualified name of at most 63 characters, a
  logical name that is invalid, native (``cpu``, ``memory``...) or in
  ``kubernetes.io``, two classes on one logical name (quotas are per class;
  Kueue would add them up), more than 16 mappings (Device Class Mapping
  Uniqueness; ``pkg/config/validation.go``);
- lending above the nominal quota, limits on classes without a mapping, node
  groups without labels or with more than 8 (a ResourceFlavor's limit).

Not refused, noted in ``notes``: device taint tolerations in templates (Kueue
does not consider taints when it matches devices, Non-Goals); Kueue's CEL check of
template selectors against ResourceSlices happens at admission, not here;
with placement levels, that Kueue's Topology Aware Scheduling does not count DRA
devices when it picks a domain (KEP-2941 leaves TAS out; kubernetes-sigs/kueue#10548),
that a Topology's levels and a flavor's ``topologyName`` and ``nodeLabels``
cannot change once applied (the CRDs' rules), and which node labels TAS needs
before any workload of the site's queues is admitted (:func:`node_label_note`).

:mod:`kueue_mappings` decides which classes Kueue counts, and how (the
Configuration's deviceClassMappings);
:mod:`kueue_checks` checks the objects against Kueue's CRD schemas and webhook,
and the quotas against the site's capacity; :mod:`kueue_what_if` models
admission and preemption in a cohort for a list of workloads; :mod:`kueue_api`
holds Kueue's names, limits and amounts, and :class:`KueueError`.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

from fractions import Fraction

from ansible_collections.aligned.dra.plugins.module_utils.controller import schedulers
from ansible_collections.aligned.dra.plugins.module_utils.controller.domains import levels as placement
from ansible_collections.aligned.dra.plugins.module_utils.controller.domains import shared
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kueue import checks as kueue_checks
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kueue import mappings as kueue_mappings
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kueue import mig as kueue_mig
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kueue import what_if as kueue_what_if
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kueue.api import (
    API_VERSION,
    DEFAULT_KUEUE_MINOR,
    INT32,
    MANAGED,
    MAX_NODE_LABELS,
    NAMESPACE_NAME_LABEL,
    SITE_LABEL,
    TEAM_LABEL,
    TIER_LABEL,
    UNIT_DEVICES,
    KueueError,
    amount,
    amount_out,
)
from ansible_collections.aligned.dra.plugins.module_utils.dra import gates as dra_gates
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


# -- names ---------------------------------------------------------------------------------


def site_cohort(conf: dict[str, Any], site: str) -> str:
    return ((conf.get("kueue") or {}).get("cohort")) or f"aligned-{site}"


def _check_name(where: str, name: str, what: str) -> str:
    if not dra.is_dns_subdomain(name):
        raise KueueError(f"{where}: {what} {name!r} is not a DNS subdomain")
    return name


def _labels(site: str, **extra: str) -> dict[str, str]:
    labels = dict(MANAGED)
    labels[SITE_LABEL] = site
    labels.update(extra)
    return labels


# -- preemption ----------------------------------------------------------------------------


def preemption(tiers: dict[str, dict[str, Any]], tier_key: str) -> dict[str, Any]:
    """The ClusterQueue ``preemption`` of a team of ``tier_key`` (see the module docstring)."""
    tier = tiers[tier_key]
    if tier["preemption_policy"] == "Never":
        return {
            "reclaimWithinCohort": "Never",
            "withinClusterQueue": "Never",
            "borrowWithinCohort": {"policy": "Never"},
        }
    lower = [t["value"] for t in tiers.values() if t["value"] < tier["value"]]
    borrow: dict[str, Any] = {"policy": "Never"}
    if lower:
        borrow = {"policy": "LowerPriority", "maxPriorityThreshold": max(lower)}
    return {
        "reclaimWithinCohort": "Any" if tier["guaranteed"] else "LowerPriority",
        "withinClusterQueue": "LowerPriority",
        "borrowWithinCohort": borrow,
    }


# -- render --------------------------------------------------------------------------------


def _flavors(conf: dict[str, Any], site: str) -> dict[str | None, dict[str, Any]]:
    """``{node group or None: {"name", "node_labels"}}``."""
    groups = (conf.get("kueue") or {}).get("node_groups") or {}
    if not groups:
        # only the site's name can make this name wrong: say so
        name = _check_name("site", f"{site}-default", "the default ResourceFlavor name <site>-default")
        return {None: {"name": name, "node_labels": {}}}
    out: dict[str | None, dict[str, Any]] = {}
    for group in sorted(groups):
        where = f"aligned_dra_teams.kueue.node_groups.{group}"
        labels = (groups[group] or {}).get("node_labels") or {}
        if not labels:
            raise KueueError(f"{where}.node_labels: a node group needs at least one node label")
        if len(labels) > MAX_NODE_LABELS:
            raise KueueError(f"{where}.node_labels: {len(labels)} labels, a ResourceFlavor takes {MAX_NODE_LABELS}")
        name = _check_name(where, f"{site}-{group}", "the ResourceFlavor name <site>-<group>")
        out[group] = {"name": name, "node_labels": labels}
    return out


def _team_amounts(
    conf: dict[str, Any], team: dict[str, Any], mappings: dict[str, dict[str, Any]]
) -> dict[str, dict[str, Fraction | None]]:
    """Per mapped class: ``nominal``, ``borrow`` (None: no limit) and ``lend`` (None: everything)."""
    where = f"aligned_dra_teams.teams[{team['name']}]"
    guaranteed = conf["tiers"][team["tier"]]["guaranteed"]
    count = len(team["namespaces"])
    quotas = team.get("quotas") or {}
    borrowing = team.get("borrowing_limit") or {}
    lending = team.get("lending_limit") or {}
    out = {}
    for cls in mappings:
        quota = amount(quotas.get(cls, 0)) * count
        if guaranteed:
            nominal = quota
            borrow = amount(borrowing[cls]) if cls in borrowing else None
        else:
            if cls in borrowing:
                raise KueueError(
                    f"{where}.borrowing_limit.{cls}: tier {team['tier']} is not guaranteed, its quota "
                    f"({amount_out(quota, mappings[cls]['unit'])}) is already its borrowing limit; drop the entry"
                )
            nominal, borrow = Fraction(0), quota
        lend = amount(lending[cls]) if cls in lending else None
        if lend is not None and lend > nominal:
            unit = mappings[cls]["unit"]
            raise KueueError(
                f"{where}.lending_limit.{cls}: {amount_out(lend, unit)} is above the team's nominal quota "
                f"{amount_out(nominal, unit)}"
                + (
                    f" ({amount_out(amount(quotas.get(cls, 0)), unit)} per namespace x {count} namespaces)"
                    if guaranteed
                    else f" (tier {team['tier']} is not guaranteed: no nominal quota to lend)"
                )
            )
        out[cls] = {"nominal": nominal, "borrow": borrow, "lend": lend}
    return out


def render(
    conf: dict[str, Any],
    site: str,
    claim_objects: list[dict[str, Any]],
    plan: dict[str, Any] | None = None,
    feature_gates: dict[str, bool] | None = None,
    minor: str | None = None,
    in_use: dict[str, dict[str, Any]] | None = None,
    placement_levels: list[dict[str, str]] | None = None,
    mig: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Kueue objects and configuration for one site (see the module docstring).

    ``placement_levels`` are the site's ``aligned_dra_placement_levels``
    (widest first); with any, the objects include a Topology and every flavor
    names it. ``mig``: the site's MIG (``schedulers/mig.site`` with its ``classes``),
    whose class of every MIG device may be counted in GPU memory (:mod:`kueue_mig`).

    Returns ``{"objects", "configuration", "mappings", "teams", "capacity",
    "problems", "notes", "what_if"}``:

    - ``objects``: WorkloadPriorityClasses, Cohorts, the Topology (with
      placement levels), ResourceFlavors, ClusterQueues, LocalQueues (in that order);
    - ``configuration``: the Kueue manager Configuration fragment;
    - ``mappings``: ``{DeviceClass: {"resource", "unit" ("devices" or
      "capacity"), "capacity", "driver"}}``;
    - ``teams``: per team ``{"name", "cluster_queue", "local_queue", "cohort",
      "flavor", "tier", "nominal": {class: n}, "borrowable": {class: n or None
      (no limit)}, "lendable": {class: n}}`` and, with ``in_use`` (``{team:
      {class: in use now}}``), ``"idle": {class: n}``: what is idle now and
      could be lent, ``min(lendable, nominal - in use)``, at least 0 (None
      where the use is not known in the class's unit). Amounts are ints
      (devices) or quantity strings (capacity);
    - ``capacity``: per mapped class the cohort's nominal quota against the
      plan's devices (``status`` ok, oversubscribed, over_limit, unknown);
    - ``problems``: capacity problems (over_limit), as teams.capacity_check;
    - ``counter_problems``: the same for GPU memory counted by counters (MIG), which teams.capacity_check
      does not see;
    - ``notes``: what works but differently than with ResourceQuotas;
    - ``what_if``: :func:`kueue_what_if.what_if` of ``aligned_dra_teams.kueue.what_if`` when set.

    Settings Kueue cannot serve raise :class:`KueueError`.
    """
    if conf.get("engine", schedulers.KUEUE) == schedulers.RESOURCEQUOTA:
        return {
            "objects": [],
            "configuration": None,
            "mappings": {},
            "teams": [],
            "capacity": [],
            "problems": [],
            "counter_problems": [],
            "notes": [],
            "what_if": None,
        }
    if minor is not None:
        minor = dra_gates.minor_of(minor)
    notes: list[str] = []
    mappings = kueue_mappings.class_mappings(conf, claim_objects, minor, feature_gates, notes, mig)
    kueue_minor = (conf.get("kueue") or {}).get("minor") or DEFAULT_KUEUE_MINOR
    kueue_mappings.check_gates_exist(mappings, kueue_minor)
    notes += kueue_mig.gate_notes(mappings, kueue_minor) + kueue_mig.engine_notes(conf.get("engine", ""), mappings)
    kueue_mappings.check_templates(conf, claim_objects, mappings)
    flavors = _flavors(conf, site)
    topology_object = topology(site, placement_levels)
    if topology_object is not None:
        _topology_flavors(flavors, site, topology_object["metadata"]["name"])
        notes += [*TOPOLOGY_NOTES, node_label_note(site, flavors, topology_object)]
    cohort = _check_name("aligned_dra_teams.kueue.cohort", site_cohort(conf, site), "the cohort name")
    tiers = conf["tiers"]
    for key, tier in tiers.items():
        if not INT32[0] <= tier["value"] <= INT32[1]:
            raise KueueError(f"aligned_dra_teams.tiers.{key}.value must fit a 32-bit integer for Kueue")
    objects = _priority_classes(tiers, site)
    cohorts, department_cohorts = _cohorts(conf, site, cohort)
    objects += cohorts + ([topology_object] if topology_object else []) + _flavor_objects(flavors, site)

    queues, local_queues, rows = [], [], []
    amounts: dict[str, dict[str, dict[str, Fraction | None]]] = {}
    resources = sorted(mappings, key=lambda c: mappings[c]["resource"])
    for team in conf["teams"]:
        own = _own_flavor(team, flavors)
        team_amounts = amounts[team["name"]] = _team_amounts(conf, team, mappings)
        labels = _labels(site, **{TEAM_LABEL: team["name"], TIER_LABEL: team["tier"]})
        team_cohort = department_cohorts.get(team.get("department") or "", cohort)
        queues.append(_cluster_queue(conf, team, labels, team_cohort, own, flavors, resources, mappings, team_amounts))
        local_queues += _local_queues(team, labels)
        rows.append(_queue_row(team, team_cohort, own, resources, mappings, team_amounts, in_use))
    objects += queues + local_queues

    counter_problems: list[str] = []
    capacity, problems = kueue_checks.capacity_rows(conf, plan, mappings, amounts, mig, counter_problems)
    if kueue_mappings.tolerates_device_taints(claim_objects):
        notes.append("templates tolerate device taints; Kueue does not consider taints when it counts devices")
    configuration = kueue_mappings.configuration(mappings)
    result = {
        "objects": objects,
        "configuration": configuration,
        "mappings": mappings,
        "teams": rows,
        "capacity": capacity,
        "problems": problems,
        "counter_problems": counter_problems,
        "notes": notes,
        "what_if": None,
    }
    demands = (conf.get("kueue") or {}).get("what_if") or []
    if demands:
        devices = {cls: (v or {}).get("devices") for cls, v in (((plan or {}).get("classes")) or {}).items()}
        result["what_if"] = kueue_what_if.what_if(result, devices, demands, "aligned_dra_teams.kueue.what_if")
    return result


def what_if_from_settings(
    conf: dict[str, Any],
    capacity: dict[str, Any] | None = None,
    demands: list[dict[str, Any]] | tuple = (),
    field: str = "what_if",
) -> dict[str, Any]:
    """:func:`what_if.what_if` on checked team settings, rendered first against stub DeviceClasses (device counts
    only) and without the site's own what-if workloads."""
    names = sorted({cls for team in conf.get("teams") or [] for cls in (team.get("quotas") or {})})
    stubs = [
        {
            "apiVersion": dra.API_VERSION,
            "kind": "DeviceClass",
            "metadata": {"name": cls},
            "spec": {"selectors": [{"cel": {"expression": 'device.driver == "what.if"'}}]},
        }
        for cls in names
    ]
    bare = dict(conf, kueue=dict(conf.get("kueue") or {}, what_if=[]), engine=schedulers.KUEUE)
    return kueue_what_if.what_if(render(bare, "what-if", stubs), capacity, demands, field)


def _priority_classes(tiers: dict[str, dict[str, Any]], site: str) -> list[dict[str, Any]]:
    """One WorkloadPriorityClass per tier, with the name and value of the tier's PriorityClass."""
    return [
        {
            "apiVersion": API_VERSION,
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": tier["name"], "labels": _labels(site, **{TIER_LABEL: key})},
            "value": tier["value"],
            "description": str(tier["description"])[:2048],
        }
        for key, tier in sorted(tiers.items())
    ]


def _cohorts(conf: dict[str, Any], site: str, cohort: str) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The site's Cohort and one per department under it; ``{department: its cohort}``."""
    objects = [{"apiVersion": API_VERSION, "kind": "Cohort", "metadata": {"name": cohort, "labels": _labels(site)}}]
    departments = sorted({t["department"] for t in conf["teams"] if t.get("department")})
    department_cohorts = {}
    for department in departments:
        where = f"aligned_dra_teams.teams[].department {department!r}"
        if not dra.is_dns_label(department):
            raise KueueError(f"{where} is not a DNS label")
        name = _check_name(where, f"{cohort}-{department}", "the department cohort name")
        if name == cohort or name in department_cohorts.values():
            raise KueueError(f"{where}: cohort name {name!r} is used twice")
        department_cohorts[department] = name
        objects.append(
            {
                "apiVersion": API_VERSION,
                "kind": "Cohort",
                "metadata": {"name": name, "labels": _labels(site, **{"aligned.dev/department": department})},
                "spec": {"parentName": cohort},
            }
        )
    return objects, department_cohorts


# -- Topology Aware Scheduling -------------------------------------------------------------------

TOPOLOGY_NOTES = [
    "Kueue's Topology Aware Scheduling does not count DRA devices when it picks a topology domain "
    "(Kueue v0.19.2: KEP-2941 leaves TAS out, kubernetes-sigs/kueue#10548): a workload may be admitted to a "
    "domain whose nodes lack the free devices; jobs.json counts them",
    "Kueue refuses changes to a Topology's levels and to a flavor's topologyName and nodeLabels once set: "
    "after a change of the placement levels or node groups, delete the Topology and the site's "
    "ResourceFlavors before applying",
]


def topology(site: str, placement_levels: list[dict[str, str]] | None) -> dict[str, Any] | None:
    """The site's Kueue ``Topology`` (levels widest first, ``kubernetes.io/hostname`` last); None without levels."""
    try:
        levels = placement.check_levels(placement_levels)
    except shared.PlacementError as exc:
        raise KueueError(str(exc)) from None
    if not levels:
        return None
    name = _check_name("site", placement.topology_name(site), "the Topology name <site>-topology")
    return {
        "apiVersion": API_VERSION,
        "kind": "Topology",
        "metadata": {"name": name, "labels": _labels(site)},
        "spec": {"levels": placement.topology_levels(levels)},
    }


def _topology_flavors(flavors: dict[str | None, dict[str, Any]], site: str, name: str) -> None:
    """Every flavor names the Topology; the default one (no node groups) selects the site's nodes."""
    for group, flavor in flavors.items():
        flavor["topology"] = name
        if group is None:
            problem = placement.site_label_problem(site)
            if problem:
                raise KueueError(f"{shared.LEVELS_VARIABLE}: {problem} ({SITE_LABEL})")
            # Kueue: "at least one nodeLabel is required when topology is set"
            flavor["node_labels"] = {SITE_LABEL: site}


def node_label_note(site: str, flavors: dict[str | None, dict[str, Any]], topology_object: dict[str, Any]) -> str:
    """What the nodes must carry before Kueue's TAS finds one for the site's flavors, and what happens until then.

    Kueue v0.19.2 counts for a flavor with a topology only the nodes carrying the flavor's ``nodeLabels``
    and every level label of the Topology (``pkg/util/tas/node.go`` ``NodeMatchesFlavor``). Every flavor
    of the site gets the topology and every ClusterQueue lists every flavor, so the queues are
    "TAS-only": Kueue then schedules every workload through TAS, annotated or not (KEP-2724, "Implicit
    defaulting of TAS annotations"; ``isTASImplied``), and none is admitted while no node matches.
    """
    levels = [level["nodeLabel"] for level in topology_object["spec"]["levels"]]
    level_labels = ", ".join(label for label in levels if label != shared.HOSTNAME_LABEL)
    if None in flavors:
        selected = f"the ResourceFlavor {flavors[None]['name']} selects {SITE_LABEL}={site}"
        applied = f"{SITE_LABEL} and the level labels it writes"
    else:
        names = ", ".join(flavor["name"] for flavor in flavors.values())
        selected = f"the ResourceFlavors {names} select their node groups' labels (aligned_dra_teams.kueue.node_groups)"
        applied = "the level labels it writes"
    return (
        f"{selected}, and Kueue's Topology Aware Scheduling counts only the nodes "
        f"that carry those and every level label ({level_labels}): the placement stage puts {applied} on the "
        f"site's nodes only with aligned_dra_placement_apply: true, else apply {site}/placement/node-labels.yaml of "
        "the output directory "
        "(kubectl apply --server-side --field-manager=aligned.dra.placement); a level read from a label the "
        "cluster's nodes already carry (a provider's topology key, nvidia.com/gpu.clique) is not written, and a "
        "node without it counts for none of these flavors; until the nodes carry them TAS "
        "finds no node for the flavors, and since every flavor of the site's ClusterQueues has a topology, "
        "Kueue v0.19.2 schedules every workload of these queues through TAS, with or without a topology "
        "annotation (KEP-2724 implicit TAS), so every one of them waits"
    )


def _flavor_objects(flavors: dict[str | None, dict[str, Any]], site: str) -> list[dict[str, Any]]:
    """One ResourceFlavor per node group (or the site's default one)."""
    objects = []
    for flavor in flavors.values():
        spec: dict[str, Any] = {}
        if flavor["node_labels"]:
            spec["nodeLabels"] = dict(flavor["node_labels"])
        if flavor.get("topology"):
            spec["topologyName"] = flavor["topology"]
        objects.append(
            {
                "apiVersion": API_VERSION,
                "kind": "ResourceFlavor",
                "metadata": {"name": flavor["name"], "labels": _labels(site)},
                "spec": spec,
            }
        )
    return objects


def _own_flavor(team: dict[str, Any], flavors: dict[str | None, dict[str, Any]]) -> str:
    """The name of the team's ResourceFlavor: its node group's, or the site's only one."""
    where = f"aligned_dra_teams.teams[{team['name']}]"
    group = team.get("node_group")
    if None in flavors and group is not None:
        raise KueueError(f"{where}.node_group {group!r}: the site has no node groups (aligned_dra_teams.kueue)")
    if None not in flavors and group not in flavors:
        raise KueueError(
            f"{where}.node_group: the site has node groups ({', '.join(sorted(g for g in flavors if g))}); "
            "name the team's"
        )
    return flavors[group]["name"]


def _cluster_queue(
    conf: dict[str, Any],
    team: dict[str, Any],
    labels: dict[str, str],
    cohort: str,
    own: str,
    flavors: dict[str | None, dict[str, Any]],
    resources: list[str],
    mappings: dict[str, dict[str, Any]],
    team_amounts: dict[str, dict[str, Fraction | None]],
) -> dict[str, Any]:
    """The team's ClusterQueue: its namespaces, cohort, preemption and one resource group of every flavor."""
    where = f"aligned_dra_teams.teams[{team['name']}]"
    spec: dict[str, Any] = {
        "namespaceSelector": {
            "matchExpressions": [{"key": NAMESPACE_NAME_LABEL, "operator": "In", "values": sorted(team["namespaces"])}]
        },
        "cohortName": cohort,
        "preemption": preemption(conf["tiers"], team["tier"]),
    }
    if resources:
        order = [own] + sorted(f["name"] for f in flavors.values() if f["name"] != own)
        spec["resourceGroups"] = [
            {
                "coveredResources": [mappings[c]["resource"] for c in resources],
                "flavors": [_flavor_quotas(flavor, own, resources, mappings, team_amounts) for flavor in order],
            }
        ]
    return {
        "apiVersion": API_VERSION,
        "kind": "ClusterQueue",
        "metadata": {"name": _check_name(where, team["name"], "the ClusterQueue name"), "labels": labels},
        "spec": spec,
    }


def _flavor_quotas(
    flavor: str,
    own: str,
    resources: list[str],
    mappings: dict[str, dict[str, Any]],
    team_amounts: dict[str, dict[str, Fraction | None]],
) -> dict[str, Any]:
    """One flavor of the team's resource group: its nominal quota on its own flavor, 0 on the others."""
    quotas = []
    for cls in resources:
        unit = mappings[cls]["unit"]
        values = team_amounts[cls]
        item: dict[str, Any] = {
            "name": mappings[cls]["resource"],
            "nominalQuota": amount_out(values["nominal"] if flavor == own else Fraction(0), unit),
        }
        if values["borrow"] is not None:
            item["borrowingLimit"] = amount_out(values["borrow"], unit)
        if flavor == own and values["lend"] is not None:
            item["lendingLimit"] = amount_out(values["lend"], unit)
        quotas.append(item)
    return {"name": flavor, "resources": quotas}


def _local_queues(team: dict[str, Any], labels: dict[str, str]) -> list[dict[str, Any]]:
    """One LocalQueue per team namespace, named like the team."""
    return [
        {
            "apiVersion": API_VERSION,
            "kind": "LocalQueue",
            "metadata": {"name": team["name"], "namespace": namespace, "labels": dict(labels)},
            "spec": {"clusterQueue": team["name"]},
        }
        for namespace in team["namespaces"]
    ]


def _queue_row(
    team: dict[str, Any],
    cohort: str,
    own: str,
    resources: list[str],
    mappings: dict[str, dict[str, Any]],
    team_amounts: dict[str, dict[str, Fraction | None]],
    in_use: dict[str, dict[str, Any]] | None,
) -> dict[str, Any]:
    """The team's row of :func:`render`'s ``teams``."""
    row: dict[str, Any] = {
        "name": team["name"],
        "cluster_queue": team["name"],
        "local_queue": team["name"],
        "cohort": cohort,
        "flavor": own,
        "tier": team["tier"],
        "nominal": {},
        "borrowable": {},
        "lendable": {},
    }
    for cls in resources:
        unit = mappings[cls]["unit"]
        values = team_amounts[cls]
        row["nominal"][cls] = amount_out(values["nominal"], unit)
        row["borrowable"][cls] = amount_out(values["borrow"], unit)
        lendable = values["nominal"] if values["lend"] is None else values["lend"]
        row["lendable"][cls] = amount_out(lendable, unit)
    if in_use is not None:
        row["idle"] = _idle(in_use.get(team["name"]) or {}, team_amounts, mappings)
    return row


def _idle(
    used: dict[str, Any], team_amounts: dict[str, dict[str, Fraction | None]], mappings: dict[str, dict[str, Any]]
) -> dict[str, int | str | None]:
    idle: dict[str, int | str | None] = {}
    for cls, values in team_amounts.items():
        unit = mappings[cls]["unit"]
        value = used.get(cls, 0)
        if unit != UNIT_DEVICES and not isinstance(value, str) and value != 0:
            idle[cls] = None  # devices in use say nothing about the memory in use
            continue
        try:
            current = amount(value)
        except ValueError:
            idle[cls] = None
            continue
        nominal = values["nominal"] or Fraction(0)
        lendable = nominal if values["lend"] is None else values["lend"]
        idle[cls] = amount_out(max(Fraction(0), min(lendable, nominal - current)), unit)
    return idle
