# SPDX-License-Identifier: Apache-2.0
"""The network plan of one node, as the ``network_plan`` module and the validation probe compute it.

One argument spec and one function: the ``network_plan`` module plans with
them, and ``topology_info`` with its ``network_plan`` option plans the same
in the probe's round (the network stage then reuses that plan instead of
reading the node a second time). :func:`outcome` splits the result the way
the module reports it: the warnings and the diffs apart from the plan.

The plan has three parts: RDMA, SR-IOV and GPUDirect RDMA (the ``gpudirect``
module's check mode, with the site's ``aligned_dra_gpudirect``). A GPUDirect
setting of every part ``keep`` leaves that part out: nothing more is read,
and the plan is the RDMA and SR-IOV plan alone. Python >= 3.9.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

from ansible_collections.aligned.dra.plugins.module_utils.node.network import gpudirect, netconf, rdma_netlink, sriov

# The settings of the ``gpudirect`` module (and of the rdma role's ``aligned_dra_gpudirect``), same defaults.
GPUDIRECT_ARGUMENT_SPEC = {
    "acs": {"type": "str", "choices": list(gpudirect.CHOICES["acs"]), "default": "keep"},
    "iommu": {"type": "str", "choices": list(gpudirect.CHOICES["iommu"]), "default": "keep"},
    "iommu_vendor_args": {"type": "list", "elements": "str", "default": []},
    "peer_memory": {"type": "str", "choices": list(gpudirect.CHOICES["peer_memory"]), "default": "keep"},
}

ARGUMENT_SPEC = {
    "netns_mode": {"type": "str", "choices": sorted(rdma_netlink.NETNS_MODES)},
    "modules": {"type": "list", "elements": "str"},
    "modprobe_dir": {"type": "path", "default": "/etc/modprobe.d"},
    "modules_load_dir": {"type": "path", "default": "/etc/modules-load.d"},
    "pfs": {"type": "list", "elements": "dict", "default": [], "options": sriov.PF_ARGUMENT_SPEC},
    "driver_state_dir": {"type": "path", "default": sriov.DEFAULT_STATE_DIR},
    "vf_drivers": {"type": "list", "elements": "str", "default": []},
    "sysfs_root": {"type": "path", "default": "/sys"},
    "procfs_root": {"type": "path", "default": "/proc"},
    "gpudirect": {"type": "dict", "options": GPUDIRECT_ARGUMENT_SPEC, "apply_defaults": True},
    "grub_dir": {"type": "path", "default": gpudirect.GRUB_DIR},
}

PlanError = netconf.PlanError


def outcome(params: dict[str, Any]) -> dict[str, Any]:
    """The plan for ``params`` (validated against :data:`ARGUMENT_SPEC`): ``result``, ``warnings``, ``diffs``.

    ``result`` is what the module returns (``pending``, ``disruptive``,
    ``rdma``, ``sriov``, and ``gpudirect`` unless every GPUDirect part is
    ``keep``), without the parts' warnings and diffs; ``diffs`` holds one diff
    per part that would change. Raises :class:`PlanError` when a part is
    refused (its message names the field: ``gpudirect.acs: ...`` for GPUDirect).
    """
    roots = {"sysfs_root": params["sysfs_root"], "procfs_root": params["procfs_root"]}
    rdma_state = dict(
        roots,
        netns_mode=params["netns_mode"],
        modules=params["modules"],
        modprobe_dir=params["modprobe_dir"],
        modules_load_dir=params["modules_load_dir"],
    )
    pfs = [{key: value for key, value in pf.items() if value is not None} for pf in params["pfs"]]
    sriov_state = dict(roots, pfs=pfs, driver_state_dir=params["driver_state_dir"], vf_drivers=params["vf_drivers"])
    result = netconf.plan(rdma_state, sriov_state)
    gpudirect_state = _gpudirect_state(params)
    if gpudirect_state is not None:
        _add_gpudirect(result, gpudirect_state)
    warnings: list[str] = []
    diffs: list[dict[str, Any]] = []
    for part in ("rdma", "sriov", "gpudirect"):
        if result.get(part) is None:
            continue
        warnings.extend(result[part].pop("warnings", []))
        diff = result[part].pop("diff", None)
        if result[part]["changed"] and diff:
            diffs.append(dict(diff, before_header=f"{part} now", after_header=f"{part} wanted"))
    return {"result": result, "warnings": warnings, "diffs": diffs}


def _gpudirect_state(params: dict[str, Any]) -> dict[str, Any] | None:
    """The state file shape of the GPUDirect part (netconf's ``gpudirect``); None when every part is ``keep``."""
    settings = params.get("gpudirect") or {}
    if gpudirect.is_off(settings):  # as the rdma role: the gpudirect module is not called at all
        return None
    state = {name: settings.get(name) for name in GPUDIRECT_ARGUMENT_SPEC}
    state.update(
        sysfs_root=params["sysfs_root"],
        procfs_root=params["procfs_root"],
        modules_load_dir=params["modules_load_dir"],
        grub_dir=params["grub_dir"],
    )
    return state


def _add_gpudirect(result: dict[str, Any], state: dict[str, Any]) -> None:
    """Plans the GPUDirect part (after RDMA and SR-IOV) into ``result``; a refusal names ``gpudirect.<field>``."""
    try:
        planned = netconf.plan(None, None, state)
    except PlanError as exc:
        message = str(exc)
        field = message.split(":", 1)[0]
        if field in GPUDIRECT_ARGUMENT_SPEC:
            message = f"gpudirect.{message}"
        elif field not in ARGUMENT_SPEC:  # an error of the node, not of an option: say which part
            message = f"gpudirect: {message}"
        raise PlanError(message) from exc
    part = planned["gpudirect"]
    for item in part["acs"]:  # where the module is, as the gpudirect module returns it
        item.pop("path", None)
        item.pop("offset", None)
    result["gpudirect"] = part
    result["pending"] = result["pending"] or planned["pending"]
    result["disruptive"] = result["disruptive"] or planned["disruptive"]


def for_probe(options: dict[str, Any]) -> dict[str, Any]:
    """The plan the probe computes in its own round, for the network stage to reuse.

    ``options`` are the ``network_plan`` module's arguments as the task gives
    them; they are checked here as the module checks them. Returns
    ``{"module_args", "result", "warnings", "diffs"}``, or ``{"module_args",
    "refused"}`` with the message the module would fail with, or
    ``{"not_planned"}`` where the module itself must run (arguments it would
    refuse, any other error): it then says what is wrong, as before.
    """
    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

    checked = ArgumentSpecValidator(ARGUMENT_SPEC).validate(options)
    if checked.error_messages:
        return {"not_planned": "; ".join(checked.error_messages)}
    params = checked.validated_parameters
    try:
        planned = outcome(params)
    except PlanError as exc:
        return {"module_args": params, "refused": str(exc)}
    except Exception as exc:  # the module, run on its own, reports it as it always has
        return {"not_planned": f"{type(exc).__name__}: {exc}"}
    return dict(planned, module_args=params)
