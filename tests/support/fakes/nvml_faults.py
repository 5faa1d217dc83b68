# SPDX-License-Identifier: Apache-2.0
"""FAKE NVML, its injected errors, for the tests (never shipped): mixed into ``nvml.FakeNvml``.

NVML documents an error return for every call (``NVML_ERROR_UNKNOWN``, ``GPU_IS_LOST``, ``TIMEOUT``, ``IN_USE``,
``NO_PERMISSION``, …), and a driver meets them mid-scan and mid-Unprepare. A test makes one call fail::

    nvml.inject("nvmlDeviceGetGpuInstances", nvml.NVML_ERROR_UNKNOWN)              # the next call, any GPU
    nvml.inject("nvmlDeviceGetMigMode", nvml.NVML_ERROR_GPU_IS_LOST, times=None,    # every call, until cleared,
                bus_id="0000:18:00.0")                                              # on that GPU only
    nvml.clear_faults()

An injected error is raised before the call does anything, as the real library returns before its effect;
``times`` counts the calls it fails (``None``: every call). ``bus_id`` matches a GPU's handle, the handles of
its GPU and compute instances and MIG devices, and the bus ID given to ``nvmlDeviceGetHandleByPciBusId``. A
fake bound to a state file (a driver process's) reads the faults from it and writes back what is left of
them, so a test can fail a call inside a running driver.
"""

from __future__ import annotations

import ctypes
from typing import Any


class FaultyNvml:
    """Errors injected per call (mixed into ``FakeNvml``, which gives ``_keys``, ``_changed`` and the errors)."""

    faults: list[dict[str, Any]]

    def inject(self, call: str, error: int, times: int | None = 1, bus_id: str | None = None) -> None:
        """Make ``call`` raise NVML error ``error`` (``times`` calls; None: every call), on ``bus_id`` only."""
        if not call.startswith("nvml") or not callable(getattr(type(self), call, None)):
            raise ValueError(f"{call!r} is no NVML call of the fake")
        if times is not None and times < 1:
            raise ValueError("times must be 1 or more, or None")
        self._load_faults()  # a fake bound to a state file: what the driver's calls left of the faults
        self.faults.append({"call": call, "error": int(error), "times": times, "bus_id": bus_id})
        self._changed()

    def clear_faults(self) -> None:
        self.faults = []
        self._changed()

    def _bus_of(self, args: tuple) -> str | None:
        """The GPU a call is about: a handle's (GPU, instance or MIG device) or the bus ID it was given."""
        if not args:
            return None
        first = args[0]
        if isinstance(first, (str, bytes)):
            try:
                return self._bus(first)  # type: ignore[attr-defined]
            except Exception:  # a malformed bus ID: the call itself says so
                return None
        try:
            key = self._keys.get(ctypes.cast(first, ctypes.c_void_p).value)  # type: ignore[attr-defined]
        except (TypeError, ctypes.ArgumentError):
            return None
        return key[1] if key else None

    def _injected(self, name: str, args: tuple) -> None:
        """Raise the first fault for this call (and GPU); count it down."""
        for fault in self.faults:
            if fault["call"] != name:
                continue
            if fault["bus_id"] is not None and self._bus_of(args) != self._bus(fault["bus_id"]):  # type: ignore
                continue
            if fault["times"] is not None:
                fault["times"] -= 1
                if fault["times"] <= 0:
                    self.faults.remove(fault)
                self._changed()
            raise self.NVMLError(fault["error"])  # type: ignore[attr-defined]

    def __getattribute__(self, name: str) -> Any:
        value = object.__getattribute__(self, name)
        if not name.startswith("nvml") or not callable(value) or name in ("nvmlInit", "nvmlShutdown"):
            return value
        fake = self
        object.__getattribute__(self, "_load_faults")()
        if not any(f["call"] == name for f in object.__getattribute__(self, "faults")):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            fake._injected(name, args)
            return value(*args, **kwargs)

        return call

    def _load_faults(self) -> None:
        """A driver process's fake: the faults of the state file (the test's side writes them)."""
        loader = getattr(self, "_read_faults", None)
        if loader is not None:
            loader()
