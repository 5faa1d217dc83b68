# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The validation stage: the whole site's input, checked before anything changes.

Every host's ``aligned_dra_*`` settings are checked against the argument
specs of the collection's roles (``roles/*/meta/argument_specs.yml``, read
from the collection's own files) and of its playbooks (:data:`PLAYBOOK_SPEC`);
a name the collection does not know fails with the closest known name. Then
the checks across hosts and stages, made once per site with the functions the
stages use themselves: one Kubernetes minor per site, the site's claim
settings render (:func:`claims.render`), team quotas and templates name
rendered classes (:func:`teams_settings.settings`), SR-IOV entries select PFs the
node's probe found with enough VFs (:func:`sriov.check_pf`), the devices
the driver publishes need no feature gate that the minor leaves off, and the
driver image's Python and glibc can be built (:func:`driver_deploy.image_platform_problems`,
which the driver role's preflight asks too), and the placement levels, every
host's domains and the site's jobs (:mod:`validate_placement`).

Every problem is a :class:`Problem` (host, variable, value, reason);
:func:`report` says them all in one message, the same problem on many hosts
once per site with the host count.

Runs on the controller; no Ansible imports outside :func:`_validator`.
"""

from __future__ import annotations

import difflib
import fnmatch
import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path

from ansible_collections.aligned.dra.plugins.module_utils.controller.deploy import driver as driver_deploy
from ansible_collections.aligned.dra.plugins.module_utils.controller.inputs.site import DEFAULT_SITE, site_of
from ansible_collections.aligned.dra.plugins.module_utils.controller.topology import fact as topology_fact
from ansible_collections.aligned.dra.plugins.module_utils.controller.validation import (
    validate_catalogue,
    validate_driver,
    validate_placement,
    validate_rails,
    validate_usage,
)
from ansible_collections.aligned.dra.plugins.module_utils.dra import gates as dra_gates
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra
from ansible_collections.aligned.dra.plugins.module_utils.dra import slices as dra_slices
from ansible_collections.aligned.dra.plugins.module_utils.node.network import sriov

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping
    from typing import Any

PREFIX = "aligned_dra_"
# plugins/module_utils/controller/validation/validate.py -> the collection's root
COLLECTION_ROOT = Path(__file__).resolve().parents[4]

# The stages a playbook may run, and the roles whose settings each one reads.
STAGE_ROLES = {
    "probe": ("topology",),
    "network": ("rdma", "sriov"),
    "mig": ("mig",),
    "driver": ("driver",),
    "claims": ("claims",),
    "teams": ("teams",),
    "utilization": ("utilization",),
    "placement": ("placement",),
    "replay": ("replay",),
    "report": ("report",),
    "what_if": (),
}
STAGES = tuple(STAGE_ROLES)

# Settings the playbooks read themselves (no role has them in its argument spec).
PLAYBOOK_SPEC: dict[str, dict[str, Any]] = {
    "aligned_dra_allowed_extra_vars": {
        "type": "list",
        "elements": "str",
        "description": "Extra aligned_dra_* names (fnmatch patterns) that validation lets through.",
    },
    "aligned_dra_preflight_stages": {
        "type": "list",
        "elements": "str",
        "choices": list(STAGES),
        "description": "The stages the preflight checks for (set by the playbooks).",
    },
    "aligned_dra_validate_stages": {
        "type": "list",
        "elements": "str",
        "choices": list(STAGES),
        "description": "The stages the validation checks for (set by the playbooks).",
    },
    "aligned_dra_network_serial": {
        "type": "raw",
        "description": "Nodes per batch of network.yml (count or percentage).",
    },
    "aligned_dra_network_max_fail_percentage": {"type": "int", "description": "Failed nodes network.yml tolerates."},
    "aligned_dra_network_keep_cordoned": {
        "type": "bool",
        "description": "Leave nodes cordoned after the network stage.",
    },
    "aligned_dra_driver_serial": {"type": "raw", "description": "Nodes per batch of driver.yml (count or percentage)."},
    "aligned_dra_converged_nodes": {
        "type": "bool",
        "description": "site.yml skips the network and driver steps of nodes unchanged since the last run.",
    },
    "aligned_dra_capture_hosts": {"type": "str", "description": "Hosts capture.yml snapshots."},
    "aligned_dra_capture_dir": {"type": "path", "description": "Directory of the snapshots on the controller."},
    "aligned_dra_capture_redact_addresses": {"type": "bool", "description": "Leave out MACs and node GUIDs."},
    "aligned_dra_what_if_site": {"type": "str", "description": "The site whose templates what_if.yml plans."},
    "aligned_dra_what_if_trees": {"type": "dict", "description": "Node name -> directory with sys/ and proc/."},
    "aligned_dra_what_if_snapshots": {"type": "raw", "description": "Node name -> archive, or a directory."},
    "aligned_dra_what_if_cache_dir": {"type": "path", "description": "Where snapshots are unpacked."},
    "aligned_dra_what_if_topology_dir": {"type": "path", "description": "A directory of <node>.json facts."},
    "aligned_dra_what_if_dest": {"type": "path", "description": "Where the what-if plan is written."},
}

# Names the collection itself sets while it runs (facts, registered results,
# loop variables, task vars, and the groups the stages make with group_by):
# known, so never "unknown", but nothing to validate.
RUNTIME_NAMES = frozenset(
    """
    aligned_dra_nodes aligned_dra_topology aligned_dra_site_summaries aligned_dra_site_summaries_accounting
    aligned_dra_hosts_left_out aligned_dra_node_ok_hosts
    aligned_dra_site_summaries_computed aligned_dra_summaries_reuse
    aligned_dra_preflight_done aligned_dra_validate_done aligned_dra_report
    aligned_dra_capture_abs_dir aligned_dra_capture_current aligned_dra_capture_file aligned_dra_capture_path
    aligned_dra_capture_result aligned_dra_capture_scratch aligned_dra_claims_mig aligned_dra_replay_mig
    aligned_dra_claims_cluster_slices aligned_dra_claims_hosts aligned_dra_claims_plan aligned_dra_claims_rendered
    aligned_dra_claims_site aligned_dra_claims_rail_rules aligned_dra_claims_rail_node_names aligned_dra_claims_catalogues
    aligned_dra_driver_cdi_specs aligned_dra_driver_checkpoint aligned_dra_driver_cluster
    aligned_dra_driver_cluster_entry aligned_dra_driver_collection_root aligned_dra_driver_config_left
    aligned_dra_driver_config_stat aligned_dra_driver_containerd_config aligned_dra_driver_deps_listing
    aligned_dra_driver_image_dir aligned_dra_driver_image_copied aligned_dra_driver_install_needed
    aligned_dra_driver_install_wanted aligned_dra_driver_installed aligned_dra_driver_kubelet_stat
    aligned_dra_driver_node_python aligned_dra_driver_node_wheels aligned_dra_driver_objects
    aligned_dra_driver_prepared aligned_dra_driver_registry aligned_dra_driver_removed
    aligned_dra_driver_runtime_versions aligned_dra_driver_runtimes aligned_dra_driver_settings
    aligned_dra_driver_site_first aligned_dra_driver_slices aligned_dra_driver_gpu_at_risk
    aligned_dra_driver_gpu_cdi_specs aligned_dra_driver_gpu_checkpoint_now aligned_dra_driver_gpu_now
    aligned_dra_driver_gpu_unit aligned_dra_driver_instance aligned_dra_driver_instances
    aligned_dra_driver_removed_names aligned_dra_driver_split_now
    aligned_dra_driver_token_secret aligned_dra_driver_topology aligned_dra_driver_unit aligned_dra_driver_wheel
    aligned_dra_driver_wheel_build aligned_dra_driver_wheel_target aligned_dra_driver_wheelhouse_deps
    aligned_dra_driver_wheels aligned_dra_driver_metrics_addresses aligned_dra_driver_nvml aligned_dra_driver_monitoring_files
    aligned_dra_k8s_node aligned_dra_network_cordoned aligned_dra_network_old_library aligned_dra_network_plan_options
    aligned_dra_probe_plans_network aligned_dra_validation aligned_dra_site_state aligned_dra_node_state
    aligned_dra_node_failure aligned_dra_node_stage aligned_dra_node_accounting aligned_dra_claims_accounting
    aligned_dra_rdma_disruptive aligned_dra_rdma_plan aligned_dra_rdma_result aligned_dra_rdma_state aligned_dra_rdma_verify
    aligned_dra_gpudirect_plan aligned_dra_gpudirect_result aligned_dra_gpudirect_verify aligned_dra_gpudirect_state
    aligned_dra_gpudirect_settings aligned_dra_gpudirect_wanted
    aligned_dra_mig_settings aligned_dra_mig_file_configs aligned_dra_mig_configs aligned_dra_mig_plan aligned_dra_mig_result aligned_dra_mig_converged
    aligned_dra_mig_rebooted aligned_dra_mig_reapplied aligned_dra_mig_verify aligned_dra_mig_cordoned aligned_dra_mig_nodes aligned_dra_mig_roll
    aligned_dra_mig_persist_only aligned_dra_mig_given_up aligned_dra_mig_boot_python aligned_dra_mig_unit_template aligned_dra_mig_unit_file
    aligned_dra_mig_client_pods aligned_dra_mig_client_pods_on_node aligned_dra_mig_client_units aligned_dra_mig_clients_paused
    aligned_dra_mig_clients_settings aligned_dra_mig_driver_clients aligned_dra_mig_no_unit aligned_dra_mig_node_pods
    aligned_dra_mig_node_pods_left aligned_dra_mig_paused_value aligned_dra_mig_units_stopped
    aligned_dra_mig_units_to_start aligned_dra_mig_units_started aligned_dra_mig_labels_restored aligned_dra_mig_clients_not_back
    aligned_dra_mig_boot_id aligned_dra_mig_cdi_refresh_unit aligned_dra_mig_cdi_refreshed aligned_dra_mig_client_pod_matches
    aligned_dra_mig_clients_unstoppable aligned_dra_mig_record_file aligned_dra_mig_record_in_api aligned_dra_mig_record_nodes
    aligned_dra_mig_record_update aligned_dra_mig_rollout aligned_dra_mig_units_running
    aligned_dra_sriov_plan aligned_dra_sriov_result aligned_dra_sriov_state aligned_dra_sriov_verify
    aligned_dra_claims_site_settings aligned_dra_placement_site_settings aligned_dra_replay_site_settings
    aligned_dra_teams_site_settings aligned_dra_utilization_site_settings aligned_dra_what_if_settings
    aligned_dra_teams_hosts aligned_dra_teams_rendered aligned_dra_teams_site aligned_dra_claims_sites aligned_dra_teams_sites
    aligned_dra_utilization_classes aligned_dra_utilization_conf aligned_dra_utilization_first
    aligned_dra_utilization_nodes_dir aligned_dra_utilization_result aligned_dra_utilization_site
    aligned_dra_what_if_all_trees aligned_dra_what_if_archives aligned_dra_what_if_found aligned_dra_what_if_host
    aligned_dra_what_if_mig aligned_dra_what_if_topology_files
    aligned_dra_what_if_plan aligned_dra_what_if_probes aligned_dra_what_if_rendered aligned_dra_what_if_unpacked
    aligned_dra_utilization_sites aligned_dra_network_plan aligned_dra_checks_done aligned_dra_driver_sites aligned_dra_driver_node_changes
    aligned_dra_driver_rehearsal aligned_dra_driver_unit_template aligned_dra_node_counts_later aligned_dra_driver_readyz
    aligned_dra_network_roll aligned_dra_network_persist_only aligned_dra_network_converged
    aligned_dra_driver_roll aligned_dra_driver_site_only aligned_dra_driver_rails_document aligned_dra_driver_rails_files
    aligned_dra_placement_sites aligned_dra_placement_site aligned_dra_placement_hosts aligned_dra_placement_labels
    aligned_dra_placement_labels_file aligned_dra_placement_cluster_nodes aligned_dra_placement_rails
    aligned_dra_placement_catalogue aligned_dra_placement_jobs
    aligned_dra_placement_accounting aligned_dra_placement_cluster_slices aligned_dra_placement_labelled
    aligned_dra_placement_existing aligned_dra_placement_labels_applied aligned_dra_utilization_measured
    aligned_dra_replay_sites aligned_dra_replay_site aligned_dra_replay_first aligned_dra_replay_conf aligned_dra_replay_plan aligned_dra_replay_runs
    """.split()
)

# Settings that belong to a site: the stages read them from the site's first host.
SITE_SETTINGS = (
    "aligned_dra_kubernetes_version",
    "aligned_dra_feature_gates",
    "aligned_dra_claims",
    "aligned_dra_teams",
    "aligned_dra_output_dir",
    "aligned_dra_placement_levels",
    "aligned_dra_jobs",
)
# Site settings whose unset value reads as an empty list.
_LIST_SETTINGS = ("aligned_dra_placement_levels", "aligned_dra_jobs")
DEFAULT_MINOR = "1.36"  # roles/claims/defaults/main.yml
# A site names a directory of the output (roles' "Check the site name" asserts say the same).
SITE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_VALUE_WIDTH = 80
_HOSTS_SHOWN = 3


@dataclass(frozen=True, order=True)
class Problem:
    """One wrong input: which host, which variable, its value (short text) and why."""

    host: str
    variable: str
    value: str
    reason: str

    def line(self) -> str:
        return f"{self.host}: {self.variable} = {self.value}: {self.reason}"


class ValidationError(ValueError):
    """The site's input is wrong; ``problems`` says where, ``str()`` says it all."""

    def __init__(self, problems: list[Problem], sites: Mapping[str, str] | None = None) -> None:
        self.problems = sorted(set(problems))
        super().__init__(report(self.problems, sites or {}))


