# SPDX-License-Identifier: Apache-2.0
"""The validation stage's checks of each host's driver settings, the rules the driver role asks too.

The driver role asks them of each host again (``roles/driver/tasks``), so the
role stays safe on its own; the validation asks them first, of every host,
so that a play that validated can let the hosts with nothing to do on their
node (DaemonSet mode: every host but the site's first) leave before the role.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

import re
from pathlib import Path

from ansible_collections.aligned.dra.plugins.module_utils.controller.deploy import driver as driver_deploy

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

# A Kubernetes node name: a lowercase DNS subdomain (the role's rule).
NODE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def host_problems(host: str, settings: Mapping[str, Any], defaults: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(variable, reason)`` for each of the host's driver settings the role would refuse.

    ``settings`` are the host's (templated); one it leaves unset has the
    role's default from ``defaults``; the node name defaults to the host's
    inventory name, as in the role.
    """

    def value(name: str) -> Any:
        return settings.get(name, defaults.get(name))

    problems = []
    if value("aligned_dra_driver_mode") == "daemonset" and not value("aligned_dra_driver_image"):
        problems.append(("aligned_dra_driver_image", "DaemonSet mode needs the driver's image"))
    node_name = settings.get("aligned_dra_driver_node_name", host)
    if not isinstance(node_name, str) or not NODE_NAME.match(node_name):
        problems.append(("aligned_dra_driver_node_name", "must be a lowercase DNS name (the node's Kubernetes name)"))
    port = value("aligned_dra_driver_metrics_port")
    if isinstance(port, str) and port.strip().isdigit():
        port = int(port)  # the argument spec's int takes a string of digits too
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        problems.append(("aligned_dra_driver_metrics_port", "must be 0..65535"))
    return problems


def image_problems(settings: Mapping[str, Any], defaults: Mapping[str, Any], root: str) -> list[tuple[str, str]]:
    """The driver image's Python, glibc and base image (DaemonSet mode): the rule the driver role asks too."""
    values = {name: settings.get(name, defaults.get(name)) for name in driver_deploy.IMAGE_SETTINGS}
    try:
        return list(driver_deploy.image_platform_problems(values, Path(root, "driver", "pyproject.toml")))
    except driver_deploy.DeployError as exc:
        return [("aligned_dra_driver_image_python", str(exc))]
