# SPDX-License-Identifier: Apache-2.0
"""The MIG change of a node's GPUs: :func:`run` reads them through NVML, plans each selected GPU, and applies.

``nvml`` is the ``pynvml`` module of nvidia-ml-py (tests pass the fake); ``runner`` runs the GPU reset command
(``argv -> (rc, stdout, stderr)``, the module's ``run_command``). Per selected GPU the plan holds

- ``destroy``: the instances to go (compute instances first, then the GPU instance),
- ``create``: the GPU instances to make, each at its placement, with the compute instance spanning it (shared
  engines); in static mode an existing instance of the same profile and placement is kept, never recreated,
- ``mig_mode``: the change of MIG mode, ``reset`` and ``reboot_required``: Hopper and newer change it while the
  GPU is idle; Ampere (and an architecture NVML does not name) needs a GPU reset, done only with ``drained``
  and no process on the GPU by the reset command (NVML's pending mode set first, so a reboot applies it where
  the reset fails); otherwise the GPU is left as it is and reported as needing a reboot.

Refused while changing: NVML answering ``IN_USE`` to a destroy or a mode change, or a mode change's activation
status that is not success, fails naming what holds the GPU (:mod:`holders`, read under ``procfs_root``): NVML's
compute processes, then the processes with the GPU's device file open (a GPU client that is not a compute
process: DCGM's host engine, an exporter, a device plugin; the role stops those listed in
``aligned_dra_mig_gpu_clients`` for the change), each by PID and command, or, where none is seen, such a client.

Refused before anything changes: an instance to destroy that runs a process (naming the GPU, the instance and
the PIDs), a MIG mode change of a Hopper GPU that runs processes on a drained node (static; on a node not
drained it is left as it is, reported in ``blocked``), and every layout error
(:mod:`layout`). Mode ``static`` applies the config ``layout`` of ``mig_configs``; ``dynamic`` turns MIG mode on
and leaves the instances to the driver (a Hopper GPU running a process, as a GPU whole, is left to it too);
``off`` changes nothing and reports. A second run plans nothing. Check mode plans: a GPU whose MIG mode is off
shows its instances without placements (NVML tells a GPU's profiles only with MIG mode on).

Node side: Python 3.9, standard library only.
"""

from __future__ import annotations

import ctypes

from . import holders, layout, nvml_state, packing

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

MODES = ("off", "static", "dynamic")
DEFAULT_RESET_COMMAND = ["nvidia-smi", "--gpu-reset", "-i", "{pci_address}"]
NO_RESET = ("hopper", "blackwell")  # MIG mode changes without a GPU reset (an idle GPU)
SUCCESS = 0
RESET_REQUIRED = 16
IN_USE = 19
# NVML_COMPUTE_INSTANCE_PROFILE_<n>_SLICE (its value) -> compute slices
CI_SLICES = {0: 1, 1: 2, 2: 3, 3: 4, 4: 7, 5: 8, 6: 6, 7: 1, 8: 7}


class MigError(Exception):
    """The change cannot be made, or NVML failed making it; the message names the GPU and what was asked."""


# -- the node's GPUs -------------------------------------------------------------------------------------


def node_gpus(nvml: Any) -> list[dict[str, Any]]:
    """Every GPU NVML sees, in PCI address order, with its MIG state (``state``: :func:`nvml_state.read_gpu`)
    and what selects it (index, device and vendor ID, subsystem)."""
    found = []
    for index in range(int(_nvml(nvml, "nvmlDeviceGetCount"))):
        handle = _nvml(nvml, "nvmlDeviceGetHandleByIndex", index)
        info = _nvml(nvml, "nvmlDeviceGetPciInfo", handle)
        found.append((layout.normalize_pci(_text(info.busId)), info))
    gpus = []
    for index, (address, info) in enumerate(sorted(found, key=lambda f: f[0])):
        state = nvml_state.read_gpu(nvml, address)
        packed, sub = int(info.pciDeviceId), int(info.pciSubSystemId)
        gpus.append(
            {
                "index": index,
                "pci_address": address,
                "name": state["name"],
                "device_id": packed >> 16,
                "vendor_id": packed & 0xFFFF,
                "subsystem": (sub >> 16, sub & 0xFFFF),
                "mig_capable": bool(state["mig_capable"]),
                "state": state,
            }
        )
    return gpus


