# SPDX-License-Identifier: Apache-2.0
"""MIG in the claims catalogue: DeviceClasses and ResourceClaimTemplates for a site's MIG devices.

Rendered only where some node of the site runs MIG (``aligned_dra_mig`` mode ``static`` or ``dynamic``,
handed on as ``{host: settings}`` by the filter ``aligned.dra.mig_settings``). Which profiles the site's
GPUs offer comes from the controller's MIG model (``controller/mig/model.node_gpus``) over the site's
probed topologies: a dynamic GPU offers every profile NVML (or, where the probe could not read NVML, the
geometry NVIDIA documents) gives it; a static GPU only the profiles of its layout's instances, since the
driver publishes only the instances that exist.

- DeviceClasses: ``mig.aligned.dev`` (class key ``mig``, renamed through ``aligned_dra_claims.classes.mig``):
  every MIG device (``kind == "mig"``) of the collection's GPU driver, which is the split GPU driver where
  ``split_gpu_driver`` sets one (the MIG devices take their GPU's place in that driver's slices); and,
  where the site's GPUs offer several profiles, one class per profile (``templates.mig.class_name``,
  ``mig-<token>.aligned.dev``, ``profile == "<name>"``), which Kueue quotas can count apart.
- Templates (``aligned_dra_claims.templates.mig``, :data:`DEFAULTS`): ``mig-<token>`` one MIG device of
  the profile; ``mig-<token>-nic`` the same and a NIC on the parent GPU's PCIe root (``matchAttribute``
  ``resource.kubernetes.io/pcieRoot``, as the GPU + NIC pairs: a MIG device carries its parent's root);
  ``mig-<a>-or-<b>`` per prioritized list: one request whose ``firstAvailable`` subrequests take the
  profiles in the list's order (gate ``DRAPrioritizedList``, which :func:`render.render` checks per minor
  as for every template: where it is off the template is left out naming the gate).
- Dynamic MIG on a minor whose partitionable devices are off: the warning
  ``deploy/mig.partitionable_problems`` words (``DRAPartitionableDevices``), naming the hosts.

A profile the settings name that no GPU of the site offers leaves its template out with the reason
(never a template that cannot allocate anywhere); a malformed setting is refused naming it
(:class:`MigClaimsError`, raised as ``ClaimsError`` by the caller).

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

from typing import NamedTuple

from ansible_collections.aligned.dra.plugins.module_utils.controller.deploy import mig as deploy_mig
from ansible_collections.aligned.dra.plugins.module_utils.controller.mig import model as mig_model
from ansible_collections.aligned.dra.plugins.module_utils.dra import mig as dra_mig
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra
from ansible_collections.aligned.dra.plugins.module_utils.node.mig import layout

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any

KEY = "mig"  # the class key of every MIG device (aligned_dra_claims.classes.mig, selectors.mig)
DEFAULT_CLASS = "mig.aligned.dev"
WHERE = "aligned_dra_claims.templates.mig"
OR = "-or-"

DEFAULTS: dict[str, Any] = {
    "enabled": True,
    # profiles to render a template for: [] every profile the site's GPUs offer
    "profiles": [],
    # beside each profile's template, the same with a NIC on the parent GPU's PCIe root
    "nic": True,
    # prioritized lists: [["3g.40gb", "4g.40gb"]] -> mig-3g-40gb-or-4g-40gb (a 3g, else a 4g)
    "prioritized": [],
    "name": "mig-{profile}",
    "nic_name": "mig-{profile}-nic",
    "prioritized_name": "mig-{profiles}",
    "class_name": "mig-{profile}.aligned.dev",
    "selectors": {},
}
REQUEST_ROLES = ("mig", "nic")
# the placeholder each name pattern needs, and a sample value its check formats it with
_PATTERNS = {
    "name": ("profile", "7g-80gb"),
    "nic_name": ("profile", "7g-80gb"),
    "class_name": ("profile", "7g-80gb"),
    "prioritized_name": ("profiles", "3g-40gb-or-4g-40gb"),
}


class MigClaimsError(ValueError):
    """MIG claim settings that cannot be rendered; the message names the setting."""


class Builders(NamedTuple):
    """The catalogue's own object builders (claims/render.py), so MIG objects look like every other."""

    device_class: Callable[..., dict[str, Any]]  # (name, expressions, site, extended_resource)
    template: Callable[..., dict[str, Any]]  # (conf, site, name, requests, constraints)
    exactly: Callable[..., dict[str, Any]]  # (name, class_name, count=1, **extra)


# -- settings ---------------------------------------------------------------------------------------------


