# SPDX-License-Identifier: Apache-2.0
"""DeviceClasses and ResourceClaimTemplates for a site, rendered per Kubernetes minor.

:func:`render` turns a site's claim settings (inventory ``aligned_dra_claims``,
documented in docs/claims.md) into ``resource.k8s.io/v1`` objects for one
minor. A template whose fields need a feature gate that is off on that minor
(and that the site does not declare on) is left out with a message; nothing
gated is ever emitted silently. :func:`validate` checks every object before it
goes anywhere: the official OpenAPI schema of the minor (kubernetes-validate,
strict), CEL that compiles and passes the device-model checks, and the DRA
limits.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

import copy
import re

from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import mig as claim_mig
from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import rails as claim_rails
from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import tolerations as claim_tolerations
from ansible_collections.aligned.dra.plugins.module_utils.dra import cel as dra_cel
from ansible_collections.aligned.dra.plugins.module_utils.dra import gates as dra_gates
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra
from ansible_collections.aligned.dra.plugins.module_utils.dra.labels import TEMPLATE_LABEL

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

KNOWN_DRIVERS = (dra.DRIVER_NAME, "gpu.nvidia.com", "dra.net", "dra.cpu")

DEFAULTS: dict[str, Any] = {
    "namespace": "default",
    "drivers": [dra.DRIVER_NAME],
    "gpu_driver": dra.DRIVER_NAME,
    "nic_driver": dra.DRIVER_NAME,
    "cpu_driver": "dra.cpu",
    "numa_attribute": dra.ATTR_NUMA_NODE,
    "cpu_numa_attribute": dra.ATTR_NUMA_NODE,
    "classes": {
        "gpu": "aligned-gpu",
        "nic": "aligned-nic",
        "vf": "aligned-vf",
        "nvidia-gpu": "nvidia-gpu",
        "dranet-nic": "dranet-nic",
        "cpu": "dra-cpu",
        claim_mig.KEY: claim_mig.DEFAULT_CLASS,  # rendered only where the site runs MIG (claims/mig.py)
    },
    "selectors": {},  # extra CEL per class key
    "extended_resources": {},  # device-plugin resource name per class key (DRAExtendedResource)
    "templates": {
        "pairs": {"enabled": True, "counts": [1, 2, 4, 8], "name": "gpu-nic-pair-{n}", "selectors": {}},
        "pairs_fallback": {
            "enabled": True,
            "counts": [1, 2, 4, 8],
            "name": "gpu-nic-pair-{n}-fallback",
            "selectors": {},
        },
        "fractional_gpu": {
            "enabled": True,
            "name": "fractional-gpu",
            "memory": "20Gi",
            # percent of the GPU's compute, requested beside the memory: a share that asks for no compute
            # consumes the published default (all of it) and holds the GPU alone
            "compute": 25,
            "sharing_config": None,
            "selectors": {},
        },
        "gpu_nic_cpu": {"enabled": True, "name": "gpu-nic-cpu", "cpus": 8, "selectors": {}},
        "nic_only": {"enabled": True, "name": "nic-only", "count": 1, "selectors": {}},
        "gpu_only": {"enabled": True, "name": "gpu-only", "count": 1, "selectors": {}},
        "vf_only": {"enabled": True, "name": "vf-only", "count": 1, "selectors": {}},
        # rendered only where the site declares rails (aligned_dra_rails): see claims/rails.py
        "rails": claim_rails.DEFAULTS,
        # rendered only where the site's nodes run MIG (aligned_dra_mig): see claims/mig.py
        "mig": claim_mig.DEFAULTS,
    },
    "required": [],
}


# The requests of each template kind, by role: ``selectors`` of a template kind
# add CEL selectors to every request of a role.
REQUEST_ROLES = {
    "pairs": ("gpu", "nic"),
    "pairs_fallback": ("gpu", "nic"),
    "fractional_gpu": ("gpu",),
    "gpu_nic_cpu": ("gpu", "nic", "cpus"),
    "nic_only": ("device",),
    "gpu_only": ("device",),
    "vf_only": ("device",),
    "rails": claim_rails.REQUEST_ROLES,
    "mig": claim_mig.REQUEST_ROLES,
}


class ClaimsError(ValueError):
    """Site settings that cannot be rendered; the message names the setting."""


# -- extended resource names (KEP-5004) ------------------------------------------------

# Every DeviceClass can already be asked for as ``<prefix><class name>`` once
# DRAExtendedResource is on; an explicit name never needs this prefix.
IMPLICIT_EXTENDED_RESOURCE_PREFIX = "deviceclass.resource.kubernetes.io/"
_QUALIFIED_NAME_PART_RE = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")


def extended_resource_name_problem(name: object) -> str | None:
    """Why ``name`` is not a valid extended resource name, or None.

    The API server's rule for ``DeviceClass.spec.extendedResourceName`` (and a
    pod's extended resources): ``domain/name`` outside the reserved
    ``kubernetes.io/`` namespace, not starting with ``requests.``, and
    ``requests.<name>`` (its quota name) a qualified name.
    """
    if not isinstance(name, str) or not name:
        return "must be a non-empty string"
    if "/" not in name:
        return "needs a domain: domain/name, as a device plugin advertises it (e.g. example.com/gpu)"
    if name.startswith(IMPLICIT_EXTENDED_RESOURCE_PREFIX):
        return (
            f"{IMPLICIT_EXTENDED_RESOURCE_PREFIX}<class> is the implicit name every DeviceClass already has; "
            "an explicit name must be outside kubernetes.io/"
        )
    if "kubernetes.io/" in name:
        return "the kubernetes.io/ namespace is reserved for native resources"
    if name.startswith("requests."):
        return "must not start with requests. (the prefix of quota names)"
    domain, ident = ("requests." + name).split("/", 1)
    if "/" in ident:
        return "has more than one /"
    if not dra.is_dns_subdomain(domain):
        return "the domain must be a lowercase DNS subdomain of at most 244 characters"
    if len(ident) > 63 or not _QUALIFIED_NAME_PART_RE.fullmatch(ident):
        return "the name after / must be at most 63 letters, digits, '-', '_' or '.', starting and ending alphanumeric"
    return None


def settings(raw: dict[str, Any] | None) -> dict[str, Any]:
    """The site's settings merged over the defaults, checked."""
    merged = copy.deepcopy(DEFAULTS)
    for key, value in (raw or {}).items():
        if key not in DEFAULTS:
            raise ClaimsError(f"aligned_dra_claims: unknown key {key!r} (known: {', '.join(sorted(DEFAULTS))})")
        if key in ("classes", "selectors", "extended_resources"):
            if not isinstance(value, dict):
                raise ClaimsError(f"aligned_dra_claims.{key} must be a mapping")
            merged[key].update(value)
        elif key == "templates":
            if not isinstance(value, dict):
                raise ClaimsError("aligned_dra_claims.templates must be a mapping")
            for name, options in value.items():
                if name not in DEFAULTS["templates"]:
                    raise ClaimsError(
                        f"aligned_dra_claims.templates: unknown template kind {name!r} "
                        f"(known: {', '.join(sorted(DEFAULTS['templates']))})"
                    )
                if not isinstance(options, dict):
                    raise ClaimsError(f"aligned_dra_claims.templates.{name} must be a mapping")
                unknown = set(options) - set(DEFAULTS["templates"][name])
                if unknown:
                    raise ClaimsError(f"aligned_dra_claims.templates.{name}: unknown option {sorted(unknown)[0]!r}")
                merged["templates"][name].update(options)
        else:
            merged[key] = value
    for driver in merged["drivers"]:
        if driver not in KNOWN_DRIVERS:
            raise ClaimsError(f"aligned_dra_claims.drivers: {driver!r} is not one of {', '.join(KNOWN_DRIVERS)}")
    if merged["gpu_driver"] not in (dra.DRIVER_NAME, "gpu.nvidia.com"):
        raise ClaimsError("aligned_dra_claims.gpu_driver must be dra.aligned.dev or gpu.nvidia.com")
    if merged["nic_driver"] not in (dra.DRIVER_NAME, "dra.net"):
        raise ClaimsError("aligned_dra_claims.nic_driver must be dra.aligned.dev or dra.net")
    for key in ("gpu_driver", "nic_driver"):
        if merged[key] not in merged["drivers"]:
            raise ClaimsError(f"aligned_dra_claims.{key} {merged[key]!r} is not in aligned_dra_claims.drivers")
    for kind, options in merged["templates"].items():
        chosen = options["selectors"]
        if not isinstance(chosen, dict):
            raise ClaimsError(
                f"aligned_dra_claims.templates.{kind}.selectors must be a mapping of request role to CEL list"
            )
        for role, expressions in chosen.items():
            if role not in REQUEST_ROLES[kind]:
                raise ClaimsError(
                    f"aligned_dra_claims.templates.{kind}.selectors: {role!r} is not one of "
                    f"{', '.join(REQUEST_ROLES[kind])}"
                )
            if not isinstance(expressions, list) or not all(isinstance(e, str) for e in expressions):
                raise ClaimsError(f"aligned_dra_claims.templates.{kind}.selectors.{role} must be a list of CEL strings")
    for kind in ("pairs", "pairs_fallback"):
        counts = merged["templates"][kind]["counts"]
        if not isinstance(counts, list) or not all(isinstance(n, int) and 1 <= n <= 8 for n in counts):
            raise ClaimsError(f"aligned_dra_claims.templates.{kind}.counts must be a list of integers 1..8")
    _check_fractional(merged["templates"]["fractional_gpu"])
    try:
        claim_rails.check_settings(merged["templates"]["rails"])
        claim_mig.check_settings(merged["templates"]["mig"])
    except (claim_rails.RailSettingsError, claim_mig.MigClaimsError) as exc:
        raise ClaimsError(str(exc)) from None
    for name, value in merged["classes"].items():
        if not dra.is_dns_subdomain(value):
            raise ClaimsError(f"aligned_dra_claims.classes.{name}: {value!r} is not a DNS subdomain")
    for name, value in merged["selectors"].items():
        if name not in merged["classes"] or not isinstance(value, list) or not all(isinstance(e, str) for e in value):
            raise ClaimsError(f"aligned_dra_claims.selectors.{name} must be a list of CEL strings for a known class")
    owner_of: dict[str, str] = {}
    for key, name in merged["extended_resources"].items():
        where = f"aligned_dra_claims.extended_resources.{key}"
        if key not in merged["classes"]:
            raise ClaimsError(f"{where}: {key!r} is not a class key (known: {', '.join(sorted(merged['classes']))})")
        problem = extended_resource_name_problem(name)
        if problem:
            raise ClaimsError(f"{where}: {name!r} is not an extended resource name: {problem}")
        if name in owner_of:
            # The scheduler would serve the name from one class only (the newest): refuse the ambiguity.
            raise ClaimsError(
                f"{where}: {name!r} is already the extended resource name of class {owner_of[name]!r}; "
                "a name may belong to one DeviceClass only"
            )
        owner_of[name] = key
    if not dra.is_dns_label(merged["namespace"]):
        raise ClaimsError(f"aligned_dra_claims.namespace {merged['namespace']!r} is not a DNS label")
    return merged