def _nvml(nvml: Any, name: str, *args: Any) -> Any:
    try:
        return getattr(nvml, name)(*args)
    except Exception as exc:  # NVMLError, or a broken binding
        raise MigError(f"NVML {name}: {_describe(exc)}") from exc


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _code(exc: BaseException) -> int | None:
    value = getattr(exc, "value", None)
    return value if isinstance(value, int) else None


def _describe(exc: BaseException) -> str:
    code = _code(exc)
    text = str(exc) or type(exc).__name__
    return f"{text} (NVML error {code})" if code is not None else f"{type(exc).__name__}: {text}"


def _instance(found: dict[str, Any]) -> dict[str, Any]:
    return {
        "gpu_instance": found["gpu_instance"],
        "profile": found["profile"],
        "placement": dict(found["placement"]),
        "uuid": found.get("uuid"),
        "processes": list(found.get("processes") or []),
    }


def _shown(found: dict[str, Any]) -> str:
    placement = found.get("placement")
    if not placement:
        return f"{found['profile']} (placed once MIG mode is on)"
    start, size = placement["start"], placement["size"]
    return f"{found['profile']} at memory slice {start}" + (f" (size {size})" if size != 1 else "")


def _pids(pids: list[int], procfs_root: str) -> str:
    """``4242 (python3), 77``: the PIDs with their commands (:func:`holders.command`), a PID alone where its
    command cannot be read."""
    return holders.listed((pid, holders.command(procfs_root, pid, unknown="")) for pid in pids)


# -- the plan ------------------------------------------------------------------------------------------


def _complete(found: dict[str, Any], profiles: list[dict[str, Any]]) -> bool:
    """One compute instance spanning the GPU instance (the only shape this collection makes and keeps)."""
    slices = next((p["slices"] for p in profiles if p["name"] == found["profile"]), None)
    cis = found.get("compute_instances") or []
    return len(cis) == 1 and CI_SLICES.get(cis[0]["profile_id"]) == slices


def _keep_first(found: dict[str, Any]) -> tuple[int, int]:
    return (0 if found["processes"] else 1, -found["placement"]["start"])


def target(entry: dict[str, Any], state: dict[str, Any]) -> tuple[list[dict], list[dict], list[dict]]:
    """``(keep, destroy, create)`` for a GPU with MIG mode on: its instances that match the entry's profiles
    stay (those running a process first), the rest go, the missing ones are placed beside the kept ones, or on
    the GPU anew where they do not fit beside them (keeping those of the same profile and placement)."""
    counts = layout.profile_counts(entry, state)
    fresh = layout.check_fits(entry, state, counts)
    instances = state["instances"] or []
    matching = sorted(
        (i for i in instances if i["profile"] in counts and _complete(i, state["profiles"])), key=_keep_first
    )
    keep: list[dict[str, Any]] = []
    for found in matching:
        if sum(1 for k in keep if k["profile"] == found["profile"]) < counts[found["profile"]]:
            keep.append(found)
    missing = {name: count - sum(1 for k in keep if k["profile"] == name) for name, count in counts.items()}
    try:
        create = packing.pack(state["profiles"], keep, {n: c for n, c in missing.items() if c})
    except packing.PackingError:
        keep, create = [], []
        for slot in fresh:
            same = next(
                (
                    i
                    for i in matching
                    if i not in keep
                    and i["profile"] == slot["profile"]
                    and (i["placement"]["start"], i["placement"]["size"]) == (slot["start"], slot["size"])
                ),
                None,
            )
            keep.append(same) if same is not None else create.append(slot)
    destroy = [i for i in instances if i not in keep]
    planned = [
        {"profile": c["profile"], "profile_id": c["profile_id"], "placement": {"start": c["start"], "size": c["size"]}}
        for c in create
    ]
    return keep, destroy, planned


