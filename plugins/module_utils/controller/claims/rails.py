# SPDX-License-Identifier: Apache-2.0
"""Rail templates: claims for the workers of a multi-node job on a rail-optimised fabric.

NIC *i* of every node is cabled to leaf *i* (rail *i*); NCCL's rings go from
NIC *i* of one node to NIC *i* of the next, so a multi-node job's workers need
NICs on the same rails. With the site's rails declared (``aligned_dra_rails``,
read by ``node/topology/rails``), the claims role renders, per site and minor:

- ``gpu-nic-rail-<r>`` for every rail *r*: one GPU and the NIC of rail *r*,
  on the GPU's PCIe root where the node has such a pair, else on its NUMA
  node, else anywhere on the node (``firstAvailable``, as ``pairs_fallback``);
- ``gpu-nic-rails-<k>-<first>``: *k* GPU+NIC pairs on *k* fixed rails (the
  site's rails cut into blocks of *k*, from ``<first>``), each pair on one
  PCIe root; and named sets of rails of the site's own choosing.

A NIC is picked by the bundled driver's ``dra.aligned.dev/rail`` attribute,
guarded with ``has()`` so that a NIC without a rail is not a match (rather
than an evaluation error, which would abort the whole allocation). Other NIC
drivers (DRANET) publish no rail, so a rail selector matches none of their
NICs: the templates are rendered only when the site's NICs come from the
bundled driver.

Which rails a site has is known before any probe from every host's rule:
``count`` (rails 0..count-1), the ``subnet`` rule's subnets (one rail each)
or the ``map`` rule's rails. ``pci_order`` and ``netdev_name`` rules without
``count`` name their rails only on the node; the templates then need ``count``.

Here: the settings of the ``rails`` template kind (:data:`DEFAULTS`,
:func:`check_settings`), the site's rails (:func:`declared_rails`) and the
requests and constraints of each template (:func:`templates`); ``render``
wraps them into objects. Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.fabric import rails as fabric_rails
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra
from ansible_collections.aligned.dra.plugins.module_utils.node.topology import rails as rail_rule

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

KIND = "rails"
DEFAULTS: dict[str, Any] = {
    "enabled": True,
    # 1: a template per rail (with the firstAvailable fallback); k > 1: k pairs on a block of k rails
    "counts": [1, 2, 4, 8],
    # name -> rails: k pairs on exactly these rails (each pair on one PCIe root)
    "sets": {},
    "name": "gpu-nic-rail-{rail}",
    "blocks_name": "gpu-nic-rails-{k}-{first}",
    "selectors": {},
}
REQUEST_ROLES = ("gpu", "nic")
# Two requests per pair, and a claim has at most 32 requests.
MAX_PAIRS = 16
# On every rail template: the rails it is pinned to ("0,1"), for people and tools reading the objects.
RAILS_ANNOTATION = "aligned.dev/rails"
WHERE = "aligned_dra_claims.templates.rails"


class RailSettingsError(ValueError):
    """A rails setting or rule that cannot be rendered; the message names it."""


def _is_rail(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < rail_rule.MAX_RAILS


def _format_problem(pattern: Any, where: str, fields: tuple[str, ...]) -> str | None:
    """Why ``pattern`` cannot name templates apart by ``fields``; None when it can."""
    if not isinstance(pattern, str) or not pattern:
        return f"{where} must be a string with {', '.join('{' + f + '}' for f in fields)}"
    try:
        first = pattern.format(**{f: 1 for f in fields})
        names = {pattern.format(**{f: 1 if f != field else 2 for f in fields}) for field in fields}
    except (KeyError, IndexError, ValueError) as exc:
        return f"{where}: {pattern!r} is not a name pattern with {', '.join('{' + f + '}' for f in fields)} ({exc})"
    if first in names:
        return f"{where}: {pattern!r} must contain {', '.join('{' + f + '}' for f in fields)} so that names differ"
    return None


def check_settings(options: Mapping[str, Any]) -> None:
    """Refuse rails settings that cannot be rendered (:class:`RailSettingsError` naming the setting)."""
    counts = options["counts"]
    if not isinstance(counts, list) or not all(
        isinstance(k, int) and not isinstance(k, bool) and 1 <= k <= MAX_PAIRS for k in counts
    ):
        raise RailSettingsError(f"{WHERE}.counts must be a list of integers 1..{MAX_PAIRS}")
    sets = options["sets"]
    if not isinstance(sets, dict):
        raise RailSettingsError(f"{WHERE}.sets must be a mapping of template name to a list of rails")
    for name, rails in sets.items():
        if not dra.is_dns_subdomain(name):
            raise RailSettingsError(f"{WHERE}.sets: {name!r} is not a DNS subdomain (a template name)")
        if (
            not isinstance(rails, list)
            or not 1 <= len(rails) <= MAX_PAIRS
            or not all(_is_rail(r) for r in rails)
            or len(set(rails)) != len(rails)
        ):
            raise RailSettingsError(
                f"{WHERE}.sets.{name}: 1 to {MAX_PAIRS} different rails, each 0..{rail_rule.MAX_RAILS - 1} "
                f"(got {rails!r})"
            )
    for key, fields in (("name", ("rail",)), ("blocks_name", ("k", "first"))):
        problem = _format_problem(options[key], f"{WHERE}.{key}", fields)
        if problem:
            raise RailSettingsError(problem)


def declared_rails(rules: Mapping[str, Any] | None) -> tuple[list[int] | None, list[str]]:
    """``(rails, notes)``: the rails the site's rules declare, before any probe.

    ``rules`` maps host to its ``aligned_dra_rails``. ``rails`` is ``None``
    when no host has a rule (the site declares no rails); ``notes`` name the
    hosts whose rule does not say its rails (``pci_order`` or
    ``netdev_name`` without ``count``). A malformed rule raises
    :class:`RailSettingsError` naming the host and the field.
    """
    checked, problems = fabric_rails.check_rules(rules or {})
    if problems:
        raise RailSettingsError("; ".join(problems))
    if not checked:
        return None, []
    found: set[int] = set()
    notes = []
    for host, rule in sorted(checked.items()):
        if rule["count"] is not None:
            found.update(range(rule["count"]))
        elif rule["by"] == "subnet":
            found.update(range(len(rule["subnets"])))
        elif rule["by"] == "map":
            found.update(rule["map"].values())
            for mapping in rule["nodes"].values():
                found.update(mapping.values())
        else:
            notes.append(
                f"{host}: aligned_dra_rails {rail_rule.describe(rule)} has no count, so its rails are known only on "
                "the node; set aligned_dra_rails.count for rail templates to cover them"
            )
    return sorted(found), notes


def rail_selector(rail: int) -> str:
    """CEL: the device is on ``rail``; a device without a rail is not a match (not an evaluation error)."""
    attribute = f'device.attributes["{dra.DRIVER_NAME}"].{dra.RAIL_ATTRIBUTE}'
    return f"has({attribute}) && {attribute} == {rail}"


def _cel(expressions: list[str]) -> dict[str, Any]:
    return {"selectors": [{"cel": {"expression": e}} for e in expressions]} if expressions else {}


def templates(
    conf: Mapping[str, Any],
    rails: list[int] | None,
    gpu_class: str,
    nic_class: str,
    exactly: Callable[..., dict[str, Any]],
) -> tuple[list[tuple[str, list[int], list[dict[str, Any]], list[dict[str, Any]]]], list[dict[str, str]]]:
    """``(templates, left_out)``: each rail template as ``(name, rails, requests, constraints)``.

    ``rails``: the site's rails (:func:`declared_rails`), ``None`` when it
    declares none (then nothing is rendered, and nothing said). ``exactly``
    builds an ``exactly`` request (render's). ``left_out``: ``{name, reason}``
    for what the settings ask and the site cannot have.
    """
    options = conf["templates"][KIND]
    if rails is None or not options["enabled"]:
        return [], []
    single = options["name"].format(rail="*")
    blocks = options["blocks_name"].format(k="*", first="*")
    if conf["nic_driver"] != dra.DRIVER_NAME:
        reason = (
            f"NICs of {conf['nic_driver']} publish no rail ({dra.ATTR_RAIL}): a rail selector would match none; "
            f"rail templates need nic_driver {dra.DRIVER_NAME}"
        )
        return [], [{"name": name, "reason": reason} for name in (single, blocks, *sorted(options["sets"]))]
    selectors = options["selectors"]
    gpu_extra, nic_extra = list(selectors.get("gpu") or []), list(selectors.get("nic") or [])
    root, numa = dra.ATTR_PCIE_ROOT, conf["numa_attribute"]
    out = []
    left_out = []
    for k in options["counts"]:
        if k == 1:
            for rail in rails:
                alternatives = [
                    {"name": sub, "deviceClassName": nic_class, **_cel([rail_selector(rail), *nic_extra])}
                    for sub in ("same-root", "same-numa", "any")
                ]
                # the NIC first: the scheduler takes requests in order, and with the GPU first it would
                # settle for the first free GPU's NUMA node before trying the GPU on the NIC's root
                requests = [
                    {"name": "nic-0", "firstAvailable": alternatives},
                    exactly("gpu-0", gpu_class, **_cel(gpu_extra)),
                ]
                constraints = [
                    {"requests": ["gpu-0", "nic-0/same-root"], "matchAttribute": root},
                    {"requests": ["gpu-0", "nic-0/same-numa"], "matchAttribute": numa},
                ]
                out.append((options["name"].format(rail=rail), [rail], requests, constraints))
            continue
        if len(rails) < k:
            left_out.append(
                {
                    "name": options["blocks_name"].format(k=k, first="*"),
                    "reason": f"the site declares {len(rails)} rails ({_rails_text(rails)}), fewer than {k}",
                }
            )
            continue
        for start in range(0, len(rails) - k + 1, k):
            block = rails[start : start + k]
            requests, constraints = _pairs(block, gpu_class, nic_class, gpu_extra, nic_extra, exactly)
            out.append((options["blocks_name"].format(k=k, first=block[0]), block, requests, constraints))
    for name, block in sorted(options["sets"].items()):
        missing = [r for r in block if r not in rails]
        if missing:
            left_out.append(
                {
                    "name": name,
                    "reason": f"rails {_rails_text(missing)} are not among the site's ({_rails_text(rails)})",
                }
            )
            continue
        requests, constraints = _pairs(block, gpu_class, nic_class, gpu_extra, nic_extra, exactly)
        out.append((name, list(block), requests, constraints))
    return out, left_out


def _pairs(
    block: list[int],
    gpu_class: str,
    nic_class: str,
    gpu_extra: list[str],
    nic_extra: list[str],
    exactly: Callable[..., dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Requests and constraints of one pair per rail of ``block``, each pair on one PCIe root."""
    requests, constraints = [], []
    for i, rail in enumerate(block):
        # the NIC first: one device of the node matches, the GPUs on its root are then few
        requests += [
            exactly(f"nic-{i}", nic_class, **_cel([rail_selector(rail), *nic_extra])),
            exactly(f"gpu-{i}", gpu_class, **_cel(gpu_extra)),
        ]
        constraints.append({"requests": [f"gpu-{i}", f"nic-{i}"], "matchAttribute": dra.ATTR_PCIE_ROOT})
    return requests, constraints


def _rails_text(rails: list[int]) -> str:
    return ", ".join(str(r) for r in rails) or "none"
