# SPDX-License-Identifier: Apache-2.0
"""Checks of a site's rendered job objects: each object for its minor, and the links between a job's objects.

:func:`validate` returns every problem (empty when all may be applied):

- each object against the official OpenAPI schema of its minor (kubernetes-validate, strict: no field
  the minor does not know), its name and label syntax, and no field whose feature gate is off;
- per job (the objects carrying ``aligned.dev/job: <job>``): one Job and one Service, the Service
  headless and selecting the job's pods, the Job Indexed with completions = parallelism and its pods'
  ``subdomain`` the Service, every container claim naming a pod claim, the rendezvous address worker
  0's, every gang's ``minCount`` the worker count, the pod link naming a group that is rendered (or
  the Job's own ``spec.scheduling`` and no group object), one topology key for the constraint, the
  pod affinity and Kueue's annotation, and the Kueue queue label on a suspended Job; a KAI PodGroup
  checked against KAI's CRD and linked to its Job (:func:`kai_gang.link_problems`).

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.jobs import workload
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kai import checks as kai_checks
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kai import gangs as kai_gang
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kueue.api import (
    QUEUE_LABEL,
    TOPOLOGY_ANNOTATIONS,
)
from ansible_collections.aligned.dra.plugins.module_utils.dra import gates as dra_gates
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra
from ansible_collections.aligned.dra.plugins.module_utils.dra.labels import is_label_name, is_label_value

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Every object of a job carries it (value: the job's name); defined here, where the objects are grouped
# by it, and imported by the renderer (which imports this module).
JOB_LABEL = "aligned.dev/job"
TAS_ANNOTATIONS = tuple(TOPOLOGY_ANNOTATIONS.values())
GROUP_KINDS = ("Workload", "PodGroup")


def _label(obj: dict[str, Any]) -> str:
    return f"{obj.get('kind')} {(obj.get('metadata') or {}).get('name')}"


def _pod_spec(job: dict[str, Any]) -> dict[str, Any]:
    return ((job.get("spec") or {}).get("template") or {}).get("spec") or {}


def _pod_meta(job: dict[str, Any]) -> dict[str, Any]:
    return ((job.get("spec") or {}).get("template") or {}).get("metadata") or {}


# -- one object ------------------------------------------------------------------------------------


def _schema_problems(obj: dict[str, Any], minor: str) -> list[str]:
    import kubernetes_validate  # controller-only dependency

    try:
        kubernetes_validate.validate(obj, f"{minor}.0", strict=True)
    except kubernetes_validate.ValidationError as exc:
        return [f"schema: {exc.message} at {'.'.join(str(p) for p in exc.path)}"]
    except Exception as exc:  # SchemaNotFoundError: the minor does not serve this apiVersion/kind
        return [
            f"schema: {type(exc).__name__}: the Kubernetes {minor} schemas have no {obj.get('apiVersion')} "
            f"{obj.get('kind')} {exc}".rstrip()
        ]
    return []


def _metadata_problems(meta: dict[str, Any], where: str, name_required: bool, dns1035: bool) -> list[str]:
    problems = []
    name = meta.get("name")
    if name_required and not dra.is_dns_label(name):
        problems.append(f"{where}name {name!r} is not a DNS label")
    elif dns1035 and not (isinstance(name, str) and name[:1].isalpha()):
        problems.append(f"{where}name {name!r} must start with a letter (a Service name is a DNS-1035 label)")
    for key, value in (meta.get("labels") or {}).items():
        if not is_label_name(key) or not is_label_value(value):
            problems.append(f"{where}labels: {key!r}: {value!r} is not a label")
    for key in meta.get("annotations") or {}:
        if not is_label_name(key):
            problems.append(f"{where}annotations: {key!r} is not an annotation key")
    return problems


def _gate_problems(obj: dict[str, Any], minor: str, gates: dict[str, bool]) -> list[str]:
    """Fields whose gate is off on ``minor`` (the API server would drop them, or refuse the object)."""
    api = workload.API.get(minor)

    def off(names: Any) -> list[str]:
        return [g for g in names if not workload.gate_on(g, minor, gates)]

    problems = []
    kind = obj.get("kind")
    spec = obj.get("spec") or {}
    groups: list[dict[str, Any]] = []
    if kind in GROUP_KINDS:
        if api is None:
            return [f"Kubernetes {minor} has no {kind}"]
        missing = off(api["gates"])
        if missing:
            problems.append(f"needs feature gate {', '.join(missing)}, off on Kubernetes {minor}")
        groups = (spec.get("podGroupTemplates") or []) if kind == "Workload" else [spec]
    if kind == "Job":
        pod = _pod_spec(obj)
        for linked in ("workloadRef", "schedulingGroup"):
            if linked in pod and (api is None or off(api["gates"])):
                problems.append(f"spec.template.spec.{linked} needs the Workload API gates, off on Kubernetes {minor}")
        if "scheduling" in spec:
            if api is None or not api.get("job_scheduling") or off((*api["gates"], api["job_scheduling"])):
                problems.append(f"spec.scheduling needs feature gate {workload.WITH_JOB}, off on Kubernetes {minor}")
            groups = [spec["scheduling"]]
    for group in groups:
        if "schedulingConstraints" in group and (api is None or off([api.get("topology") or workload.TOPOLOGY])):
            problems.append(f"schedulingConstraints needs feature gate {workload.TOPOLOGY}, off on Kubernetes {minor}")
        gate = ((api or {}).get("disruption") or (workload.PREEMPTION, None))[0]
        if "disruptionMode" in group and gate is not None and off([gate]):
            problems.append(f"disruptionMode needs feature gate {gate}, off on Kubernetes {minor}")
    return problems


def object_problems(obj: dict[str, Any], minor: str, gates: dict[str, bool] | None = None) -> list[str]:
    """Every problem of one rendered object for ``minor``."""
    minor = dra_gates.minor_of(minor)
    gates = dict(gates or {})
    if kai_gang.is_kai_group(obj):  # KAI's CRD, not a Kubernetes kind: its own schema, no gates
        problems = [p.split(": ", 1)[1] for p in kai_checks.validate_objects([obj])]
        return problems + _metadata_problems(obj.get("metadata") or {}, "metadata.", True, False)
    problems = _schema_problems(obj, minor)
    problems += _metadata_problems(obj.get("metadata") or {}, "metadata.", True, obj.get("kind") == "Service")
    if obj.get("kind") == "Job":
        problems += _metadata_problems(_pod_meta(obj), "spec.template.metadata.", False, False)
    problems += _gate_problems(obj, minor, gates)
    return problems


# -- the links of one job --------------------------------------------------------------------------


def _min_counts(obj: dict[str, Any]) -> list[Any]:
    spec = obj.get("spec") or {}
    if obj["kind"] == "Workload":
        groups = spec.get("podGroups") or []
        policies = [g.get("policy") or {} for g in groups]
        policies += [g.get("schedulingPolicy") or {} for g in spec.get("podGroupTemplates") or []]
    elif obj["kind"] == "PodGroup":
        policies = [spec.get("schedulingPolicy") or {}]
    else:
        policies = [((spec.get("scheduling") or {}).get("schedulingPolicy")) or {}]
    return [(p.get("gang") or {}).get("minCount") for p in policies]


def _template_names(workload_obj: dict[str, Any]) -> set[str]:
    spec = workload_obj.get("spec") or {}
    return {g.get("name") for g in (spec.get("podGroups") or []) + (spec.get("podGroupTemplates") or [])}


def _group_links(job: dict[str, Any], by_kind: dict[str, list[dict[str, Any]]]) -> list[str]:
    """The pod link names a rendered group; every rendered group is linked; gangs hold every worker."""
    problems = []
    workers = (job.get("spec") or {}).get("completions")
    workloads = {o["metadata"]["name"]: o for o in by_kind.get("Workload", [])}
    pod_groups = {o["metadata"]["name"]: o for o in by_kind.get("PodGroup", [])}
    pod = _pod_spec(job)
    for obj in list(workloads.values()) + list(pod_groups.values()) + ([job] if "scheduling" in job["spec"] else []):
        for count in _min_counts(obj):
            if count != workers:
                problems.append(f"{_label(obj)}: gang minCount {count!r} is not the {workers} workers")
    for name, group in pod_groups.items():
        spec = group.get("spec") or {}
        ref = spec.get("workloadRef") or ((spec.get("podGroupTemplateRef") or {}).get("workload")) or {}
        owner = workloads.get(ref.get("workloadName"))
        template = ref.get("templateName") or ref.get("podGroupTemplateName")
        if owner is None or template not in _template_names(owner):
            problems.append(
                f"PodGroup {name}: names Workload {ref.get('workloadName')!r} template {template!r}, not rendered"
            )
    ref = pod.get("workloadRef")
    if ref is not None and (
        ref.get("name") not in workloads or ref.get("podGroup") not in _template_names(workloads[ref["name"]])
    ):
        problems.append(f"pods name Workload {ref.get('name')!r} group {ref.get('podGroup')!r}, not rendered")
    linked = (pod.get("schedulingGroup") or {}).get("podGroupName")
    if linked is not None and linked not in pod_groups:
        problems.append(f"pods name PodGroup {linked!r}, not rendered")
    if pod_groups and linked is None:
        problems.append("a PodGroup is rendered but the pods do not name it (spec.schedulingGroup)")
    if workloads and not pod_groups and ref is None:
        problems.append("a Workload is rendered but the pods do not name it (spec.workloadRef)")
    if "scheduling" in job["spec"] and (workloads or pod_groups or ref or linked):
        problems.append("spec.scheduling makes the Job controller create and link the groups: none may be rendered")
    return problems


def _topology_keys(job: dict[str, Any], by_kind: dict[str, list[dict[str, Any]]]) -> dict[str, set[str]]:
    """Where each level key appears: constraints, pod affinity, Kueue's annotation."""
    found: dict[str, set[str]] = {}
    groups = [o.get("spec") or {} for o in by_kind.get("PodGroup", [])]
    for obj in by_kind.get("Workload", []):
        groups += (obj.get("spec") or {}).get("podGroupTemplates") or []
    groups.append(job["spec"].get("scheduling") or {})
    for group in groups:
        for constraint in (group.get("schedulingConstraints") or {}).get("topology") or []:
            found.setdefault(constraint.get("key"), set()).add("topology constraint")
    affinity = (_pod_spec(job).get("affinity") or {}).get("podAffinity") or {}
    terms = list(affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or [])
    terms += [
        t.get("podAffinityTerm") or {} for t in affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or []
    ]
    for term in terms:
        found.setdefault(term.get("topologyKey"), set()).add("pod affinity")
    for key in TAS_ANNOTATIONS:
        value = (_pod_meta(job).get("annotations") or {}).get(key)
        if value is not None:
            found.setdefault(value, set()).add(key)
    return found


