# SPDX-License-Identifier: Apache-2.0
"""The checks the team settings and the schedulers' settings share: known keys, label maps, DeviceClass keys.

Each check raises the class its caller passes (``error``: the team model's
``TeamsError``, a scheduler's ``SchedulerError``), with a message that names
the setting, so that each package's errors stay its own.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.dra.labels import is_label_name, is_label_value

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MAX_AMOUNT = 2**63 - 1  # quotas are int64 quantities in the API


def check_keys(where: str, value: Any, known: tuple[str, ...], error: type[Exception]) -> None:
    """``value`` is a mapping whose keys are all in ``known``."""
    if not isinstance(value, dict):
        raise error(f"{where} must be a mapping")
    unknown = sorted(set(value) - set(known))
    if unknown:
        raise error(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(known)})")


def label_map(where: str, raw: Any, error: type[Exception]) -> dict[str, str]:
    """Labels (namespace or node labels) from settings, each name and value checked."""
    labels = raw or {}
    if not isinstance(labels, dict):
        raise error(f"{where} must map label names to strings")
    for label, value in labels.items():
        if not is_label_name(label):
            raise error(f"{where}: {label!r} is not a valid label name")
        if not is_label_value(value):
            raise error(f"{where}.{label}: {value!r} is not a valid label value (quote numbers)")
    return dict(labels)


def resolve_class(where: str, key: str, classes: dict[str, Any], keys: dict[str, str], error: type[Exception]) -> str:
    """A class key (``gpu``) or DeviceClass name (``aligned-gpu``) to the DeviceClass name."""
    name = keys.get(key, key)
    if name not in classes:
        raise error(
            f"{where}: {key!r} is not a DeviceClass of this site (classes: {', '.join(sorted(classes)) or 'none'})"
        )
    return name
