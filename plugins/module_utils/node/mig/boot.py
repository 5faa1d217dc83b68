# SPDX-License-Identifier: Apache-2.0
"""Boot-time apply of a static MIG node's layout (the ``mig`` role's ``aligned-dra-mig.service``).

MIG instances do not survive a reboot: a node comes back with MIG mode as it was and no instances. The role
writes the node's layout, once it was applied and verified, as JSON (``/etc/aligned-dra/mig.json``) and
installs a systemd oneshot unit that runs this module (``python3 -m`` with its dotted name in the
collection) on that file before the kubelet, the GPU clients the rollout stops (DCGM, its exporter, NVSM, the
bundled driver) and ``nvidia-gpu-reset.target``, with ``PYTHONPATH`` naming the library zip the role installs
(``mig.zip``). Each GPU goes through the same :func:`apply.run` as the ``aligned.dra.mig`` module, one GPU at
a time (a GPU that fails leaves the others to be made), with ``drained`` false: no GPU reset at boot. An Ampere GPU whose MIG mode is not the recorded
one (its pending mode is applied by the reboot itself) is left as it is and reported. Then the GPU is read
again in check mode: nothing may be left to change.

State file (written by the role)::

    {"mode": "static", "layout": "all-balanced",
     "mig_configs": {"all-balanced": [{"devices": "all", "mig-enabled": true, "mig-devices": {...}}]},
     "gpus": ["0000:18:00.0", "0000:2a:00.0"], "procfs_root": "/proc"}

``gpus``: the GPUs the rollout selected, by PCI address (one that is gone fails, naming the node's GPUs).

The layout hold: before its reboot for a layout change the rollout keeps the state (the last verified layout)
and writes ``mig.hold`` beside it, ``{"boot_id": "<the boot ID then>"}``. :func:`held` reads it before NVML:
a hold of an earlier boot (this boot's ID in ``<procfs_root>/sys/kernel/random/boot_id`` differs) is the
rollout's reboot: no instance is made (the rollout makes the new layout), a line says so, the hold is removed
(a later boot makes the state's layout again) and the exit status is 0. A hold of this boot (the unit started
again before the reboot) makes nothing too and is kept. A hold that cannot be read (not the role's JSON), or a
boot ID that cannot, is taken as an earlier boot's, with a warning: kept, it would hold every later boot, and
at worst the rollout's reboot then makes the old layout, which the rollout replaces. A hold that cannot be
removed fails the unit (exit status 1).

The unit is ordered after the kernel's modules are loaded (``systemd-modules-load``, udev's coldplug
``systemd-udev-trigger``) and ``nvidia-persistenced``, but none of them waits for the NVIDIA module itself: udev
may still be loading it, and a node without nvidia-persistenced has nothing that waits for the driver. So
:func:`wait_for_nvml` first waits for ``nvmlInit`` to succeed: while NVML answers that the driver is not loaded
(``DRIVER_NOT_LOADED``), its library is not there yet (``LIBRARY_NOT_FOUND``) or an unknown error, it asks
again every :data:`RETRY_INTERVAL` seconds for up to :data:`NVML_WAIT` seconds; any other error, or the time
up, fails every GPU as before. A driver that a container brings up later (NVIDIA's GPU operator) is never
there at boot: such a node applies its layout with the playbook, not this unit (docs/mig.md "Reboots").

Exit status 0 when every GPU is as the layout says (changed or not), 1 when a GPU failed or NVML cannot start,
2 for a bad command line or state file. One line per GPU says what was done; a failure names the GPU and the
reason, at the journal's ``err`` priority (systemd reads the ``<3>`` prefix); a last JSON line sums it up. A
GPU's failure, whatever raised it (an NVML error, a binding's), is that GPU's only: the next GPU is still made.

Node side: Python 3.9, standard library only (``pynvml`` of nvidia-ml-py imported at run time).
"""

from __future__ import annotations

import json
import os
import sys
import time

from ansible_collections.aligned.dra.plugins.module_utils.node.mig import apply, layout

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

NAME = "aligned-dra-mig"
ERR = "<3>"  # the sd-daemon(3) priority prefixes of an error and a warning, read by the journal
WARNING = "<4>"
HOLD = "mig.hold"  # beside the state file: the rollout's reboot for a layout change (see the module's docstring)
# nvmlInit's answers while the NVIDIA driver is still coming up: NVML_ERROR_DRIVER_NOT_LOADED,
# NVML_ERROR_LIBRARY_NOT_FOUND, NVML_ERROR_UNKNOWN
NVML_NOT_YET = frozenset({9, 12, 999})
NVML_WAIT = 120.0  # seconds, well inside the unit's TimeoutStartSec
RETRY_INTERVAL = 2.0


class StateError(ValueError):
    """The state file is not one the role writes; the message names the field."""


