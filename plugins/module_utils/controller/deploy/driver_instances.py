# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The driver's instances on a node: one kubelet plugin, or two split by kind.

KAI Scheduler counts a node's DRA GPUs as the devices of the ResourceSlices whose
driver name contains ``gpu``. A site that sets ``split_gpu_driver`` in
``aligned_dra_device_options`` runs the bundled driver twice per node: the main
plugin keeps ``aligned_dra_driver_name`` and publishes NICs and VFs
(``--kinds=nic,vf``), a second plugin publishes GPUs and accelerators under the
split name (``--kinds=gpu,accelerator``). Unset or empty: one plugin, every kind,
and exactly the arguments and objects of a site that never heard of the split.

Each instance has its own sockets and CDI spec files (the driver names them by
its driver name), its own state directory, MPS directory and metrics port:

- state: the main plugin keeps ``state_dir``; the GPU plugin ``<state_dir>/gpu``.
  The driver reads its checkpoint and rails record by name and lists its state
  directory only for its own temporary files, so a subdirectory is never
  touched by the main plugin, and the one host path (systemd ``ReadWritePaths``,
  the DaemonSet's ``state`` volume) holds both.
- MPS: the GPU plugin gets ``<mps_root>/gpu``. A starting driver that publishes
  GPUs stops every MPS daemon under its MPS directory that its own checkpoint
  does not use: with one directory, a GPU plugin starting beside GPU claims the
  main plugin still holds (a split forced on) would stop their daemons under
  running pods. A driver's scan reads only names shaped like PCI addresses, so
  the main plugin's never sees the ``gpu`` directory.
- metrics: the GPU plugin listens on ``metrics_port + 1`` (0 stays 0: off).
- reclaim (``aligned_dra_driver_reclaim``, docs/thin-provisioning.md): only the plugin that publishes
  GPUs runs the watcher (it watches the GPUs of its own checkpoint); the NIC plugin gets no option.
- MIG (``aligned_dra_mig``, controller/deploy/mig.py): ``--mig`` and ``--mig-gpus``, and in the DaemonSet
  NVML with its MIG capabilities and the host's ``/proc``, go to the plugin that publishes GPUs only.

Pure functions, no Ansible imports: the ``driver`` role calls them through the
``aligned.dra.driver_instances``, ``aligned.dra.driver_args``,
``aligned.dra.driver_objects`` and ``aligned.dra.driver_split_problems`` filters,
and the validation stage can ask :func:`split_problems`, :func:`reclaim_problems` and :func:`mig_problems` for the
same words.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from ansible_collections.aligned.dra.plugins.module_utils.controller.deploy import driver, reclaim
from ansible_collections.aligned.dra.plugins.module_utils.controller.deploy import mig as deploy_mig
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra

SPLIT_KEY = "split_gpu_driver"
SPLIT_VARIABLE = "aligned_dra_device_options." + SPLIT_KEY
DEFAULT_DRIVER_NAME = "dra.aligned.dev"
DEFAULT_METRICS_PORT = 8089
# What each plugin publishes when the site runs split (the driver's --kinds); the main plugin of an
# unsplit site gets no --kinds (every kind, the driver's default).
GPU_KINDS = tuple(dra.SPLIT_GPU_KINDS)
MAIN_KINDS = tuple(kind for kind in dra.DEVICE_KINDS if kind not in GPU_KINDS)
# The GPU plugin's state and MPS directories, below the main plugin's
GPU_SUBDIR = "gpu"
UNITS = {"main": "aligned-dra-driver.service", "gpu": "aligned-dra-driver-gpu.service"}
CONTAINERS = {"main": "driver", "gpu": "driver-gpu"}
PORT_NAMES = {"main": "metrics", "gpu": "metrics-gpu"}
# KAI Scheduler's rule: a DRA GPU is a device of a driver whose name contains this
KAI_GPU_WORD = "gpu"
# The driver's --fractional-gpus=auto shares GPUs from this Kubernetes minor on
# (aligned_dra_driver.cli.fractional_by_version); the reclaim watcher has nothing to do without them.
FRACTIONAL_FLAG = "--fractional-gpus"
FRACTIONAL_AUTO_FROM = (1, 36)


def split_name(settings: dict[str, Any]) -> str:
    """The split GPU driver's name in ``settings`` (``split_gpu_driver``), '' when the site runs one driver.

    Refuses a name that :func:`split_problems` refuses.
    """
    problems = split_problems(settings)
    if problems:
        raise driver.DeployError("; ".join(problem_lines(problems)))
    return settings.get(SPLIT_KEY) or ""


def split_problems(settings: dict[str, Any]) -> list[tuple[str, Any, str]]:
    """``(variable, value, reason)`` for every rule of the split that ``settings`` break; empty when they hold.

    ``settings`` holds ``split_gpu_driver`` (unset, None or '' - one driver), ``driver_name`` and
    ``metrics_port`` as the role's settings do. The name's own rule is the device model's
    (:func:`dra.split_gpu_driver_problem`, which the validation stage asks too): a DNS subdomain of
    at most 63 characters that contains ``gpu`` (KAI Scheduler counts only those drivers' devices).
    Then what only the install knows: it differs from ``aligned_dra_driver_name``, which does not
    contain ``gpu`` (KAI would count the main plugin's NICs as GPUs), and the GPU plugin's metrics
    port (the main's + 1) is a TCP port.
    """
    value = settings.get(SPLIT_KEY)
    if value is None or value == "":
        return []
    main = settings.get("driver_name", DEFAULT_DRIVER_NAME)
    if not isinstance(value, str):
        return [(SPLIT_VARIABLE, value, "must be a driver name (a string such as 'gpu.aligned.dev'), or empty")]
    problems = []
    reason = dra.split_gpu_driver_problem(value)
    if reason:
        problems.append((SPLIT_VARIABLE, value, reason))
    if value == main:
        if not reason:
            problems.append((SPLIT_VARIABLE, value, f"must differ from aligned_dra_driver_name ({main})"))
    elif isinstance(main, str) and KAI_GPU_WORD in main:
        problems.append(
            (
                "aligned_dra_driver_name",
                main,
                f"must not contain '{KAI_GPU_WORD}' when {SPLIT_VARIABLE} is set: the main driver publishes "
                "the NICs, and KAI Scheduler would count them as GPUs",
            )
        )
    port = settings.get("metrics_port", DEFAULT_METRICS_PORT)
    if _port(port) == 65535:
        problems.append(
            (
                "aligned_dra_driver_metrics_port",
                port,
                f"must be at most 65534 when {SPLIT_VARIABLE} is set: the GPU plugin listens on the next port",
            )
        )
    return problems


def problem_lines(problems: list[tuple[str, Any, str]]) -> list[str]:
    """``<variable> = <value as JSON>: <reason>``, the words the role's preflight and the validation stage say."""
    return driver.problem_lines(problems)


def fractional_gpus(settings: dict[str, Any]) -> str:
    """The ``--fractional-gpus`` the plugin that publishes GPUs runs with: ``on``, ``off`` or ``auto``.

    ``fractional_gpus`` in ``settings``: on. Host mode: the last one in ``extra_args`` (the unit puts
    them after the role's options, and the driver takes the last); the DaemonSet takes no extra args.
    """
    value = "on" if settings.get("fractional_gpus") else "auto"
    if settings.get("mode", "host") != "host":
        return value
    args = [str(arg) for arg in settings.get("extra_args") or []]
    for index, arg in enumerate(args):
        if arg.startswith(FRACTIONAL_FLAG + "="):
            value = arg.split("=", 1)[1]
        elif arg == FRACTIONAL_FLAG and index + 1 < len(args):
            value = args[index + 1]
    return value


def reclaim_problems(settings: dict[str, Any]) -> list[tuple[str, Any, str]]:
    """``(variable, value, reason)`` for every rule of the reclaim watcher that ``settings`` break.

    The setting's own shape (:func:`reclaim.problems`); with ``mode: evict``, what only the install
    knows: the GPUs are shared (a watcher without fractional GPUs never acts, and the nodes would still
    hold the right to evict any pod of the cluster), and host mode's ``extra_args`` do not set the
    watcher a second time.
    """
    problems = reclaim.problems(settings.get("reclaim"))
    if problems or not driver.reclaim_args(settings):
        return problems
    host = settings.get("mode", "host") == "host"
    fractional = fractional_gpus(settings)
    version = str(settings.get("kubernetes_version") or "")
    minor = re.match(r"^1\.([0-9]+)", version)
    reason = ""
    if fractional == "off":
        reason = "the driver runs with --fractional-gpus=off (aligned_dra_driver_extra_args)"
    elif fractional == "auto" and minor and (1, int(minor.group(1))) < FRACTIONAL_AUTO_FROM:
        reason = (
            f"the driver's --fractional-gpus=auto shares GPUs from Kubernetes 1.{FRACTIONAL_AUTO_FROM[1]} on, "
            f"and the site runs {version} (aligned_dra_kubernetes_version)"
        )
    if reason:
        remedy = "set mode off" + (
            ", or give the driver --fractional-gpus=on (aligned_dra_driver_extra_args) on a cluster with"
            " DRAConsumableCapacity enabled"
            if host
            else ""
        )
        problems.append(
            (
                f"{driver.RECLAIM_VARIABLE}.mode",
                "evict",
                f"reclaim needs fractional GPUs, but {reason}: the watcher would never act, while every node's "
                f"credentials could evict any pod of the cluster; {remedy}",
            )
        )
    for arg in (settings.get("extra_args") or []) if host else []:
        if str(arg).startswith("--reclaim"):
            problems.append(
                (
                    "aligned_dra_driver_extra_args",
                    arg,
                    f"sets the reclaim watcher too: set it in {driver.RECLAIM_VARIABLE} only",
                )
            )
    return problems


def mig_problems(settings: dict[str, Any]) -> list[tuple[str, Any, str]]:
    """``(variable, value, reason)`` for what the driver cannot run with in ``settings['mig']`` (the inventory's
    ``aligned_dra_mig``): its shape as the driver reads it, and ``dynamic`` on a minor whose partitionable devices
    are off (:func:`deploy_mig.partitionable_problems`, the validation stage's words)."""
    return deploy_mig.problems(settings.get("mig"), settings.get("kubernetes_version"), settings.get("feature_gates"))


def runs_reclaim(instance: dict[str, Any]) -> bool:
    """Whether the instance runs the reclaim watcher (when it is on) and MIG: the plugin that publishes GPUs."""
    return not instance["kinds"] or "gpu" in instance["kinds"]


def _port(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def _below(path: Any, name: str) -> Any:
    return f"{path.rstrip('/')}/{name}" if isinstance(path, str) else path


def instances(settings: dict[str, Any]) -> list[dict[str, Any]]:
    """The driver's instances on each node of a site with ``settings``, the main plugin first.

    Each: ``role`` (``main``, ``gpu``), ``name`` (the driver name), ``kinds`` (its ``--kinds``;
    empty: every kind), ``state_dir``, ``mps_root``, ``metrics_port`` (0: off), ``unit`` (host
    mode's systemd unit), ``container`` (the DaemonSet's container), ``port_name`` (the metrics
    port's name in the pod) and ``rails`` (whether it takes the site's rails file: only the plugin
    that publishes NICs).
    """
    split = split_name(settings)
    problems = reclaim_problems(settings) + mig_problems(settings)
    if problems:
        raise driver.DeployError("; ".join(problem_lines(problems)))
    port = settings.get("metrics_port", DEFAULT_METRICS_PORT)
    if _port(port) is None or not 0 <= _port(port) <= 65535:
        raise driver.DeployError(f"metrics_port: {port!r} must be 0 (off) or a TCP port")
    port = _port(port)
    main = {
        "role": "main",
        "name": settings.get("driver_name", DEFAULT_DRIVER_NAME),
        "kinds": list(MAIN_KINDS) if split else [],
        "state_dir": settings.get("state_dir", "/var/lib/aligned-dra"),
        "mps_root": settings.get("mps_root", "/run/aligned-dra/mps"),
        "metrics_port": port,
        "unit": UNITS["main"],
        "container": CONTAINERS["main"],
        "port_name": PORT_NAMES["main"],
        "rails": True,
    }
    if not split:
        return [main]
    gpu = dict(
        main,
        role="gpu",
        name=split,
        kinds=list(GPU_KINDS),
        state_dir=_below(main["state_dir"], GPU_SUBDIR),
        mps_root=_below(main["mps_root"], GPU_SUBDIR),
        metrics_port=port + 1 if port else 0,
        unit=UNITS["gpu"],
        container=CONTAINERS["gpu"],
        port_name=PORT_NAMES["gpu"],
        rails=False,
    )
    return [main, gpu]


def driver_names(settings: dict[str, Any]) -> list[str]:
    """Every driver name the site's plugins publish under, the main one first."""
    return [item["name"] for item in instances(settings)]


def instance_args(settings: dict[str, Any], instance: dict[str, Any] | None = None) -> list[str]:
    """:func:`driver.driver_args` for one instance (default: the main plugin), with its ``--kinds``."""
    if instance is None:
        instance = instances(settings)[0]
    if not isinstance(instance, dict) or not {"name", "kinds", "state_dir", "mps_root"} <= set(instance):
        raise driver.DeployError(f"instance: {instance!r} is not one of driver_instances' entries")
    args = driver.driver_args(
        dict(
            settings,
            driver_name=instance["name"],
            state_dir=instance["state_dir"],
            mps_root=instance["mps_root"],
            reclaim=settings.get("reclaim") if runs_reclaim(instance) else None,
            mig=settings.get("mig") if runs_reclaim(instance) else None,
        )
    )
    if instance["kinds"]:
        args.insert(1, "--kinds=" + ",".join(instance["kinds"]))
    return args


def _container(template: dict[str, Any], settings: dict[str, Any], instance: dict[str, Any]) -> dict[str, Any]:
    """The DaemonSet container of one instance: the main container's image, mounts and security, its own
    arguments, port and probes."""
    container = copy.deepcopy(template)
    container["name"] = instance["container"]
    container["args"] = ["--node-name=$(NODE_NAME)", "--dev-root=/dev", *instance_args(settings, instance)]
    if runs_reclaim(instance):
        container["args"] += deploy_mig.daemonset_args(settings.get("mig"))
    else:
        reclaim.without_nvml(container)
        deploy_mig.without_mig(container)
    for key in ("ports", "livenessProbe", "readinessProbe"):
        container.pop(key, None)
    port = instance["metrics_port"]
    if port:
        name = instance["port_name"]
        container["args"].append(f"--metrics-address=$(POD_IP):{port}")
        container["ports"] = [{"name": name, "containerPort": port, "protocol": "TCP"}]
        for key in ("livenessProbe", "readinessProbe"):
            if key in template:
                probe = copy.deepcopy(template[key])
                probe["httpGet"]["port"] = name
                container[key] = probe
    return container


def daemonset(settings: dict[str, Any]) -> dict[str, Any]:
    """The driver's DaemonSet (:func:`driver.daemonset`) with one container per instance in the one pod.

    The containers share the pod's volumes and mounts (the GPU plugin's state and MPS directories are
    below the main plugin's), and roll together.
    """
    found = instances(settings)
    result = driver.daemonset(settings)
    if len(found) == 1:
        return result
    pod = result["spec"]["template"]["spec"]
    template = pod["containers"][0]
    pod["containers"] = [_container(template, settings, item) for item in found]
    return result


def credential_objects(settings: dict[str, Any]) -> list[dict[str, Any]]:
    """:func:`driver.credential_objects` whose admission policies let the credentials write both drivers' slices."""
    return driver.credential_objects(settings, driver_names(settings))


def objects(settings: dict[str, Any]) -> list[dict[str, Any]]:
    """Every cluster object of the install, in apply order (:func:`driver.objects`, split by kind where set)."""
    result = credential_objects(settings)
    if settings.get("mode", "host") == "daemonset":
        result.append(daemonset(settings))
    return result
