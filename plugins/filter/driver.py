# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Filters the driver role uses to build its cluster objects, its instances on a node (one plugin, or two split
by kind), node kubeconfigs, wheel platforms and each site's rails file, and to check its image's platform and
the split's settings."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.aligned.dra.plugins.module_utils.controller.deploy import driver as driver_deploy
from ansible_collections.aligned.dra.plugins.module_utils.controller.deploy import driver_instances, monitoring
from ansible_collections.aligned.dra.plugins.module_utils.controller.fabric import rails as fabric_rails
from ansible_collections.aligned.dra.plugins.module_utils.node.topology.rails import RailRuleError

# DaemonSet mode: the site's rails file as a ConfigMap, mounted as a directory (never with subPath, which
# the kubelet does not update) so a changed file reaches the running driver without a new pod
RAILS_CONFIGMAP_SUFFIX = "-rails"
RAILS_KEY = "rails.json"
RAILS_MOUNT = "/etc/aligned-dra/rails"


def driver_objects(settings: dict[str, Any]) -> list[dict[str, Any]]:
    """Every cluster object of the driver install for ``settings``, split by kind where it says so
    (see driver_instances.objects)."""
    try:
        return driver_instances.objects(dict(settings))
    except driver_deploy.DeployError as exc:
        raise AnsibleFilterError(f"driver_objects: {exc}") from exc


def driver_args(settings: dict[str, Any], instance: dict[str, Any] | None = None) -> list[str]:
    """Driver options shared by the systemd unit and the DaemonSet, of one instance (default: the main plugin;
    see driver_instances.instance_args)."""
    try:
        return driver_instances.instance_args(dict(settings), None if instance is None else dict(instance))
    except driver_deploy.DeployError as exc:
        raise AnsibleFilterError(f"driver_args: {exc}") from exc


def driver_instances_of(settings: dict[str, Any]) -> list[dict[str, Any]]:
    """The driver's instances on each node, the main plugin first (see driver_instances.instances)."""
    try:
        return driver_instances.instances(dict(settings))
    except driver_deploy.DeployError as exc:
        raise AnsibleFilterError(f"driver_instances: {exc}") from exc


def driver_split_problems(settings: dict[str, Any]) -> list[str]:
    """``<variable> = <value>: <reason>`` for each rule of the split by kind that ``settings`` break."""
    return driver_instances.problem_lines(driver_instances.split_problems(dict(settings)))


def driver_kubeconfig(token: str, server: str, ca_data: str, node: str) -> dict[str, Any]:
    """A node's kubeconfig for the host-mode driver."""
    try:
        return driver_deploy.node_kubeconfig(server, ca_data, token, node)
    except driver_deploy.DeployError as exc:
        raise AnsibleFilterError(f"driver_kubeconfig: {exc}") from exc


def driver_wheel_platforms(machine: str, libc: str, libc_version: str) -> list[str]:
    """``pip download --platform`` values for a node."""
    try:
        return driver_deploy.wheel_platforms(machine, libc, libc_version)
    except driver_deploy.DeployError as exc:
        raise AnsibleFilterError(f"driver_wheel_platforms: {exc}") from exc


def driver_image_problems(settings: dict[str, Any]) -> list[str]:
    """``<variable> = <value>: <reason>`` for each rule of the driver image's platform the settings break.

    The validation stage asks the same function (driver_deploy.image_platform_problems).
    """
    settings = dict(settings)
    try:
        found = driver_deploy.image_platform_problems(settings)
    except driver_deploy.DeployError as exc:
        raise AnsibleFilterError(f"driver_image_problems: {exc}") from exc
    return [f"{variable} = {json.dumps(settings[variable], default=str)}: {reason}" for variable, reason in found]