def profile_problem(profile: Any) -> str | None:
    """Why ``profile`` is not a GPU instance profile name a MIG device can carry, or None."""
    try:
        layout.parse_profile(profile)
    except ValueError as exc:
        return f"is not a MIG profile name such as 3g.40gb ({exc})"
    if str(profile).split("+", 1)[0].split("-", 1)[0].count(".") != 1:
        # <C>c.<G>g.<GB>gb: the collection makes one compute instance spanning each GPU instance
        return "names a compute instance (<C>c.); name the GPU instance's profile, such as 3g.40gb"
    return None


def _profiles(value: Any, where: str, least: int = 0) -> list[str]:
    if not isinstance(value, list):
        raise MigClaimsError(f"{where} must be a list of MIG profile names such as 3g.40gb (got {value!r})")
    if len(value) < least:
        raise MigClaimsError(f"{where}: a prioritized list names at least {least} profiles (got {value!r})")
    tokens: dict[str, str] = {}
    for index, profile in enumerate(value):
        problem = profile_problem(profile)
        if problem:
            raise MigClaimsError(f"{where}[{index}]: {profile!r} {problem}")
        token = dra_mig.profile_token(profile)
        if token in tokens:
            raise MigClaimsError(f"{where}[{index}]: {profile!r} is there twice (as {tokens[token]!r})")
        tokens[token] = profile
    return list(value)


def check_settings(options: dict[str, Any]) -> None:
    """``aligned_dra_claims.templates.mig`` merged over :data:`DEFAULTS`: refuse what cannot render."""
    for key in ("enabled", "nic"):
        if not isinstance(options[key], bool):
            raise MigClaimsError(f"{WHERE}.{key} must be true or false (got {options[key]!r})")
    _profiles(options["profiles"], f"{WHERE}.profiles")
    lists = options["prioritized"]
    if not isinstance(lists, list):
        raise MigClaimsError(f"{WHERE}.prioritized must be a list of profile lists, such as [[3g.40gb, 4g.40gb]]")
    most = dra.LIMITS["first_available_max_subrequests"]
    for index, entry in enumerate(lists):
        where = f"{WHERE}.prioritized[{index}]"
        _profiles(entry, where, least=2)
        if len(entry) > most:
            raise MigClaimsError(f"{where}: {len(entry)} profiles, a firstAvailable list holds at most {most}")
    for key, (field, sample) in _PATTERNS.items():
        pattern = options[key]
        if not isinstance(pattern, str) or "{" + field + "}" not in pattern:
            raise MigClaimsError(f"{WHERE}.{key}: {pattern!r} must be a string with {{{field}}}")
        try:
            name = pattern.format(**{field: sample})
        except (KeyError, IndexError, ValueError) as exc:
            raise MigClaimsError(
                f"{WHERE}.{key}: {pattern!r} has a placeholder other than {{{field}}} ({exc})"
            ) from None
        if not dra.is_dns_subdomain(name):
            raise MigClaimsError(f"{WHERE}.{key}: {pattern!r} gives {name!r}, which is not a DNS subdomain")
    if options["name"] == options["nic_name"]:
        raise MigClaimsError(f"{WHERE}.nic_name: {options['nic_name']!r} is the name pattern of the MIG-only templates")


# -- the site's MIG --------------------------------------------------------------------------------------


def hosts_with_mig(mig: dict[str, Any] | None) -> dict[str, Any]:
    """``{host: settings}`` of the hosts whose mode is ``static`` or ``dynamic``."""
    return {host: s for host, s in sorted((mig or {}).items()) if mig_model.mode_of(s) != "off"}


def _order(profile: dict[str, Any]) -> tuple[int, int, int, str]:
    """The driver's order (smallest first: memory slices, compute slices, memory), for profiles of several GPUs."""
    size = max((int(p["size"]) for p in profile.get("placements") or []), default=0)
    return (size, int(profile.get("slices") or 0), int(profile.get("memory_bytes") or 0), profile["name"])