def _check_fractional(options: dict[str, Any]) -> None:
    """The fractional template's request: memory a positive quantity, compute a percent 1..100 or null."""
    where = "aligned_dra_claims.templates.fractional_gpu"
    try:
        memory = dra_cel.parse_quantity(str(options["memory"]))
    except ValueError as exc:
        raise ClaimsError(f"{where}.memory: {exc}") from None
    if memory <= 0 or isinstance(options["memory"], bool):
        raise ClaimsError(f"{where}.memory: {options['memory']!r} is not a positive quantity (20Gi, 512Mi)")
    compute = options["compute"]
    if compute is not None and (isinstance(compute, bool) or not isinstance(compute, int) or not 1 <= compute <= 100):
        raise ClaimsError(
            f"{where}.compute: {compute!r} must be a percent of the GPU's compute, an integer 1..100 "
            "(or null to request memory only, which holds a whole GPU's compute)"
        )


# -- DeviceClasses ---------------------------------------------------------------------


def published_drivers(conf: dict[str, Any], device_options: dict[str, Any] | None = None) -> dict[str, str]:
    """``{"gpu", "nic"}``: the drivers of ``gpu_driver``'s GPUs (a split one) and ``nic_driver``'s NICs."""
    own = {kind: conf[f"{kind}_driver"] for kind in ("gpu", "nic")}
    return {kind: dra.driver_of_kind(kind, device_options) if v == dra.DRIVER_NAME else v for kind, v in own.items()}