def _wanted_on(mode: str, entry: dict[str, Any] | None) -> bool | None:
    if mode == "dynamic":
        return True
    if mode == "static" and entry is not None:
        return entry["mig_enabled"]
    return None


def plan_gpu(gpu: dict[str, Any], mode: str, entry: dict[str, Any] | None, drained: bool, procfs_root: str) -> dict:
    """What the GPU needs (see the module's docstring); MigError or LayoutError where it is refused."""
    state = gpu["state"]
    if state.get("error"):
        raise MigError(f"{layout.describe(gpu)}: NVML could not read its MIG state: {state['error']}")
    before = [_instance(i) for i in state["instances"] or []]
    plan = {
        "pci_address": gpu["pci_address"],
        "index": gpu["index"],
        "name": gpu["name"],
        "architecture": state["architecture"],
        "layout_entry": entry["where"] if entry else None,
        "mig_mode": None,
        "destroy": [],
        "create": [],
        "before": before,
        "after": before,
        "reset": False,
        "reboot_required": False,
        "blocked": None,
        "changed": False,
    }
    want = _wanted_on(mode, entry)
    if want is None:
        return plan
    current, pending = state["mig_mode"]["current"], state["mig_mode"]["pending"]
    keep, destroy, create = before, [], []
    if mode == "static" and want and current:
        keep, destroy, create = target(entry, state)
        keep, destroy = [_instance(i) for i in keep], [_instance(i) for i in destroy]
    elif mode == "static" and want:
        for name, count in sorted(entry["mig_devices"].items()):
            create.extend({"profile": name, "profile_id": None, "placement": None} for _copy in range(count))
    elif not want:
        keep, destroy = [], before
    for found in destroy:
        if found["processes"]:
            raise MigError(
                f"{layout.describe(gpu)}: instance {_shown(found)} (GPU instance {found['gpu_instance']}"
                f"{', ' + found['uuid'] if found['uuid'] else ''}) runs processes {_pids(found['processes'], procfs_root)}: "
                "it would be destroyed; stop them (drain the node) and run again"
            )
    plan.update(destroy=destroy, create=create, after=keep + create)
    if current != want or pending != want:
        plan["mig_mode"] = {"before": dict(state["mig_mode"]), "after": want}
    if current != want:
        _mode_change(plan, gpu, mode, drained, procfs_root)
    plan["changed"] = bool(plan["destroy"] or plan["create"] or plan["mig_mode"])
    return plan


def _mode_change(plan: dict[str, Any], gpu: dict[str, Any], mode: str, drained: bool, procfs_root: str) -> None:
    """How the MIG mode changes: at once (Hopper and newer, idle), by a reset (drained, idle) or not now."""
    pids = gpu["state"]["processes"] or []
    if plan["architecture"] in NO_RESET:
        if not pids:
            return
        if mode == "dynamic":  # a GPU whole in use: the driver turns MIG mode on at its next MIG claim
            plan.update(mig_mode=None, create=[], after=plan["before"])
            plan["blocked"] = f"runs processes {_pids(pids, procfs_root)} as a GPU whole: MIG mode left to the driver"
            return
        if not drained:  # the role drains the node, then runs again
            plan["blocked"] = (
                f"its MIG mode changes only while the GPU is idle; it runs processes {_pids(pids, procfs_root)}, "
                "and the node is not drained"
            )
            return
        raise MigError(
            f"{layout.describe(gpu)}: MIG mode changes only while the GPU is idle; it runs processes "
            f"{_pids(pids, procfs_root)}: stop them (drain the node) and run again"
        )
    plan["reset"] = True
    if not drained:
        plan.update(reboot_required=True, blocked="its MIG mode needs a GPU reset, and the node is not drained")
    elif pids:
        plan.update(
            reboot_required=True,
            blocked=f"its MIG mode needs a GPU reset; it runs processes {_pids(pids, procfs_root)}",
        )


