# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Filters the driver role uses to build its cluster objects, node kubeconfigs and wheel platforms, and to
check its image's platform."""

from __future__ import annotations

import json
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.aligned.dra.plugins.module_utils.controller.deploy import driver as driver_deploy


def driver_objects(settings: dict[str, Any]) -> list[dict[str, Any]]:
    """Every cluster object of the driver install for ``settings`` (see driver_deploy.objects)."""
    try:
        return driver_deploy.objects(dict(settings))
    except driver_deploy.DeployError as exc:
        raise AnsibleFilterError(f"driver_objects: {exc}") from exc


def driver_args(settings: dict[str, Any]) -> list[str]:
    """Driver options shared by the systemd unit and the DaemonSet (see driver_deploy.driver_args)."""
    try:
        return driver_deploy.driver_args(dict(settings))
    except driver_deploy.DeployError as exc:
        raise AnsibleFilterError(f"driver_args: {exc}") from exc


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


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "driver_objects": driver_objects,
            "driver_args": driver_args,
            "driver_kubeconfig": driver_kubeconfig,
            "driver_wheel_platforms": driver_wheel_platforms,
            "driver_image_problems": driver_image_problems,
        }