def _kind_selector(driver: str, kinds: list[str]) -> str:
    # the collection's attributes are under its domain whatever the driver's name (a split GPU driver's too)
    kind = f'device.attributes["{dra.DRIVER_NAME}"].kind'
    test = f'{kind} == "{kinds[0]}"' if len(kinds) == 1 else f"{kind} in {list(kinds)!r}".replace("'", '"')
    return f'device.driver == "{driver}" && {test}'


def _class(name: str, expressions: list[str], site: str, extended_resource: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": e}} for e in expressions]}
    if extended_resource:
        spec["extendedResourceName"] = extended_resource
    return {
        "apiVersion": dra.API_VERSION,
        "kind": "DeviceClass",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "aligned.dra", "aligned.dev/site": site}},
        "spec": spec,
    }


def device_classes(
    conf: dict[str, Any], site: str, device_options: dict[str, Any] | None = None
) -> dict[str, dict[str, Any]]:
    """``{class key: DeviceClass}`` for the drivers the site runs (the collection's: :func:`dra.driver_of_kind`)."""
    names = conf["classes"]
    extra = conf["selectors"]
    wanted: dict[str, list[str]] = {}
    if dra.DRIVER_NAME in conf["drivers"]:
        wanted["gpu"] = [_kind_selector(dra.driver_of_kind("gpu", device_options), ["gpu", "accelerator"])]
        wanted["nic"] = [_kind_selector(dra.driver_of_kind("nic", device_options), ["nic"])]
        wanted["vf"] = [_kind_selector(dra.driver_of_kind("vf", device_options), ["vf"])]
    if "gpu.nvidia.com" in conf["drivers"]:
        wanted["nvidia-gpu"] = [
            'device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].type == "gpu"'
        ]
    if "dra.net" in conf["drivers"]:
        wanted["dranet-nic"] = ['device.driver == "dra.net"']
    if "dra.cpu" in conf["drivers"]:
        wanted["cpu"] = [f'device.driver == "{conf["cpu_driver"]}"']
    extended = conf["extended_resources"]
    return {
        key: _class(names[key], exprs + list(extra.get(key, [])), site, extended.get(key))
        for key, exprs in wanted.items()
    }