def show(value: Any) -> str:
    """A value as the error message writes it: JSON, cut to one short line."""
    try:
        text = json.dumps(value, sort_keys=True, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= _VALUE_WIDTH else text[: _VALUE_WIDTH - 3] + "..."


def _key(value: Any) -> str:
    try:
        return json.dumps(value, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return repr(value)


# -- the known names --------------------------------------------------------------------------


@functools.cache
def role_specs(root: str = str(COLLECTION_ROOT)) -> dict[str, dict[str, dict[str, Any]]]:
    """``{role: {option: spec}}``: every role's main entry point, from the collection's own files."""
    import yaml  # here, not at the top: module_utils import without PyYAML (ansible-test sanity import)

    specs = {}
    for path in sorted(Path(root, "roles").glob("*/meta/argument_specs.yml")):
        entry = (yaml.safe_load(path.read_text()) or {}).get("argument_specs", {}).get("main", {})
        specs[path.parent.parent.name] = dict(entry.get("options") or {})
    return specs


def settings_specs(root: str = str(COLLECTION_ROOT)) -> dict[str, list[dict[str, Any]]]:
    """Every setting with its distinct specs (a setting several roles read may be specified more than once)."""
    found: dict[str, list[dict[str, Any]]] = {}
    for options in role_specs(root).values():
        for name, spec in options.items():
            if spec not in found.setdefault(name, []):
                found[name].append(spec)
    for name, spec in PLAYBOOK_SPEC.items():
        found.setdefault(name, []).append(spec)
    return found


def known_names(root: str = str(COLLECTION_ROOT)) -> frozenset[str]:
    """Every ``aligned_dra_*`` name the collection knows: settings, and what it sets itself."""
    return frozenset(settings_specs(root)) | RUNTIME_NAMES


def suggestion(name: str, known: Iterable[str]) -> str | None:
    """The known name closest to ``name``, if one is close enough."""
    # Compared without the common prefix, which would make every name look close.
    tails = {item[len(PREFIX) :]: item for item in known if item.startswith(PREFIX)}
    close = difflib.get_close_matches(name[len(PREFIX) :], sorted(tails), n=1, cutoff=0.7)
    return tails[close[0]] if close else None


def allowed(name: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, str(pattern)) for pattern in patterns)


# -- argument specs ----------------------------------------------------------------------------


@functools.cache
def _validator(spec_json: str) -> Any:
    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

    return ArgumentSpecValidator(json.loads(spec_json))


def spec_errors(name: str, spec: dict[str, Any], value: Any) -> list[str]:
    """Ansible's own argument-spec errors for one setting's value (empty when it is valid)."""
    validator = _validator(json.dumps({name: spec}, sort_keys=True))
    result = validator.validate({name: value})
    return [str(error) for error in result.errors]


class _Cache:
    """Results per distinct value: a group_vars value shared by 1000 hosts is checked once."""

    def __init__(self) -> None:
        self.store: dict[tuple[str, ...], Any] = {}

    def get(self, key: tuple[str, ...], compute: Callable[[], Any]) -> Any:
        if key not in self.store:
            self.store[key] = compute()
        return self.store[key]


def _required(stages: Iterable[str], root: str) -> dict[str, str]:
    """Required options of the roles the stages run: ``{option: role}``."""
    specs = role_specs(root)
    needed = {}
    for stage in stages:
        for role in STAGE_ROLES.get(stage, ()):
            for name, spec in specs.get(role, {}).items():
                if spec.get("required"):
                    needed[name] = role
    return needed


def check_host_settings(
    host: str,
    settings: Mapping[str, Any],
    stages: Iterable[str] = STAGES,
    root: str = str(COLLECTION_ROOT),
    cache: _Cache | None = None,
) -> list[Problem]:
    """A host's ``aligned_dra_*`` settings: known names, argument specs, required options."""
    cache = cache or _Cache()
    specs = settings_specs(root)
    known = known_names(root)
    patterns = settings.get("aligned_dra_allowed_extra_vars") or []
    if not isinstance(patterns, list):
        patterns = []
    problems = []
    for name in sorted(settings):
        if not name.startswith(PREFIX):
            continue
        value = settings[name]
        if name not in known:
            if allowed(name, patterns):
                continue
            close = cache.get(("suggest", name), lambda name=name: suggestion(name, known))
            hint = (
                f"; did you mean {close}?"
                if close
                else " (aligned_dra_allowed_extra_vars lets deliberate extras through)"
            )
            problems.append(Problem(host, name, show(value), f"unknown variable{hint}"))
            continue
        for spec in specs.get(name, ()):
            key = ("spec", name, _key(spec), _key(value))
            for error in cache.get(key, lambda spec=spec, name=name, value=value: spec_errors(name, spec, value)):
                problems.append(Problem(host, name, show(value), error))
    for name, role in sorted(_required(stages, root).items()):
        if name not in settings:
            problems.append(Problem(host, name, "(not set)", f"required by the {role} role"))
    return problems


# -- checks against the node's probed devices ------------------------------------------------


def check_sriov(host: str, pfs: Any, topology: Mapping[str, Any] | None) -> list[Problem]:
    """Each SR-IOV entry against the node's probed devices: the PF exists, the VFs fit.

    ``topology`` is the node's ``aligned_dra_topology`` fact: the whole
    topology, or the probe's slim fact whose file holds it.
    """
    variable = "aligned_dra_sriov_pfs"
    try:
        wanted = sriov.validate(pfs)
    except sriov.SriovError as exc:
        return [Problem(host, variable, show(pfs), str(exc))]
    try:
        topology = topology_fact.full_topology(host, topology)
    except topology_fact.TopologyFactError as exc:
        return [Problem(host, "aligned_dra_topology", "(the probe's fact)", str(exc))]
    if not topology:
        return []
    problems = []
    for index, (raw, pf) in enumerate(zip(pfs, wanted)):
        field = f"pfs[{index}]"
        try:
            sriov.check_pf(pf, topology, field)
        except sriov.SriovError as exc:
            problems.append(Problem(host, f"{variable}[{index}]", show(raw), str(exc)))
    return problems


def check_driver(
    host: str, options: Any, topology: Mapping[str, Any] | None, minor: str, gates: Mapping[str, bool]
) -> list[Problem]:
    """The devices the driver would publish for this node: options valid, no field the minor's gates leave off."""
    variable = "aligned_dra_device_options"
    # Refused whatever the node's devices: validation may run before the probe.
    if isinstance(options, dict) and options.get("list_attributes") is True:
        try:
            reason = dra_gates.list_attributes_problem(minor, dict(gates))
        except dra.DeviceModelError:
            reason = None  # a bad minor is reported once per site
        if reason:
            return [Problem(host, variable, show(options), reason)]
    try:
        topology = topology_fact.full_topology(host, topology)
    except topology_fact.TopologyFactError as exc:
        return [Problem(host, "aligned_dra_topology", "(the probe's fact)", str(exc))]
    try:
        devices = dra.devices_from_topology(dict(topology or {"devices": []}), options)
        slices = dra_slices.resource_slices(host, devices)
        reasons = [message for item in slices for message in dra_gates.fields_disabled(item, minor, dict(gates))]
    except dra.DeviceModelError as exc:
        reasons = [str(exc)]
    except (KeyError, TypeError) as exc:
        reasons = [f"the node's probed topology cannot be read: {exc!r}"]
    return [Problem(host, variable, show(options), reason) for reason in reasons]


def check_split_gpu_driver(
    site: str, hosts: list[str], setting: Callable[[str, str, Any], Any]
) -> tuple[list[Problem], dict[str, Any]]:
    """The site's ``aligned_dra_device_options.split_gpu_driver``: ``(problems, device options for the claims)``.

    A valid driver name (:func:`dra.split_gpu_driver_problem`: the message
    :func:`check_driver` gives too), the same on every host: the claims'
    GPU class selects one driver name for the whole site. The options
    returned carry only a valid ``split_gpu_driver`` (empty otherwise), so the
    claims render that reads them reports no problem of the device options.
    """
    variable = "aligned_dra_device_options"

    def split_of(host: str) -> tuple[Any, Any]:
        options = setting(host, variable, None)
        name = options.get("split_gpu_driver") if isinstance(options, dict) else None
        return options, (None if name == "" else name)  # unset, None or '': one driver

    problems = []
    first_name = split_of(hosts[0])[1]
    for host in hosts:
        options, name = split_of(host)
        reason = dra.split_gpu_driver_problem(name)
        if reason:
            problems.append(
                Problem(host, variable, show(options), f"device_options.split_gpu_driver {name!r}: {reason}")
            )
        elif name != first_name and not dra.split_gpu_driver_problem(first_name):
            problems.append(
                Problem(
                    host,
                    variable,
                    show(options),
                    f"site {site} runs its driver split by kind on every host or on none: split_gpu_driver is "
                    f"{first_name!r} on its first host {hosts[0]}, {name!r} here",
                )
            )
    valid = first_name is not None and not problems
    return problems, ({"split_gpu_driver": first_name} if valid else {})


def check_driver_settings(host: str, settings: Mapping[str, Any], flagged: set[str], root: str) -> list[Problem]:
    """The host's driver settings (``validate_driver``); a setting it leaves unset has the role's default."""
    defaults = {name: spec.get("default") for name, spec in role_specs(root).get("driver", {}).items()}
    found = (
        [] if flagged & set(driver_deploy.IMAGE_SETTINGS) else validate_driver.image_problems(settings, defaults, root)
    )
    found += [item for item in validate_driver.host_problems(host, settings, defaults) if item[0] not in flagged]
    shown = {**defaults, "aligned_dra_driver_node_name": host, **settings}  # the role's node name is the host's
    return [Problem(host, name, show(shown.get(name)), reason) for name, reason in found]


def check_rails(host: str, settings: Mapping[str, Any]) -> list[Problem]:
    """The host's ``aligned_dra_rails`` against its probe (its shape only without one)."""
    problems = []
    for variable, reason in validate_rails.rail_problems(host, settings):
        value = show(settings.get(variable)) if variable == validate_rails.VARIABLE else "(the probe's fact)"
        problems.append(Problem(host, variable, value, reason))
    return problems


# -- checks per site ---------------------------------------------------------------------------


def _variable_of(message: str, default: str) -> str:
    head = message.split(":", 1)[0].split(".", 1)[0].split("[", 1)[0].strip()
    return head if head.startswith(PREFIX) else default


def _shown(value: Any) -> str:
    return "(not set)" if value is None else show(value)


def _site_value(name: str, value: Any) -> str:
    """What two hosts of a site must agree on: the minor of the version (unset is the default), else the value."""
    if name == "aligned_dra_kubernetes_version":
        try:
            return dra_gates.minor_of(DEFAULT_MINOR if value is None else value)
        except dra.DeviceModelError:
            return _key(value)
    if name in _LIST_SETTINGS and value is None:
        return _key([])
    return _key(value)


def check_site(
    site: str, hosts: list[str], setting: Callable[[str, str, Any], Any], stages: Iterable[str]
) -> list[Problem]:
    """One site's settings across its hosts and stages; ``setting(host, name, default)`` reads a value."""
    stages = set(stages)
    first = hosts[0]
    problems = []
    # The stages read a site's settings from its first host: the others must agree.
    for name in SITE_SETTINGS:
        reference = _site_value(name, setting(first, name, None))
        for host in hosts[1:]:
            value = setting(host, name, None)
            if _site_value(name, value) != reference:
                what = "Kubernetes minor" if name == "aligned_dra_kubernetes_version" else "value"
                problems.append(
                    Problem(
                        host,
                        name,
                        _shown(value),
                        f"site {site} has one {what} for all its hosts; its first host {first} has "
                        f"{_shown(setting(first, name, None))}",
                    )
                )
    version = setting(first, "aligned_dra_kubernetes_version", None) or DEFAULT_MINOR
    gates = setting(first, "aligned_dra_feature_gates", {}) or {}
    try:
        minor = dra_gates.minor_of(version)
    except dra.DeviceModelError as exc:
        return [*problems, Problem(first, "aligned_dra_kubernetes_version", show(version), str(exc))]
    if "driver" in stages:
        for host in hosts:
            problems.extend(
                check_driver(
                    host,
                    setting(host, "aligned_dra_device_options", {}) or {},
                    setting(host, "aligned_dra_topology", None),
                    minor,
                    gates,
                )
            )
    # The driver split by kind: one valid GPU driver name per site, which the claims' GPU class selects.
    found, device_options = check_split_gpu_driver(site, hosts, setting)
    if stages & {"driver", "claims", "teams", "utilization", "placement"}:
        problems += found
    # Placement levels and domains: the placement stage's, and the teams stage's Kueue Topology.
    placement_levels: list[dict[str, str]] | None = []
    if stages & {"placement", "teams"}:
        placement_levels, found = validate_placement.check_levels(site, hosts, setting, show)
        teams_raw = setting(first, "aligned_dra_teams", {})
        if placement_levels is not None and validate_placement.uses_levels(stages, placement_levels, teams_raw):
            found += validate_placement.check_hosts(site, hosts, setting, placement_levels, show)
        problems += [Problem(*item) for item in found]
    if not stages & {"claims", "teams", "utilization", "placement"}:
        return problems

    def site_problem(exc: Exception, default: str) -> list[Problem]:
        # Said for every host of the site that carries the value (usually group_vars: once, with the count).
        variable = _variable_of(str(exc), default)
        value = _key(setting(first, variable, None))
        shown = _shown(setting(first, variable, None))
        holders = [host for host in hosts if _key(setting(host, variable, None)) == value]
        return [Problem(host, variable, shown, f"site {site}: {exc}") for host in holders]

    site_input = {
        "version": version,
        "gates": gates,
        "minor": minor,
        "device_options": device_options,
        "placement_levels": placement_levels,
        "show": show,
    }
    problems += validate_catalogue.check_catalogue(site, hosts, setting, stages, site_input, Problem, site_problem)
    return problems


def validate(
    hosts: Iterable[str],
    setting_names: Callable[[str], Iterable[str]],
    setting: Callable[[str, str, Any], Any],
    stages: Iterable[str] = STAGES,
    root: str = str(COLLECTION_ROOT),
) -> tuple[list[Problem], dict[str, str]]:
    """Every check for every host, each host read once; ``(problems, {host: site})``.

    ``setting_names(host)`` lists a host's variable names, ``setting(host, name,
    default)`` gives one value (templated).
    """
    stages = list(stages)
    cache = _Cache()
    problems: list[Problem] = []
    sites: dict[str, str] = {}
    by_site: dict[str, list[str]] = {}
    read: dict[str, dict[str, Any]] = {}
    for host in hosts:
        names = [name for name in setting_names(host) if name.startswith(PREFIX)]
        values = {}
        for name in names:
            try:
                values[name] = setting(host, name, None)
            except Exception as exc:  # a template that cannot be resolved is the input's fault
                problems.append(Problem(host, name, "(not templated)", f"cannot be templated: {exc}"))
        read[host] = values
        found = check_host_settings(host, values, stages, root, cache)
        problems.extend(found)
        site = site_of(values)
        if not SITE_NAME.match(site):
            reason = "aligned_dra_site must be letters, digits, '.', '_' or '-' (it names a directory)"
            found.append(Problem(host, "aligned_dra_site", show(site), reason))
            problems.append(found[-1])
        sites[host] = site
        by_site.setdefault(site, []).append(host)
        flagged = {problem.variable for problem in found}
        if "network" in stages and values.get("aligned_dra_sriov_pfs") and "aligned_dra_sriov_pfs" not in flagged:
            problems.extend(check_sriov(host, values["aligned_dra_sriov_pfs"], values.get("aligned_dra_topology")))
        if "driver" in stages:
            problems.extend(check_driver_settings(host, values, flagged, root))
        # Every stage: the probe, the driver, the claims and the report all read the rails.
        if validate_rails.VARIABLE not in flagged:
            problems.extend(check_rails(host, values))
        if "utilization" in stages and validate_usage.VARIABLE not in flagged:
            usage = values.get(validate_usage.VARIABLE)
            problems += [
                Problem(host, validate_usage.VARIABLE, show(usage), r) for r in validate_usage.usage_problems(usage)
            ]
    for site, members in sorted(by_site.items()):
        problems.extend(check_site(site, sorted(members), lambda h, n, d: read[h].get(n, d), stages))
    return sorted(set(problems)), sites


# -- the message -------------------------------------------------------------------------------


def _who(hosts: list[str], sites: Mapping[str, str]) -> list[str]:
    """Hosts as the message names them: one host by name, many per site with the count."""
    if len(hosts) == 1:
        return hosts
    per_site: dict[str, list[str]] = {}
    for host in hosts:
        per_site.setdefault(sites.get(host, DEFAULT_SITE), []).append(host)
    out = []
    for site, members in sorted(per_site.items()):
        if len(members) == 1:
            out.append(members[0])
            continue
        shown = ", ".join(members[:_HOSTS_SHOWN])
        more = f" and {len(members) - _HOSTS_SHOWN} more" if len(members) > _HOSTS_SHOWN else ""
        out.append(f"site {site}, {len(members)} hosts ({shown}{more})")
    return out


def report(problems: Iterable[Problem], sites: Mapping[str, str] | None = None) -> str:
    """All problems in one message, sorted; the same problem on many hosts said once per site."""
    sites = sites or {}
    grouped: dict[tuple[str, str, str], list[str]] = {}
    for problem in sorted(set(problems)):
        grouped.setdefault((problem.variable, problem.value, problem.reason), []).append(problem.host)
    if not grouped:
        return ""
    lines = []
    for (variable, value, reason), hosts in grouped.items():
        for who in _who(sorted(set(hosts)), sites):
            lines.append(Problem(who, variable, value, reason).line())
    lines.sort()
    count = len(lines)
    head = f"aligned.dra validation: {count} problem{'s' if count != 1 else ''} in the inventory; nothing was changed."
    return "\n".join([head, *(f"- {line}" for line in lines)])