def driver_rails_files(sites: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each site's rails file (controller/fabric/rails.rails_file), for the sites where a host sets a rule.

    ``sites`` is what the ``rail_rules`` filter gives: site -> ``{"rules": {host:
    aligned_dra_rails}, "node_names": {host: Kubernetes node name}}``.
    """
    files = {}
    for site, entry in dict(sites).items():
        rules = entry.get("rules") if isinstance(entry, dict) else None
        names = (entry.get("node_names") or {}) if isinstance(entry, dict) else None
        if not isinstance(rules, dict) or not isinstance(names, dict):
            raise AnsibleFilterError(
                f"driver_rails_files: site {site!r}: expected {{rules: host -> rule, node_names: host -> name}} "
                "(the rail_rules filter's)"
            )
        try:
            document = fabric_rails.rails_file(rules, names)
        except RailRuleError as exc:
            raise AnsibleFilterError(f"driver_rails_files: site {site}: {exc}") from exc
        if document["nodes"]:
            files[site] = document
    return files


def _plain(value: Any) -> Any:
    """A copy of ``value`` as plain dicts and lists. copy.deepcopy of the containers Ansible hands a filter
    cost about 1.5 s per driver.yml run (each copy is a templating object); this walks the data once."""
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


def _with_own_daemonset(objects: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int | None]:
    """``objects`` as a new list whose DaemonSet (its position, or None) is a copy the caller may change; the
    other objects are shared, unchanged."""
    out = list(objects)
    position = next((i for i, item in enumerate(out) if item.get("kind") == "DaemonSet"), None)
    if position is not None:
        out[position] = _plain(out[position])
    return out, position


def driver_rails_objects(objects: list[dict[str, Any]], document: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The objects with the site's rails file for the DaemonSet: a ConfigMap before it, mounted, ``--rails-file``.

    Without a rails file, or without a DaemonSet (host mode copies the file to the node), unchanged.
    """
    if not document:
        return list(objects)
    out, position = _with_own_daemonset(objects)
    if position is None:
        return out
    daemonset = out[position]
    meta = daemonset["metadata"]
    name = meta["name"] + RAILS_CONFIGMAP_SUFFIX
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": meta["namespace"], "labels": dict(meta.get("labels") or {})},
        "data": {RAILS_KEY: json.dumps(document, indent=1, sort_keys=True) + "\n"},
    }
    pod = daemonset["spec"]["template"]["spec"]
    pod.setdefault("volumes", []).append({"name": "rails", "configMap": {"name": name}})
    container = pod["containers"][0]
    container.setdefault("volumeMounts", []).append({"name": "rails", "mountPath": RAILS_MOUNT, "readOnly": True})
    container.setdefault("args", []).append(f"--rails-file={RAILS_MOUNT}/{RAILS_KEY}")
    out.insert(position, configmap)
    return out


def driver_monitoring_problems(
    settings: dict[str, Any], site: dict[str, Any] | None = None, addresses: dict[str, Any] | None = None
) -> list[str]:
    """``<variable> = <value>: <reason>`` for each problem of ``settings['monitoring']`` (aligned_dra_monitoring,
    controller/deploy/monitoring.py); ``site``: host -> its setting, for the hosts of the site that disagree;
    ``addresses``: node -> host mode's metrics address."""
    settings = dict(settings)
    value = settings.get("monitoring")
    found = monitoring.problems(value, settings) + monitoring.site_problems(dict(site or {}))
    found += monitoring.address_problems(value, str(settings.get("mode", "host")), dict(addresses or {}))
    return monitoring.problem_lines(found)


def _monitoring_parts(settings: dict[str, Any]) -> tuple[Any, dict[str, Any], list[dict[str, Any]]]:
    settings = dict(settings)
    value = settings.get("monitoring")
    found = monitoring.problems(value, settings)
    if found:
        raise AnsibleFilterError("driver_monitoring: " + "; ".join(monitoring.problem_lines(found)))
    try:
        return value, settings, driver_instances.instances(settings)
    except driver_deploy.DeployError as exc:
        raise AnsibleFilterError(f"driver_monitoring: {exc}") from exc


def driver_monitoring_objects(
    objects: list[dict[str, Any]], settings: dict[str, Any], addresses: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """The objects with the site's monitoring (aligned_dra_monitoring): the DaemonSet's GPU plugin given NVML
    where use is measured, and the monitors, rules and dashboard after the rest. Off: unchanged."""
    value, settings, found = _monitoring_parts(settings)
    out, position = _with_own_daemonset(objects) if monitoring.nvml(value) else (list(objects), None)
    if position is not None:
        pod = out[position]["spec"]["template"]["spec"]
        gpu = next(item["container"] for item in found if driver_instances.runs_reclaim(item))
        container = next(item for item in pod["containers"] if item["name"] == gpu)
        monitoring.pod_spec(value, settings, pod, container)
    return out + monitoring.objects(value, settings, found, dict(addresses or {}))


def driver_monitoring_files(settings: dict[str, Any], addresses: dict[str, Any] | None = None) -> dict[str, str]:
    """Without the operator, the scrape configuration (and rule file) for a plain Prometheus: path below the
    site's driver directory -> text. None with the operator, or off."""
    value, settings, found = _monitoring_parts(settings)
    return monitoring.files(value, settings, found, dict(addresses or {}))


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "driver_objects": driver_objects,
            "driver_args": driver_args,
            "driver_instances": driver_instances_of,
            "driver_split_problems": driver_split_problems,
            "driver_kubeconfig": driver_kubeconfig,
            "driver_wheel_platforms": driver_wheel_platforms,
            "driver_image_problems": driver_image_problems,
            "driver_rails_files": driver_rails_files,
            "driver_rails_objects": driver_rails_objects,
            "driver_monitoring_problems": driver_monitoring_problems,
            "driver_monitoring_objects": driver_monitoring_objects,
            "driver_monitoring_files": driver_monitoring_files,
        }