# -- claim templates ------------------------------------------------------------------------


def _template(conf: dict[str, Any], site: str, name: str, requests: list, constraints: list) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": requests}
    if constraints:
        devices["constraints"] = constraints
    return {
        "apiVersion": dra.API_VERSION,
        "kind": "ResourceClaimTemplate",
        "metadata": {
            "name": name,
            "namespace": conf["namespace"],
            "labels": {"app.kubernetes.io/managed-by": "aligned.dra", "aligned.dev/site": site},
        },
        # the claims Kubernetes makes from the template carry its name: used versus allocated per template
        "spec": {"metadata": {"labels": {TEMPLATE_LABEL: name}}, "spec": {"devices": devices}},
    }


def _exactly(name: str, class_name: str, count: int = 1, **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"deviceClassName": class_name, "allocationMode": "ExactCount", "count": count}
    spec.update(extra)
    return {"name": name, "exactly": spec}


def _gpu_nic_classes(conf: dict[str, Any], classes: dict[str, dict[str, Any]]) -> tuple[str, str]:
    """Names of the classes the templates take GPUs and NICs from (``gpu_driver``'s and ``nic_driver``'s)."""
    gpu_key = "gpu" if conf["gpu_driver"] == dra.DRIVER_NAME else "nvidia-gpu"
    nic_key = "nic" if conf["nic_driver"] == dra.DRIVER_NAME else "dranet-nic"
    return classes[gpu_key]["metadata"]["name"], classes[nic_key]["metadata"]["name"]