def load_state(path: str) -> dict[str, Any]:
    """The state file, checked: mode ``static``, a ``layout`` of ``mig_configs``, ``gpus`` a list of addresses."""
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    if not isinstance(data, dict):
        raise StateError(f"{path}: the state must be a JSON object")
    if data.get("mode") != "static":
        raise StateError(f"{path}: mode: only a static layout is applied at boot, not {data.get('mode')!r}")
    configs, name = data.get("mig_configs"), data.get("layout")
    if not isinstance(configs, dict) or not isinstance(name, str) or name not in configs:
        raise StateError(f"{path}: layout: the name of a config of mig_configs, not {name!r}")
    gpus = data.get("gpus")
    if not isinstance(gpus, list) or not all(isinstance(g, str) and g for g in gpus):
        raise StateError(f"{path}: gpus: a list of PCI addresses, not {gpus!r}")
    procfs_root = data.get("procfs_root", "/proc")
    if not isinstance(procfs_root, str) or not procfs_root:
        raise StateError(f"{path}: procfs_root: a path, not {procfs_root!r}")
    return data


def _boot_id(procfs_root: str) -> str:
    """This boot's ID, as the kernel gives it; ValueError (or OSError) where it gives none."""
    with open(os.path.join(procfs_root, "sys", "kernel", "random", "boot_id"), encoding="ascii") as handle:
        found = handle.read().strip()
    if not found:
        raise ValueError("empty")
    return found


def _held_for(hold: str) -> str:
    """The boot ID a hold file names; ValueError (or OSError) where it is not the role's ``{"boot_id": …}``."""
    with open(hold, encoding="utf-8") as handle:
        data = json.load(handle)
    boot_id = data.get("boot_id") if isinstance(data, dict) else None
    if not isinstance(boot_id, str) or not boot_id.strip():
        raise ValueError(f"boot_id: a boot ID, not {boot_id!r}")
    return boot_id.strip()


def held(state_path: str, procfs_root: str, out: Any, err: Any) -> int | None:
    """The rollout's layout hold (:data:`HOLD` beside the state file): None where there is none (make the
    layout); else the exit status, nothing made at this boot. An earlier boot's hold is removed (this is the
    rollout's reboot: it makes the new layout, and a later boot the state's again); this boot's is kept (the
    unit started again before the reboot). One that cannot be read, or a boot ID that cannot, is taken as an
    earlier boot's: kept, it would hold every later boot."""
    hold = os.path.join(os.path.dirname(state_path), HOLD)
    if not os.path.lexists(hold):
        return None
    held_boot = this_boot = unread = ""
    try:
        held_boot = _held_for(hold)
    except (OSError, ValueError) as exc:
        unread = f"the hold cannot be read ({exc})"
    else:
        try:
            this_boot = _boot_id(procfs_root)
        except (OSError, ValueError) as exc:
            unread = f"this boot's ID cannot be read ({exc})"
    if unread:
        err.write(
            f"{WARNING}{NAME}: the MIG rollout's layout hold {hold}: {unread}: taken as the hold of the rollout's "
            "reboot for a layout change: no instances made at this boot, the rollout makes the new layout\n"
        )
    elif held_boot == this_boot:
        out.write(
            f"{NAME}: the MIG rollout is changing the layout in this boot ({hold}): no instances made, the hold is "
            "kept for its reboot\n"
        )
        return 0
    else:
        out.write(
            f"{NAME}: the MIG rollout rebooted the node for a layout change ({hold}, boot {held_boot}): no "
            "instances made at this boot, the rollout makes the new layout\n"
        )
    try:
        os.remove(hold)
    except FileNotFoundError:
        pass
    except OSError as exc:  # a hold left would hold the next boot too: the unit fails, so it is seen
        err.write(f"{ERR}{NAME}: cannot remove the layout hold {hold}: {exc}; the next boot makes no layout\n")
        return 1
    return 0


def _no_reset(argv: list[str]) -> tuple[int, str, str]:
    """The reset command's runner: never called with ``drained`` false, and never resets a GPU at boot."""
    return 1, "", "no GPU reset at boot"


def _params(state: dict[str, Any], address: str) -> dict[str, Any]:
    return {
        "mode": "static",
        "gpus": {"pci_addresses": [address]},
        "mig_configs": state["mig_configs"],
        "layout": state["layout"],
        "drained": False,
        "procfs_root": state.get("procfs_root", "/proc"),
    }


def _on(mode: Any) -> str:
    return "on" if mode else "off"


def _done(plan: dict[str, Any]) -> str:
    """What was done to a GPU, in words."""
    parts = []
    if plan["destroy"]:
        parts.append("destroyed " + ", ".join(apply._shown(i) for i in plan["destroy"]))
    if plan["mig_mode"]:
        parts.append(f"MIG mode {_on(plan['mig_mode']['after'])}")
    if plan["create"]:
        parts.append("created " + ", ".join(apply._shown(i) for i in plan["create"]))
    return "; ".join(parts) or "as the layout says, nothing to do"