def _job_and_service(job: dict[str, Any], service: dict[str, Any]) -> list[str]:
    problems = []
    spec = job.get("spec") or {}
    pod = _pod_spec(job)
    workers = spec.get("completions")
    if spec.get("completionMode") != "Indexed" or spec.get("parallelism") != workers or not workers:
        problems.append("the Job must be Indexed with completions = parallelism = workers")
    if pod.get("restartPolicy") != "Never":
        problems.append("the workers' restartPolicy must be Never")
    name = service["metadata"]["name"]
    if pod.get("subdomain") != name:
        problems.append(f"the pods' subdomain {pod.get('subdomain')!r} is not the Service {name!r}")
    s_spec = service.get("spec") or {}
    if s_spec.get("clusterIP") != "None" or s_spec.get("publishNotReadyAddresses") is not True:
        problems.append("the Service must be headless and publish pods that are not ready")
    selector = s_spec.get("selector") or {}
    pod_labels = _pod_meta(job).get("labels") or {}
    if not selector or any(pod_labels.get(k) != v for k, v in selector.items()):
        problems.append(f"the Service selector {selector} does not select the pods (labels {pod_labels})")
    env = {e.get("name"): e.get("value") for c in pod.get("containers") or [] for e in c.get("env") or []}
    if env.get("MASTER_ADDR") != f"{job['metadata']['name']}-0.{name}" or env.get("NNODES") != str(workers):
        problems.append("MASTER_ADDR must be worker 0 (<job>-0.<service>) and NNODES the worker count")
    claims = {c.get("name"): c for c in pod.get("resourceClaims") or []}
    if not claims or not all(c.get("resourceClaimTemplateName") for c in claims.values()):
        problems.append("every worker claims its devices from a ResourceClaimTemplate")
    for container in pod.get("containers") or []:
        for claim in (container.get("resources") or {}).get("claims") or []:
            if claim.get("name") not in claims:
                problems.append(f"container {container.get('name')} uses claim {claim.get('name')!r}, not a pod claim")
    labels = (job.get("metadata") or {}).get("labels") or {}
    annotations = _pod_meta(job).get("annotations") or {}
    if QUEUE_LABEL in labels and spec.get("suspend") is not True:
        problems.append("a Job in a Kueue queue must be created suspended (Kueue admits it)")
    if any(key in annotations for key in TAS_ANNOTATIONS) and QUEUE_LABEL not in labels:
        problems.append("Kueue's topology annotation without a queue label does nothing")
    return problems