def rail_templates(
    conf: dict[str, Any], site: str, classes: dict[str, dict[str, Any]], rails: list[int] | None
) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """``(templates, left_out)`` pinned to the site's ``rails`` (none when it declares none; see claims/rails.py)."""
    gpu, nic = _gpu_nic_classes(conf, classes)
    found, left_out = claim_rails.templates(conf, rails, gpu, nic, _exactly)
    out = []
    for name, pinned, requests, constraints in found:
        template = _template(conf, site, name, requests, constraints)
        template["metadata"]["annotations"] = {claim_rails.RAILS_ANNOTATION: ",".join(str(r) for r in pinned)}
        out.append(template)
    return out, left_out


def claim_templates(conf: dict[str, Any], site: str, classes: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Every template the settings ask for but the rail templates, before the per-minor gate filter."""
    name_of = {key: item["metadata"]["name"] for key, item in classes.items()}
    gpu, nic = _gpu_nic_classes(conf, classes)
    root, numa = dra.ATTR_PCIE_ROOT, conf["numa_attribute"]
    wanted = conf["templates"]
    out = []

    def sel(kind: str, role: str) -> dict[str, Any]:
        """``{"selectors": [...]}`` for the requests of one role, or nothing."""
        expressions = wanted[kind]["selectors"].get(role) or []
        return {"selectors": [{"cel": {"expression": e}} for e in expressions]} if expressions else {}

    if wanted["pairs"]["enabled"]:
        for n in wanted["pairs"]["counts"]:
            requests, constraints = [], []
            for i in range(n):
                requests += [
                    _exactly(f"gpu-{i}", gpu, **sel("pairs", "gpu")),
                    _exactly(f"nic-{i}", nic, **sel("pairs", "nic")),
                ]
                constraints.append({"requests": [f"gpu-{i}", f"nic-{i}"], "matchAttribute": root})
            out.append(_template(conf, site, wanted["pairs"]["name"].format(n=n), requests, constraints))

    if wanted["pairs_fallback"]["enabled"]:
        for n in wanted["pairs_fallback"]["counts"]:
            requests, constraints = [], []
            for i in range(n):
                requests.append(_exactly(f"gpu-{i}", gpu, **sel("pairs_fallback", "gpu")))
                nic_sel = sel("pairs_fallback", "nic")
                requests.append(
                    {
                        "name": f"nic-{i}",
                        "firstAvailable": [
                            dict({"name": sub, "deviceClassName": nic}, **nic_sel)
                            for sub in ("same-root", "same-numa", "any")
                        ],
                    }
                )
                constraints.append({"requests": [f"gpu-{i}", f"nic-{i}/same-root"], "matchAttribute": root})
                constraints.append({"requests": [f"gpu-{i}", f"nic-{i}/same-numa"], "matchAttribute": numa})
            out.append(_template(conf, site, wanted["pairs_fallback"]["name"].format(n=n), requests, constraints))

    fractional = wanted["fractional_gpu"]
    if fractional["enabled"]:
        out.append(
            _template(
                conf,
                site,
                fractional["name"],
                [
                    _exactly(
                        "gpu",
                        gpu,
                        capacity={"requests": _fractional_request(fractional)},
                        **sel("fractional_gpu", "gpu"),
                    )
                ],
                [],
            )
        )

    cpu_driver_runs = "dra.cpu" in conf["drivers"]
    if wanted["gpu_nic_cpu"]["enabled"] and cpu_driver_runs and conf["cpu_numa_attribute"] == numa:
        cpus = int(wanted["gpu_nic_cpu"]["cpus"])
        requests = [
            _exactly("gpu", gpu, **sel("gpu_nic_cpu", "gpu")),
            _exactly("nic", nic, **sel("gpu_nic_cpu", "nic")),
            _exactly("cpus", name_of["cpu"], count=cpus, **sel("gpu_nic_cpu", "cpus")),
        ]
        constraints = [{"requests": ["gpu", "nic", "cpus"], "matchAttribute": numa}]
        out.append(_template(conf, site, wanted["gpu_nic_cpu"]["name"], requests, constraints))

    for kind, class_name in (("nic_only", nic), ("gpu_only", gpu), ("vf_only", name_of.get("vf"))):
        if wanted[kind]["enabled"] and class_name:
            count = int(wanted[kind]["count"])
            request = _exactly("device", class_name, count=count, **sel(kind, "device"))
            out.append(_template(conf, site, wanted[kind]["name"], [request], []))
    return out


def _fractional_request(options: dict[str, Any]) -> dict[str, str]:
    """The capacity a fractional claim consumes: its memory, and its compute share where it asks for one."""
    request = {"memory": str(options["memory"])}
    if options["compute"] is not None:
        request["compute"] = str(options["compute"])
    return request


def _shared_claim(conf: dict[str, Any], site: str, template: dict[str, Any], gpu_driver: str) -> dict[str, Any]:
    """The fallback of a fractional GPU without consumable capacity: one claim that pods share.

    Opaque config is read by the driver it names: ``sharing_config`` naming the collection's driver is
    meant for the driver of its GPUs, ``gpu_driver`` (:func:`published_drivers`: a split one, if any).
    """
    request = copy.deepcopy(template["spec"]["spec"]["devices"]["requests"][0])
    request["exactly"].pop("capacity", None)
    spec: dict[str, Any] = {"devices": {"requests": [request]}}
    sharing = copy.deepcopy(conf["templates"]["fractional_gpu"]["sharing_config"])
    if isinstance(sharing, dict) and sharing.get("driver") == dra.DRIVER_NAME:
        sharing["driver"] = gpu_driver
    if sharing:
        spec["devices"]["config"] = [{"requests": [request["name"]], "opaque": sharing}]
    return {
        "apiVersion": dra.API_VERSION,
        "kind": "ResourceClaim",
        "metadata": dict(template["metadata"], name=template["metadata"]["name"] + "-shared"),
        "spec": spec,
    }


# -- rendering per minor -----------------------------------------------------------------------


def _check_extended_resources(
    conf: dict[str, Any], classes: dict[str, dict[str, Any]], minor: str, gates: dict[str, bool]
) -> None:
    """Refuse extended resource names the site cannot serve: the class is not rendered, or the gate is off."""
    for key in conf["extended_resources"]:
        where = f"aligned_dra_claims.extended_resources.{key}"
        if key not in classes:
            raise ClaimsError(
                f"{where}: class {key!r} is not rendered, its driver is not in aligned_dra_claims.drivers"
            )
        disabled = dra_gates.fields_disabled(classes[key], minor, gates)
        if disabled:
            # An API server with the gate off drops the field silently: pods asking for the name would stay Pending.
            raise ClaimsError(
                f"{where}: {'; '.join(disabled)}; declare it in aligned_dra_feature_gates once the cluster "
                "enables it on kube-apiserver, kube-scheduler, kube-controller-manager and kubelet, "
                "or remove the entry"
            )


def render(
    raw_settings: dict[str, Any] | None,
    site: str,
    kubernetes_version: str,
    feature_gates: dict[str, bool] | None = None,
    tolerations: list[dict[str, Any]] | None = None,
    rail_rules: dict[str, Any] | None = None,
    device_options: dict[str, Any] | None = None,
    mig: dict[str, Any] | None = None,
    topologies: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Objects for one site and minor: ``{"objects", "skipped", "required", "minor", "rails", "warnings"}``.

    ``tolerations`` (DeviceTolerations) go into every request of every template.
    ``rail_rules`` (host -> ``aligned_dra_rails``) declare the site's rails
    (``rails``: their numbers, ``None`` without a rule): the rail templates
    are rendered for them. ``device_options``: split by kind (``split_gpu_driver``), the GPU class
    and the fractional GPU's opaque config name the split driver (a bad one: ``dra.DeviceModelError``).
    ``mig`` (host -> ``aligned_dra_mig``) and the hosts' probed ``topologies``: the MIG classes and
    templates of claims/mig.py, for the profiles the site's GPUs offer; ``warnings`` says what they need.
    """
    conf = settings(raw_settings)
    drivers = published_drivers(conf, device_options)
    try:
        rails, rail_notes = claim_rails.declared_rails(rail_rules)
    except claim_rails.RailSettingsError as exc:
        raise ClaimsError(str(exc)) from None
    minor = dra_gates.minor_of(kubernetes_version)
    gates = dict(feature_gates or {})
    for gate in gates:
        if gate not in dra_gates.FEATURE_GATES:
            raise ClaimsError(f"aligned_dra_feature_gates: unknown gate {gate!r}")
    try:
        tolerations = claim_tolerations.check(tolerations, minor, gates)
    except claim_tolerations.TolerationError as exc:
        raise ClaimsError(str(exc)) from None
    classes = device_classes(conf, site, device_options)
    nic_class = _gpu_nic_classes(conf, classes)[1]
    builders = claim_mig.Builders(_class, _template, _exactly)
    try:
        others = [c["metadata"]["name"] for c in classes.values()]
        migs = claim_mig.render(conf, site, mig, topologies, minor, gates, device_options, nic_class, builders, others)
    except claim_mig.MigClaimsError as exc:
        raise ClaimsError(str(exc)) from None
    classes.update(migs["classes"])
    _check_extended_resources(conf, classes, minor, gates)
    objects: list[dict[str, Any]] = list(classes.values())
    skipped = []
    cpu = conf["templates"]["gpu_nic_cpu"]
    if cpu["enabled"] and "dra.cpu" in conf["drivers"] and conf["cpu_numa_attribute"] != conf["numa_attribute"]:
        skipped.append(
            {
                "name": cpu["name"],
                "reason": f"the CPU driver's NUMA attribute {conf['cpu_numa_attribute']} is not "
                f"{conf['numa_attribute']}: one matchAttribute cannot align CPUs with the GPU and NIC",
            }
        )
    pinned, left_out = rail_templates(conf, site, classes, rails)
    if conf["templates"]["rails"]["enabled"]:
        single = conf["templates"]["rails"]["name"].format(rail="*")
        skipped.extend({"name": single, "reason": note} for note in rail_notes)
    skipped.extend(left_out + migs["skipped"])
    names = set()
    for template in claim_templates(conf, site, classes) + pinned + migs["templates"]:
        if tolerations:
            template = claim_tolerations.tolerating(template, tolerations)
        name = template["metadata"]["name"]
        if name in names:
            raise ClaimsError(f"aligned_dra_claims.templates: two templates are named {name!r}")
        names.add(name)
        disabled = dra_gates.fields_disabled(template, minor, gates)
        if not disabled:
            objects.append(template)
            continue
        if name == conf["templates"]["fractional_gpu"]["name"]:
            shared = _shared_claim(conf, site, template, drivers["gpu"])
            skipped.append(
                {
                    "name": name,
                    "reason": "; ".join(disabled)
                    + f": rendered as the shared ResourceClaim {shared['metadata']['name']}",
                }
            )
            objects.append(shared)
            continue
        skipped.append({"name": name, "reason": "; ".join(disabled)})
    required = list(conf["required"])
    rendered_templates = {o["metadata"]["name"] for o in objects if o["kind"] == "ResourceClaimTemplate"}
    for name in required:
        if name not in rendered_templates:
            why = next((s["reason"] for s in skipped if s["name"] == name), "no template has this name")
            raise ClaimsError(f"aligned_dra_claims.required: {name!r} is not rendered for Kubernetes {minor}: {why}")
    return {
        "objects": objects,
        "skipped": skipped,
        "required": required,
        "minor": minor,
        "rails": rails,
        "warnings": migs["warnings"],
    }


# -- validation --------------------------------------------------------------------------------


def _selectors_of(obj: dict[str, Any]) -> list[tuple[str, list[dict[str, Any]]]]:
    """``(where, selectors)`` for every selector list of a class, claim or template."""
    if obj["kind"] == "DeviceClass":
        return [("spec.selectors", (obj.get("spec") or {}).get("selectors") or [])]
    spec = obj.get("spec") or {}
    spec = spec.get("spec") or {} if obj["kind"] == "ResourceClaimTemplate" else spec
    found = []
    for i, request in enumerate((spec.get("devices") or {}).get("requests") or []):
        if request.get("exactly"):
            found.append((f"requests[{i}].exactly.selectors", request["exactly"].get("selectors") or []))
        for j, sub in enumerate(request.get("firstAvailable") or []):
            found.append((f"requests[{i}].firstAvailable[{j}].selectors", sub.get("selectors") or []))
    return found


def limit_problems(obj: dict[str, Any]) -> list[str]:
    """The DRA limits and name rules that the OpenAPI schema does not carry."""
    problems = []
    name = (obj.get("metadata") or {}).get("name")
    if not dra.is_dns_subdomain(name):
        problems.append(f"metadata.name {name!r} is not a DNS subdomain")
    limits = dra.LIMITS
    for where, selectors in _selectors_of(obj):
        if len(selectors) > limits["request_max_selectors"]:
            problems.append(f"{where}: {len(selectors)} selectors, limit {limits['request_max_selectors']}")
    if obj["kind"] == "DeviceClass":
        return problems
    spec = obj.get("spec") or {}
    spec = spec.get("spec") or {} if obj["kind"] == "ResourceClaimTemplate" else spec
    devices = spec.get("devices") or {}
    requests = devices.get("requests") or []
    if len(requests) > limits["claim_max_requests"]:
        problems.append(f"{len(requests)} requests, limit {limits['claim_max_requests']}")
    constraints = devices.get("constraints") or []
    if len(constraints) > limits["claim_max_constraints"]:
        problems.append(f"{len(constraints)} constraints, limit {limits['claim_max_constraints']}")
    total = 0
    request_names = set()
    for request in requests:
        if not dra.is_dns_label(request.get("name")):
            problems.append(f"request name {request.get('name')!r} is not a DNS label")
        request_names.add(request.get("name"))
        subs = request.get("firstAvailable") or []
        if len(subs) > limits["first_available_max_subrequests"]:
            problems.append(
                f"request {request.get('name')}: {len(subs)} firstAvailable entries, "
                f"limit {limits['first_available_max_subrequests']}"
            )
        for sub in subs:
            request_names.add(f"{request.get('name')}/{sub.get('name')}")
        exact = request.get("exactly") or (subs[0] if subs else {})
        if exact.get("allocationMode", "ExactCount") == "ExactCount":
            total += int(exact.get("count") or 1)
    if total > limits["allocation_max_devices"]:
        problems.append(f"asks for {total} devices, an allocation holds at most {limits['allocation_max_devices']}")
    for constraint in constraints:
        for ref in constraint.get("requests") or []:
            if ref not in request_names:
                problems.append(f"a constraint names request {ref!r}, which does not exist")
    return problems


def validate(obj: dict[str, Any], minor: str, feature_gates: dict[str, bool] | None = None) -> list[str]:
    """Every problem of one object for one minor; empty when it may be applied."""
    import kubernetes_validate  # controller-only dependency

    label = f"{obj.get('kind')} {(obj.get('metadata') or {}).get('name')}"
    problems = []
    try:
        kubernetes_validate.validate(obj, f"{dra_gates.minor_of(minor)}.0", strict=True)
    except kubernetes_validate.ValidationError as exc:
        problems.append(f"schema: {exc.message} at {'.'.join(str(p) for p in exc.path)}")
    except Exception as exc:  # InvalidSchemaError and friends carry a message too
        problems.append(f"schema: {exc}")
    problems += dra_gates.fields_disabled(obj, minor, feature_gates)
    problems += limit_problems(obj)
    for where, selectors in _selectors_of(obj):
        for index, selector in enumerate(selectors):
            expression = (selector.get("cel") or {}).get("expression") or ""
            for problem in dra_cel.check_expression(expression):
                problems.append(f"{where}[{index}].cel: {problem}")
    return [f"{label}: {p}" for p in problems]


def validate_all(objects: list[dict[str, Any]], minor: str, feature_gates: dict[str, bool] | None = None) -> list[str]:
    problems = []
    for obj in objects:
        problems += validate(obj, minor, feature_gates)
    return problems


def file_name(obj: dict[str, Any]) -> str:
    """Stable file name of an object in the GitOps output directory."""
    kind = {"DeviceClass": "deviceclass", "ResourceClaimTemplate": "claimtemplate", "ResourceClaim": "claim"}
    return f"{kind.get(obj['kind'], obj['kind'].lower())}-{obj['metadata']['name']}.yaml"