# -- the apply -----------------------------------------------------------------------------------------------


def held_by(nvml: Any, gpu: dict[str, Any], procfs_root: str) -> str:
    """What holds the GPU, for a change NVML refused as in use: its processes (PID and command: NVML's compute
    processes, then those with its device file open, :mod:`holders`), or the clients no process is seen for."""
    address = gpu["pci_address"]
    found, _errors = holders.read(  # an NVML error here leaves its part out: the refusal is the error to tell
        procfs_root,
        lambda: nvml_state.read_gpu(nvml, address).get("processes") or [],
        lambda: nvml.nvmlDeviceGetMinorNumber(nvml.nvmlDeviceGetHandleByPciBusId(address)),
    )
    if found:
        return f"the GPU is held by processes {holders.listed(found)}"
    return (
        "NVML lists no compute process on the GPU: a GPU client holds it (DCGM's host engine, a DCGM exporter, "
        "a device plugin, a monitoring agent); stop it for the change (aligned_dra_mig_gpu_clients)"
    )


def _destroy(nvml: Any, handle: Any, gpu: dict[str, Any], found: dict[str, Any], procfs_root: str = "/proc") -> None:
    what = f"{layout.describe(gpu)}: destroying instance {_shown(found)} (GPU instance {found['gpu_instance']})"
    held = (nvml, gpu, procfs_root)
    gi = _nvml_in(nvml, what, "nvmlDeviceGetGpuInstanceById", handle, found["gpu_instance"])
    shared = int(getattr(nvml, "NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED", 0))
    for index in range(int(getattr(nvml, "NVML_COMPUTE_INSTANCE_PROFILE_COUNT", len(CI_SLICES)))):
        try:
            info = nvml.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, index, shared)
        except Exception as exc:
            if _code(exc) in (nvml_state.NOT_SUPPORTED, nvml_state.INVALID_ARGUMENT):
                continue
            raise MigError(f"{what}: {_describe(exc)}") from exc
        try:
            listed = nvml_state.compute_instances(nvml, gi, int(info.id), int(info.instanceCount))
        except Exception as exc:  # NVMLError: named with the GPU, never raised raw
            raise MigError(f"{what}: nvmlGpuInstanceGetComputeInstances: {_describe(exc)}") from exc
        for ci in listed:
            _nvml_in(nvml, what, "nvmlComputeInstanceDestroy", ci, held=held)
    _nvml_in(nvml, what, "nvmlGpuInstanceDestroy", gi, held=held)


def _nvml_in(nvml: Any, what: str, name: str, *args: Any, held: tuple | None = None) -> Any:
    """An NVML call of a change; ``held`` (nvml, gpu, procfs_root): an IN_USE answer names what holds the GPU."""
    try:
        return getattr(nvml, name)(*args)
    except Exception as exc:
        hint = f": {held_by(*held)}" if held is not None and _code(exc) == IN_USE else ""
        raise MigError(f"{what}: {name}: {_describe(exc)}{hint}") from exc


def _create(nvml: Any, handle: Any, gpu: dict[str, Any], state: dict[str, Any], planned: dict[str, Any]) -> None:
    what = f"{layout.describe(gpu)}: creating {_shown(planned)}"
    placement = nvml.c_nvmlGpuInstancePlacement_t()
    placement.start, placement.size = planned["placement"]["start"], planned["placement"]["size"]
    gi = _nvml_in(
        nvml, what, "nvmlDeviceCreateGpuInstanceWithPlacement", handle, planned["profile_id"], ctypes.byref(placement)
    )
    slices = next(p["slices"] for p in state["profiles"] if p["name"] == planned["profile"])
    shared = int(getattr(nvml, "NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED", 0))
    try:
        for index in range(int(getattr(nvml, "NVML_COMPUTE_INSTANCE_PROFILE_COUNT", len(CI_SLICES)))):
            try:
                info = nvml.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, index, shared)
            except Exception as exc:
                if _code(exc) in (nvml_state.NOT_SUPPORTED, nvml_state.INVALID_ARGUMENT):
                    continue
                raise MigError(f"{what}: {_describe(exc)}") from exc
            if int(info.sliceCount) == slices:
                _nvml_in(nvml, what, "nvmlGpuInstanceCreateComputeInstance", gi, int(info.id))
                return
        raise MigError(f"{what}: NVML offers no compute instance profile spanning its {slices} slices")
    except MigError:
        try:
            nvml.nvmlGpuInstanceDestroy(gi)
        except Exception:  # the first error is the one to tell
            pass
        raise


