# SPDX-License-Identifier: Apache-2.0
"""What one allocation consumes of a device: its capacity (under ``requestPolicy``) and its shared counters.

The allocator (:mod:`allocator`) asks here whether a device still has room and
records what it hands out. Two kinds of sharing:

- consumable capacity (KEP-5075): a device that allows multiple allocations
  gives each one its request rounded up by the capacity's ``requestPolicy``,
  or the policy's default (the whole capacity without a policy) for a
  capacity not requested (:func:`consumption`);
- shared counters (KEP-4815, partitionable devices): a device that consumes
  counters of a counter set fits only while the set has that much left, over
  what earlier claims hold *and* what the claim being placed already took
  (:func:`counters_fit`); the allocator spends them when it takes a device
  and gives them back when it backtracks (:func:`spend_counters`,
  :func:`return_counters`), so two requests of one claim never take the same
  memory slices of one GPU.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

from fractions import Fraction

from ansible_collections.aligned.dra.plugins.module_utils.dra import cel as dra_cel

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    # the allocator's Device and RequestAlternative (not imported: the allocator imports this module)
    Device = Any
    RequestAlternative = Any

ZERO = Fraction(0)


class PlanError(ValueError):
    """Input that cannot be planned (a malformed class or template)."""


def parse_quantity(text: Any) -> Fraction:
    """A Kubernetes quantity (capacity, counter) as a Fraction; :class:`PlanError` when it is none."""
    try:
        return dra_cel.parse_quantity(str(text))
    except ValueError as exc:
        raise PlanError(str(exc)) from None


# -- capacity of devices that allow multiple allocations ---------------------------------------

_POLICIES: dict[tuple, tuple] = {}  # the policies of a site repeat: parsed once


def request_policy(policy: dict[str, Any]) -> tuple:
    """A capacity's ``requestPolicy`` as ``(default, min, max, step, valid values, as written)``, quantities as
    Fractions (None where absent)."""
    valid_range = policy.get("validRange") or {}
    written = (
        policy.get("default"),
        valid_range.get("min"),
        valid_range.get("max"),
        valid_range.get("step"),
        tuple(policy.get("validValues") or ()),
    )
    written = tuple(None if v is None else str(v) for v in written[:4]) + (tuple(str(v) for v in written[4]),)
    if written not in _POLICIES:
        parsed = tuple(None if v is None else parse_quantity(v) for v in written[:4])
        _POLICIES[written] = parsed + (tuple(parse_quantity(v) for v in written[4]), written)
    return _POLICIES[written]


def _rounded(amount: Fraction, policy: tuple) -> Fraction:
    """A requested amount as the scheduler consumes it: up to the range's next step, or the next valid value."""
    _default, low, _high, step, values, _written = policy
    if low is not None:
        if amount < low:
            return low
        if step is None:
            return amount
        steps = -((low - amount) // step)  # ceil((amount - low) / step)
        return low + steps * step
    return next((value for value in values if amount <= value), amount)


def _breaks(value: Fraction, policy: tuple) -> bool:
    default, low, high, step, values, _written = policy
    if default is not None and value == default:
        return False
    if low is not None:
        return (high is not None and value > high) or (step is not None and (value - low) % step != 0)
    return bool(values) and value not in values


def consumption(device: Device, alternative: RequestAlternative) -> dict[str, Fraction] | None:
    """What one allocation of ``alternative`` consumes of a multi-allocatable device; None where a request
    breaks a ``requestPolicy``.

    Every capacity of the device is consumed, as kube-scheduler does (KEP-5075,
    ``CmpRequestOverCapacity``): a requested amount rounded up by the policy, for a
    capacity not requested the policy's ``default`` or, without a policy, all of it.
    """
    if alternative in device.consumption_memo:
        return device.consumption_memo[alternative]
    requested = {
        (name if "/" in name else f"{device.driver}/{name}"): amount for name, amount in alternative.capacity.items()
    }
    found: dict[str, Fraction] | None = {}
    for name, have in device.capacity.items():
        policy = device.policies.get(name)
        amount = requested.get(name)
        if amount is None:
            value = policy[0] if policy is not None and policy[0] is not None else have
        else:
            value = amount if policy is None else _rounded(amount, policy)
        if policy is not None and _breaks(value, policy):
            found = None
            break
        found[name] = value
    device.consumption_memo[alternative] = found
    return found


# -- shared counters (partitionable devices) ---------------------------------------------------


def counters_fit(device: Device, shared: dict[str, dict[str, Any]], *spent: dict[str, dict[str, Any]]) -> bool:
    """Whether every counter ``device`` consumes fits what its counter set has left after ``spent`` (the
    claims held before, the claim being placed); a set the node does not publish fits nothing."""
    for counter_set, needs in device.counters:
        pool = shared.get(counter_set)
        if pool is None:
            return False
        for counter, amount in needs.items():
            left = pool.get(counter, ZERO)
            for state in spent:
                left -= state.get(counter_set, {}).get(counter, 0)
            if amount > left:
                return False
    return True


def spend_counters(device: Device, counters_used: dict) -> None:
    """Add what ``device`` consumes of its counter sets (a partition) to ``counters_used``."""
    for counter_set, needs in device.counters:
        spent = counters_used.setdefault(counter_set, {})
        for counter, amount in needs.items():
            spent[counter] = spent.get(counter, 0) + amount


def return_counters(device: Device, counters_used: dict) -> None:
    """Take back what :func:`spend_counters` added for ``device`` (the allocator backtracks)."""
    for counter_set, needs in device.counters:
        spent = counters_used[counter_set]
        for counter, amount in needs.items():
            spent[counter] -= amount