def site_profiles(topologies: dict[str, Any] | None, mig: dict[str, Any] | None) -> dict[str, Any]:
    """``{"profiles": [names, smallest first], "gpus": MIG GPUs, "unknown": [hosts without a topology]}``.

    A dynamic GPU offers every profile it has placements for; a static one the profiles of its instances.
    """
    known: dict[str, dict[str, Any]] = {}
    unknown: list[str] = []
    gpus = 0
    for host, settings in hosts_with_mig(mig).items():
        topology = (topologies or {}).get(host)
        if not topology:
            unknown.append(host)
            continue
        try:
            found = mig_model.node_gpus(topology, settings)
        except mig_model.MigModelError as exc:
            raise MigClaimsError(f"{host}: {exc}") from None
        except (TypeError, AttributeError, KeyError, ValueError) as exc:
            # a shape the validation stage refuses (aligned_dra_mig's argument spec) met here first
            raise MigClaimsError(f"{host}: {mig_model.VARIABLE} cannot be read ({type(exc).__name__}: {exc})") from None
        for gpu in found:
            gpus += 1
            profiles = gpu["state"].get("profiles") or []
            if gpu["mode"] == "static":
                by_name = {p["name"]: p for p in profiles}
                offered = [by_name.get(i["profile"], {"name": i["profile"]}) for i in gpu["instances"]]
            else:
                offered = dra_mig.ordered_profiles(profiles)
            for profile in offered:
                known.setdefault(profile["name"], profile)
    names = [p["name"] for p in sorted(known.values(), key=_order)]
    return {"profiles": names, "gpus": gpus, "unknown": unknown}


def _named(hosts: list[str]) -> str:
    shown = ", ".join(hosts[:3])
    return shown + (f" and {len(hosts) - 3} more" if len(hosts) > 3 else "")


def partitionable_warnings(mig: dict[str, Any] | None, minor: str, gates: dict[str, bool] | None) -> list[str]:
    """Dynamic MIG hosts on a minor whose partitionable devices are off, in ``deploy/mig``'s words."""
    said: dict[str, list[str]] = {}
    for host, settings in hosts_with_mig(mig).items():
        if mig_model.mode_of(settings) != "dynamic":
            continue
        for problem in deploy_mig.partitionable_problems(settings, minor, gates):
            said.setdefault(problem, []).append(host)
    return [f"{_named(hosts)}: {mig_model.VARIABLE}: {problem}" for problem, hosts in said.items()]


# -- objects ---------------------------------------------------------------------------------------------


def _selector(driver: str, profile: str | None = None) -> str:
    expression = f'device.driver == "{driver}" && device.attributes["{dra.DRIVER_NAME}"].kind == "{dra_mig.KIND}"'
    if profile is not None:
        expression += f' && device.attributes["{dra.DRIVER_NAME}"].profile == "{profile}"'
    return expression


def _cel(expressions: list[str]) -> dict[str, Any]:
    return {"selectors": [{"cel": {"expression": e}} for e in expressions]} if expressions else {}


def _wanted(
    options: dict[str, Any], offered: list[str], skipped: list[dict[str, str]]
) -> tuple[list[str], list[list[str]]]:
    """The profiles to render a template for, and the prioritized lists, all offered; the rest in ``skipped``."""
    shown = ", ".join(offered) or "none"
    chosen = list(offered)
    if options["profiles"]:
        for profile in options["profiles"]:
            if profile not in offered:
                skipped.append(
                    {
                        "name": options["name"].format(profile=dra_mig.profile_token(profile)),
                        "reason": f"{WHERE}.profiles names {profile}, which no MIG GPU of the site offers "
                        f"(offered: {shown})",
                    }
                )
        chosen = [p for p in offered if p in options["profiles"]]
    lists = []
    for entry in options["prioritized"]:
        missing = [p for p in entry if p not in offered]
        if missing:
            name = options["prioritized_name"].format(profiles=OR.join(dra_mig.profile_token(p) for p in entry))
            skipped.append(
                {
                    "name": name,
                    "reason": f"{WHERE}.prioritized names {', '.join(missing)}, which no MIG GPU of the site "
                    f"offers (offered: {shown})",
                }
            )
            continue
        lists.append(list(entry))
    return chosen, lists