def _set_mode(
    nvml: Any,
    handle: Any,
    gpu: dict[str, Any],
    plan: dict[str, Any],
    runner: Callable,
    command: list,
    procfs_root: str = "/proc",
) -> bool:
    """Set the MIG mode; reset the GPU where it needs one. True where the mode is now the wanted one."""
    want = plan["mig_mode"]["after"]
    what = f"{layout.describe(gpu)}: MIG mode {'on' if want else 'off'}"
    held = (nvml, gpu, procfs_root)
    status = _nvml_in(nvml, what, "nvmlDeviceSetMigMode", handle, int(want), held=held)
    current = _mig_mode(nvml, what, gpu)
    if current == want:
        return True
    if status not in (SUCCESS, RESET_REQUIRED) or not plan["reset"]:
        raise MigError(
            f"{what}: NVML answered {status} and the mode is still {'on' if current else 'off'}: {held_by(*held)}"
        )
    argv = [part.replace("{pci_address}", gpu["pci_address"]) for part in command]
    try:
        rc, out, err = runner(argv)
    except OSError as exc:
        rc, out, err = 127, "", str(exc)
    if rc != 0:
        plan["reboot_required"] = True
        plan["blocked"] = (
            f"the GPU reset ({' '.join(argv)}) failed, rc {rc}: {(err or out).strip()}; a reboot applies the pending mode"
        )
        return False
    current = _mig_mode(nvml, what, gpu)
    if current != want:
        plan["reboot_required"] = True
        plan["blocked"] = (
            f"the GPU reset ({' '.join(argv)}) left MIG mode {'on' if current else 'off'}; a reboot applies it"
        )
    return current == want


def _mig_mode(nvml: Any, what: str, gpu: dict[str, Any]) -> bool:
    """The current MIG mode, through a handle taken now: NVML's handles of a GPU change with its MIG mode."""
    handle = _nvml_in(nvml, what, "nvmlDeviceGetHandleByPciBusId", gpu["pci_address"])
    return bool(_nvml_in(nvml, what, "nvmlDeviceGetMigMode", handle)[0])


def apply_gpu(
    nvml: Any,
    gpu: dict[str, Any],
    plan: dict[str, Any],
    entry: dict | None,
    runner: Callable,
    command: list,
    procfs_root: str = "/proc",
) -> None:
    """Make the plan real for one GPU (not blocked); ``plan``'s ``create``, ``after`` and, where a reset failed,
    ``reboot_required`` are updated. ``procfs_root``: where a refusal reads the names of the GPU's processes."""
    handle = _nvml(nvml, "nvmlDeviceGetHandleByPciBusId", gpu["pci_address"])
    for found in plan["destroy"]:
        _destroy(nvml, handle, gpu, found, procfs_root)
    mode = plan["mig_mode"]
    turned_on = mode is not None and mode["after"] and not mode["before"]["current"]
    if mode is None or _set_mode(nvml, handle, gpu, plan, runner, command, procfs_root):
        if mode is not None:  # a handle taken before a mode change is no longer valid
            handle = _nvml(nvml, "nvmlDeviceGetHandleByPciBusId", gpu["pci_address"])
        state = _read(nvml, gpu)
        if turned_on and entry is not None and entry["mig_enabled"] and plan["create"]:
            plan["create"] = target(entry, state)[2]  # the profiles are known now: placed and checked
        for planned in plan["create"]:
            _create(nvml, handle, gpu, state, planned)
    plan["after"] = [_instance(i) for i in _read(nvml, gpu)["instances"] or []]