def link_problems(objects: list[dict[str, Any]]) -> list[str]:
    """The problems of the links between one job's objects."""
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for obj in objects:
        by_kind.setdefault("KaiPodGroup" if kai_gang.is_kai_group(obj) else obj.get("kind"), []).append(obj)
    jobs, services = by_kind.get("Job", []), by_kind.get("Service", [])
    if len(jobs) != 1 or len(services) != 1:
        return [f"{len(jobs)} Jobs and {len(services)} Services, one of each expected"]
    job = jobs[0]
    problems = _job_and_service(job, services[0]) + kai_gang.link_problems(job, by_kind.get("KaiPodGroup", []))
    if not by_kind.get("KaiPodGroup"):
        problems += _group_links(job, by_kind)
    keys = _topology_keys(job, by_kind)
    if len(keys) > 1:
        problems.append(
            f"the level appears with different keys: {', '.join(f'{k!r} ({sorted(v)})' for k, v in sorted(keys.items(), key=str))}"
        )
    for obj in objects:
        namespace = (obj.get("metadata") or {}).get("namespace")
        if namespace != job["metadata"].get("namespace"):
            problems.append(
                f"{_label(obj)} is in namespace {namespace!r}, the Job in {job['metadata'].get('namespace')!r}"
            )
    return problems


def validate(objects: list[dict[str, Any]], minor: str, gates: dict[str, bool] | None = None) -> list[str]:
    """Every problem of a site's rendered job objects; empty when all may be applied."""
    problems = []
    by_job: dict[str, list[dict[str, Any]]] = {}
    for obj in objects:
        problems += [f"{_label(obj)}: {p}" for p in object_problems(obj, minor, gates)]
        name = ((obj.get("metadata") or {}).get("labels") or {}).get(JOB_LABEL)
        if name is None:
            problems.append(f"{_label(obj)}: no {JOB_LABEL} label")
            continue
        by_job.setdefault(name, []).append(obj)
    for name, group in by_job.items():
        problems += [f"job {name}: {p}" for p in link_problems(group)]
    return problems
