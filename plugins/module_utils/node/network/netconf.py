# SPDX-License-Identifier: Apache-2.0
"""Boot-time re-apply of the node network state the roles installed.

The ``rdma`` and ``sriov`` roles write the desired state as JSON
(``/etc/aligned-dra/rdma.json``, ``/etc/aligned-dra/sriov.json``, and the
rdma role's ``/etc/aligned-dra/gpudirect.json``) and install systemd oneshot
units that run, before the kubelet::

    python3 -m ansible_collections.aligned.dra.plugins.module_utils.node.network.netconf sriov /etc/aligned-dra/sriov.json

with ``PYTHONPATH`` pointing at the copy of this collection's ``module_utils``
on the node. It calls the same :func:`sriov.apply` / :func:`rdma_config.apply`
/ :func:`gpudirect.apply` as the modules do: one code path at run time and at
boot.

State file shapes (written by the roles)::

    rdma:  {"netns_mode": "exclusive", "modules": ["ib_core", "mlx5_ib"],
            "sysfs_root": "/sys", "procfs_root": "/proc",
            "modprobe_dir": "/etc/modprobe.d", "modules_load_dir": "/etc/modules-load.d"}
    sriov: {"pfs": [{"pci_address": "0000:19:00.0", "numvfs": 8, ...}],
            "sysfs_root": "/sys", "procfs_root": "/proc",
            "driver_state_dir": "/var/lib/aligned-dra", "vf_drivers": []}
    gpudirect: {"acs": "disable", "iommu": "passthrough", "peer_memory": "auto",
                "iommu_vendor_args": ["intel_iommu=on"], "sysfs_root": "/sys", "procfs_root": "/proc",
                "modules_load_dir": "/etc/modules-load.d", "grub_dir": "/etc/default/grub.d"}

:func:`plan` reads both parts in check mode for the ``network_plan`` module.

Exit status 0 when the node matches the state (changed or not), 1 when a
change failed or was refused, 2 for a bad command line or state file. One JSON
line on stdout says what was done (it lands in the journal).
"""

from __future__ import annotations

import json
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def _load(path: str) -> dict[str, Any]:
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: the state must be a JSON object")
    return data


def run_rdma(state: dict[str, Any], check_mode: bool = False) -> dict[str, Any]:
    from ansible_collections.aligned.dra.plugins.module_utils.node.network import rdma_config

    return rdma_config.apply(
        {"netns_mode": state.get("netns_mode"), "modules": state.get("modules")},
        sysfs_root=state.get("sysfs_root", "/sys"),
        procfs_root=state.get("procfs_root", "/proc"),
        modprobe_dir=state.get("modprobe_dir", "/etc/modprobe.d"),
        modules_load_dir=state.get("modules_load_dir", "/etc/modules-load.d"),
        check_mode=check_mode,
    )


def run_sriov(state: dict[str, Any], check_mode: bool = False) -> dict[str, Any]:
    from ansible_collections.aligned.dra.plugins.module_utils.node.network import sriov

    return sriov.apply(
        state.get("pfs") or [],
        sysfs_root=state.get("sysfs_root", "/sys"),
        procfs_root=state.get("procfs_root", "/proc"),
        check_mode=check_mode,
        driver_state_dir=state.get("driver_state_dir", sriov.DEFAULT_STATE_DIR),
        settle_timeout=float(state.get("settle_timeout", 10)),
        vf_drivers=tuple(state.get("vf_drivers") or ()),
    )


def run_gpudirect(state: dict[str, Any], check_mode: bool = False) -> dict[str, Any]:
    from ansible_collections.aligned.dra.plugins.module_utils.node.network import gpudirect

    return gpudirect.apply(
        {name: state.get(name) for name in (*gpudirect.CHOICES, "iommu_vendor_args")},
        sysfs_root=state.get("sysfs_root", "/sys"),
        procfs_root=state.get("procfs_root", "/proc"),
        modules_load_dir=state.get("modules_load_dir", "/etc/modules-load.d"),
        grub_dir=state.get("grub_dir", gpudirect.GRUB_DIR),
        check_mode=check_mode,
    )


RUNS = {"rdma": run_rdma, "sriov": run_sriov, "gpudirect": run_gpudirect}


class PlanError(Exception):
    """A part of the plan was refused; the message names the field, as the rdma and sriov modules do."""


def _planned(run: Any, state: dict[str, Any]) -> dict[str, Any]:
    from ansible_collections.aligned.dra.plugins.module_utils.node.network import gpudirect, rdma_config, sriov

    try:
        return run(state, check_mode=True)
    except (rdma_config.RdmaConfigError, sriov.SriovError, gpudirect.GpuDirectError, OSError, ValueError) as exc:
        raise PlanError(str(exc)) from exc


def plan(
    rdma_state: dict[str, Any] | None,
    sriov_state: dict[str, Any] | None,
    gpudirect_state: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """What the node's network stage would change, changing nothing.

    One read of the node for both parts (the ``network_plan`` module): the
    rollout decides from it, on every node at once, which nodes roll.
    ``rdma_state``/``sriov_state`` have the state files' shapes; None (or no
    PFs) leaves that part out, and so does a ``gpudirect_state`` of None
    (the key is then absent). ``pending``: something to change or a reboot
    the RDMA mode or the IOMMU waits for; ``disruptive``: the change destroys
    or creates VFs, moves RDMA devices between namespaces, clears ACS
    redirect or needs a reboot (the node is drained first).
    """
    rdma = _planned(run_rdma, rdma_state) if rdma_state is not None else None
    sriov = _planned(run_sriov, sriov_state) if sriov_state and sriov_state.get("pfs") else None
    found = {
        "rdma": rdma,
        "sriov": sriov,
        "pending": bool(rdma and (rdma["changed"] or rdma["reboot_required"])) or bool(sriov and sriov["changed"]),
        "disruptive": bool(rdma and rdma["disruptive"]) or bool(sriov and sriov["disruptive"]),
    }
    if gpudirect_state is not None:
        gpu = _planned(run_gpudirect, gpudirect_state)
        found["gpudirect"] = gpu
        found["pending"] = found["pending"] or gpu["changed"] or gpu["reboot_required"]
        found["disruptive"] = found["disruptive"] or gpu["disruptive"]
    return found


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    check_mode = "--check" in args
    args = [a for a in args if a != "--check"]
    if len(args) != 2 or args[0] not in RUNS:
        sys.stderr.write("usage: python3 -m ...netconf {rdma|sriov|gpudirect} STATE_FILE [--check]\n")
        return 2
    kind, path = args
    try:
        state = _load(path)
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"aligned-dra {kind}: cannot read the state file: {exc}\n")
        return 2
    try:
        result = RUNS[kind](state, check_mode)
    except Exception as exc:  # every library error ends the unit with a message, not a traceback
        sys.stderr.write(f"aligned-dra {kind}: {exc}\n")
        return 1
    summary = {
        "kind": kind,
        "changed": result["changed"],
        "reboot_required": result.get("reboot_required", False),
        "actions": result.get("actions") or [a for pf in result.get("pfs", []) for a in pf.get("actions", [])],
        "warnings": result.get("warnings", []),
    }
    sys.stdout.write(json.dumps(summary, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