def render(
    conf: dict[str, Any],
    site: str,
    mig: dict[str, Any] | None,
    topologies: dict[str, Any] | None,
    minor: str,
    gates: dict[str, bool] | None,
    device_options: dict[str, Any] | None,
    nic_class: str | None,
    build: Builders,
    other_classes: Iterable[str] = (),
) -> dict[str, Any]:
    """``{"classes": {key: DeviceClass}, "templates", "skipped", "warnings"}`` of the site's MIG; all empty
    where no host runs MIG. The templates still go through the caller's per-minor filter. ``other_classes``:
    the names of the site's other DeviceClasses, which no MIG class may take."""
    out: dict[str, Any] = {"classes": {}, "templates": [], "skipped": [], "warnings": []}
    hosts = hosts_with_mig(mig)
    if not hosts:
        return out
    options = conf["templates"][KEY]
    out["warnings"] = partitionable_warnings(hosts, minor, gates)
    if dra.DRIVER_NAME not in conf["drivers"]:
        out["skipped"].append(
            {
                "name": conf["classes"][KEY],
                "reason": f"{_named(list(hosts))} run MIG, which the collection's driver publishes, and "
                f"aligned_dra_claims.drivers does not name {dra.DRIVER_NAME}",
            }
        )
        return out
    found = site_profiles(topologies, hosts)
    driver = dra.driver_of_kind("gpu", device_options)
    extra = list(conf["selectors"].get(KEY) or [])
    out["classes"][KEY] = build.device_class(
        conf["classes"][KEY], [_selector(driver), *extra], site, conf["extended_resources"].get(KEY)
    )
    # one class per profile where the site's GPUs offer several (quotas count them apart), whatever the templates
    taken = {c["metadata"]["name"] for c in out["classes"].values()} | set(other_classes)
    if conf["classes"][KEY] in other_classes:
        raise MigClaimsError(
            f"aligned_dra_claims.classes.{KEY}: {conf['classes'][KEY]!r} is the name of another DeviceClass"
        )
    per_profile: dict[str, str] = {}
    for profile in found["profiles"] if len(found["profiles"]) > 1 else []:
        name = options["class_name"].format(profile=dra_mig.profile_token(profile))
        if name in taken:
            raise MigClaimsError(f"{WHERE}.class_name: {name!r} is the name of another DeviceClass")
        taken.add(name)
        per_profile[profile] = name
        key = f"{KEY}-{dra_mig.profile_token(profile)}"
        out["classes"][key] = build.device_class(name, [_selector(driver, profile), *extra], site)
    if not options["enabled"]:
        return out
    if found["unknown"]:
        out["skipped"].append(
            {
                "name": options["name"].format(profile="*"),
                "reason": f"{_named(found['unknown'])}: no probed topology, so their GPUs' MIG profiles are "
                "unknown (probe the nodes); the templates are those of the other MIG hosts' GPUs",
            }
        )
    known = [host for host in hosts if host not in found["unknown"]]
    if known and not found["gpus"]:
        out["skipped"].append(
            {
                "name": options["name"].format(profile="*"),
                "reason": f"{_named(known)}: {mig_model.VARIABLE} takes none of their GPUs (none is MIG-capable, "
                "or gpus selects none): no MIG profile to render a template for",
            }
        )
    chosen, lists = _wanted(options, found["profiles"], out["skipped"])
    out["templates"] = _templates(conf, site, options, chosen, lists, per_profile, nic_class, build)
    return out


def _templates(
    conf: dict[str, Any],
    site: str,
    options: dict[str, Any],
    chosen: list[str],
    lists: list[list[str]],
    per_profile: dict[str, str],
    nic_class: str | None,
    build: Builders,
) -> list[dict[str, Any]]:
    """Per profile a template (then each with its NIC), then the prioritized lists."""
    roles = options["selectors"]
    mig_class = conf["classes"][KEY]

    def device(profile: str) -> tuple[str, dict[str, Any]]:
        """The class a request for ``profile`` names and its selectors: the profile's class where rendered,
        else every MIG device's with the profile as a selector (the site offers that one profile)."""
        own = [] if profile in per_profile else [f'device.attributes["{dra.DRIVER_NAME}"].profile == "{profile}"']
        return per_profile.get(profile, mig_class), _cel(own + list(roles.get("mig") or []))

    out = []
    for profile in chosen:
        class_name, selectors = device(profile)
        name = options["name"].format(profile=dra_mig.profile_token(profile))
        out.append(build.template(conf, site, name, [build.exactly("mig", class_name, **selectors)], []))
    if options["nic"] and nic_class:
        for profile in chosen:
            class_name, selectors = device(profile)
            requests = [
                build.exactly("mig", class_name, **selectors),
                build.exactly("nic", nic_class, **_cel(list(roles.get("nic") or []))),
            ]
            constraints = [{"requests": ["mig", "nic"], "matchAttribute": dra.ATTR_PCIE_ROOT}]
            name = options["nic_name"].format(profile=dra_mig.profile_token(profile))
            out.append(build.template(conf, site, name, requests, constraints))
    for entry in lists:
        tokens = [dra_mig.profile_token(p) for p in entry]
        subrequests = []
        for profile, token in zip(entry, tokens):
            class_name, selectors = device(profile)
            subrequests.append(dict({"name": token, "deviceClassName": class_name}, **selectors))
        name = options["prioritized_name"].format(profiles=OR.join(tokens))
        out.append(build.template(conf, site, name, [{"name": "mig", "firstAvailable": subrequests}], []))
    return out