def apply_gpu(nvml: Any, state: dict[str, Any], address: str) -> dict[str, Any]:
    """The layout applied to one GPU, then verified: ``{"pci_address", "changed", "done", "error"}``."""
    params = _params(state, address)
    outcome: dict[str, Any] = {"pci_address": address, "changed": False, "done": "", "error": None}
    try:
        result = apply.run(nvml, params, False, _no_reset)
        (plan,) = result["gpus"]
        outcome.update(pci_address=plan["pci_address"], changed=plan["changed"], done=_done(plan))
        described = layout.describe(plan)
        if plan["reset"] and plan["reboot_required"]:
            before, want = plan["mig_mode"]["before"]["current"], plan["mig_mode"]["after"]
            outcome["error"] = (
                f"{described}: its MIG mode is {_on(before)}, the layout wants it {_on(want)}: that needs a GPU "
                "reset, never done at boot; left as it is (run the MIG rollout, docs/mig.md)"
            )
            return outcome
        if plan["blocked"] or plan["reboot_required"]:
            outcome["error"] = f"{described}: {plan['blocked'] or 'needs a reboot for its MIG mode'}"
            return outcome
        if plan["layout_entry"] is None:
            outcome["done"] = f"layout {state['layout']} has no entry for it: left as it is"
            return outcome
        left = apply.run(nvml, params, True, _no_reset)["gpus"][0]
        if left["changed"] or left["reboot_required"]:
            outcome["error"] = f"{described}: still to change after the apply: {_done(left)}"
    except (apply.MigError, layout.LayoutError) as exc:
        message = str(exc)
        outcome["error"] = message if address in message else f"GPU {address}: {message}"
    except Exception as exc:  # an NVMLError or a broken binding: this GPU fails, the others are still made
        outcome["error"] = f"GPU {address}: {apply._describe(exc)}"
    return outcome


def run(nvml: Any, state: dict[str, Any], out: Any, err: Any) -> int:
    """Every GPU of the state, one after the other; lines to ``out`` (what was done) and ``err`` (failures)."""
    outcomes = [apply_gpu(nvml, state, address) for address in state["gpus"]]
    for outcome in outcomes:
        if outcome["error"]:
            err.write(f"{ERR}{NAME}: {outcome['error']}\n")
        else:
            out.write(f"{NAME}: GPU {outcome['pci_address']}: {outcome['done']}\n")
    failed = [o["pci_address"] for o in outcomes if o["error"]]
    summary = {
        "layout": state["layout"],
        "changed": [o["pci_address"] for o in outcomes if o["changed"] and not o["error"]],
        "failed": failed,
    }
    out.write(json.dumps(summary, sort_keys=True) + "\n")
    return 1 if failed else 0


def wait_for_nvml(
    nvml: Any, err: Any, clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep
) -> bool:
    """Whether ``nvmlInit`` succeeds within :data:`NVML_WAIT` seconds (NVML shut down again: each GPU's apply
    starts its own); only the errors of :data:`NVML_NOT_YET` are asked again. Waiting and giving up are said
    on ``err``."""
    deadline = clock() + NVML_WAIT
    waited = False
    while True:
        try:
            nvml.nvmlInit()
        except Exception as exc:  # NVMLError, or a broken binding
            code = getattr(exc, "value", None)
            left = deadline - clock()
            if code not in NVML_NOT_YET or left <= 0:
                if waited:
                    err.write(f"{ERR}{NAME}: NVML still does not start after {NVML_WAIT:.0f} s: {exc}\n")
                return False
            if not waited:
                err.write(f"{NAME}: NVML does not start yet ({exc}): waiting for the NVIDIA driver\n")
                waited = True
            sleep(min(RETRY_INTERVAL, left))
            continue
        try:
            nvml.nvmlShutdown()
        except Exception:  # NVML started: each GPU's apply starts and stops its own
            pass
        return True


def load_pynvml() -> Any:
    """The real ``pynvml`` (package ``nvidia-ml-py``); ImportError where it is not installed."""
    import pynvml

    return pynvml


def main(
    argv: list[str] | None = None,
    nvml: Any = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        sys.stderr.write(f"{ERR}usage: python3 -m ...node.mig.boot STATE_FILE\n")
        return 2
    try:
        state = load_state(args[0])
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"{ERR}{NAME}: cannot read the state file: {exc}\n")
        return 2
    status = held(args[0], state.get("procfs_root", "/proc"), sys.stdout, sys.stderr)
    if status is not None:
        return status
    if not state["gpus"]:
        sys.stdout.write(f"{NAME}: no GPU to configure\n")
        return 0
    if nvml is None:
        try:
            nvml = load_pynvml()
        except ImportError as exc:
            sys.stderr.write(f"{ERR}{NAME}: nvidia-ml-py (module pynvml) does not load: {exc}; no GPU configured\n")
            return 1
    # NVML that does not start in time fails each GPU, named, as before (the apply says why)
    wait_for_nvml(nvml, sys.stderr, clock, sleep)
    return run(nvml, state, sys.stdout, sys.stderr)


if __name__ == "__main__":
    raise SystemExit(main())