def _read(nvml: Any, gpu: dict[str, Any]) -> dict[str, Any]:
    state = nvml_state.read_gpu(nvml, gpu["pci_address"])
    if state.get("error"):
        raise MigError(f"{layout.describe(gpu)}: NVML could not read its MIG state: {state['error']}")
    return state


# -- the run ---------------------------------------------------------------------------------------------------


def _diff_side(plan: dict[str, Any], side: str) -> dict[str, Any]:
    mode = plan["mig_mode"]
    shown = {"instances": [_shown(i) for i in plan[side]]}
    if mode:
        on = mode["before"]["current"] if side == "before" else mode["after"]
        later = side == "after" and plan["reboot_required"]
        shown["mig_mode"] = ("on" if on else "off") + (" after a reboot" if later else "")
    return shown


def run(nvml: Any, params: dict[str, Any], check_mode: bool, runner: Callable) -> dict[str, Any]:
    """The module's work: ``params`` as the module's arguments (``mode``, ``gpus``, ``mig_configs``, ``layout``,
    ``drained``, ``reset_command``, ``procfs_root``). NVML initialized and shut down here."""
    mode = params.get("mode") or "off"
    if mode not in MODES:
        raise MigError(f"mode: one of {', '.join(MODES)}, not {mode!r}")
    entries = None
    if mode == "static":
        if params.get("mig_configs") is None:
            raise layout.LayoutError(
                "mig_configs: the layouts (mig-parted's mig-configs) are required with mode static"
            )
        entries = layout.choose(layout.parse_configs(params["mig_configs"]), params.get("layout"))
    command = params.get("reset_command")
    command = DEFAULT_RESET_COMMAND if command is None else command
    if not isinstance(command, list) or not command or not all(isinstance(c, str) and c for c in command):
        raise MigError(f"reset_command: a non-empty list of non-empty strings, not {command!r}")
    try:
        nvml.nvmlInit()
    except Exception as exc:
        raise MigError(f"NVML cannot start ({_describe(exc)}): is the NVIDIA GPU driver loaded on this node?") from exc
    try:
        gpus = layout.select(node_gpus(nvml), params.get("gpus"))
        found = layout.wanted(entries, gpus) if entries is not None else {}
        warnings = [
            f"{layout.describe(g)} is selected, but layout {params.get('layout')} has no entry for it: left as it is"
            for g in gpus
            if entries is not None and found[g["pci_address"]] is None
        ]
        procfs_root = params.get("procfs_root") or "/proc"
        plans = [plan_gpu(g, mode, found.get(g["pci_address"]), bool(params.get("drained")), procfs_root) for g in gpus]
        for gpu, plan in zip(gpus, plans):
            if plan["blocked"]:
                warnings.append(f"{layout.describe(gpu)}: {plan['blocked']}")
            if check_mode:
                continue
            if plan["blocked"] or not plan["changed"]:  # nothing is done to it now
                plan.update(changed=False, after=plan["before"])
                continue
            apply_gpu(nvml, gpu, plan, found.get(gpu["pci_address"]), runner, command, procfs_root)
            if plan["blocked"]:
                warnings.append(f"{layout.describe(gpu)}: {plan['blocked']}")
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:  # nothing left to tell
            pass
    changed = [p for p in plans if p["changed"]]
    return {
        "changed": bool(changed),
        "mode": mode,
        "layout": params.get("layout") if mode == "static" else None,
        "gpus": plans,
        "reboot_required": any(p["reboot_required"] for p in plans),
        "diff": {
            "before": {p["pci_address"]: _diff_side(p, "before") for p in changed},
            "after": {p["pci_address"]: _diff_side(p, "after") for p in changed},
        },
        "warnings": warnings,
    }
