# SPDX-License-Identifier: Apache-2.0
"""Opaque device configuration, API ``dra.aligned.dev/v1alpha1``.

DeviceClasses and ResourceClaims carry it in ``spec.config[].opaque`` (driver
``dra.aligned.dev``); the allocation copies it into
``status.allocation.devices.config[]`` with its ``source`` (FromClass or
FromClaim) and the ``requests`` it applies to. Class configuration applies
first, claim configuration second; a later value of a field replaces an
earlier one.

``NicConfig`` (for NIC and VF devices)::

    apiVersion: dra.aligned.dev/v1alpha1
    kind: NicConfig
    interfaceName: net1          # name inside the pod (default: the host name)
    mtu: 9000                    # 68..65535
    addresses: [10.0.0.2/24]     # CIDR, at most 16
    routes: [{destination: 10.1.0.0/16, gateway: 10.0.0.1}]
    moveToPod: true              # false: leave the netdev in the host namespace

``GpuConfig`` (for GPU and accelerator devices)::

    apiVersion: dra.aligned.dev/v1alpha1
    kind: GpuConfig
    sharing:
      strategy: TimeSlicing      # or MPS
      timeSlice: Default         # Default, Short, Medium, Long (TimeSlicing; set with nvidia-smi)
      mps:
        activeThreadPercentage: 50       # the request (without consumedCapacity)
        pinnedDeviceMemoryLimit: 10Gi
        limits: {memory: 40Gi, compute: 80}  # thin provisioning: up to these while the GPU has room
"""

from __future__ import annotations

import ipaddress
import math
import re
from fractions import Fraction
from typing import Any

from .validation import is_ifname, show

API_VERSION = "dra.aligned.dev/v1alpha1"
KINDS = ("NicConfig", "GpuConfig")
NIC_FIELDS = {"apiVersion", "kind", "interfaceName", "mtu", "addresses", "routes", "moveToPod"}
GPU_FIELDS = {"apiVersion", "kind", "sharing"}
SHARING_FIELDS = {"strategy", "timeSlice", "mps"}
MPS_FIELDS = {"activeThreadPercentage", "pinnedDeviceMemoryLimit", "limits"}
LIMIT_FIELDS = {"memory", "compute"}
STRATEGIES = ("TimeSlicing", "MPS")
TIME_SLICES = ("Default", "Short", "Medium", "Long")
MAX_ADDRESSES = 16
MAX_ROUTES = 32
# a Kubernetes quantity (resource.Quantity): a signed decimal number, then a binary or decimal suffix or a
# decimal exponent; "K" is no Kubernetes suffix ("k" is), but earlier releases of this driver accepted it
_QUANTITY_RE = re.compile(
    r"([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(?:[eE]([+-]?[0-9]+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkKMGTPE]))?"
)
_UNITS = {
    None: Fraction(1),
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "k": Fraction(10**3),
    "K": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}
MAX_QUANTITY_TEXT = 64


class ConfigError(ValueError):
    """Configuration that cannot be applied; the claim fails with this message."""


def interface_address(text: Any) -> ipaddress.IPv4Interface | ipaddress.IPv6Interface:
    """An interface address in CIDR form (``10.0.0.2/24``, ``fd00::2/64``); ValueError otherwise.

    A prefix length is required, and an IPv6 zone (``fe80::1%eth0``) is refused: the
    kernel takes neither a bare address nor a zone as an interface address.
    """
    if not isinstance(text, str) or not text.isascii() or "/" not in text or "%" in text:
        raise ValueError(f"{show(text)} is not an address in CIDR form")
    return ipaddress.ip_interface(text)


def route_spec(destination: Any, gateway: Any = None) -> tuple[Any, Any]:
    """(destination network, gateway address or None) of a route; ValueError naming what is wrong.

    Both must be text (``ipaddress`` would take an integer), of the same family, without an IPv6 zone.
    """
    if not isinstance(destination, str) or not destination.isascii() or "%" in destination:
        raise ValueError(f"destination {show(destination)} is not a network like 10.1.0.0/16")
    try:
        network = ipaddress.ip_network(destination, strict=False)
    except ValueError as exc:
        raise ValueError(f"destination {show(destination)} is not a network like 10.1.0.0/16") from exc
    if gateway is None:
        return network, None
    if not isinstance(gateway, str) or not gateway.isascii() or "%" in gateway:
        raise ValueError(f"gateway {show(gateway)} is not an address like 10.0.0.1")
    try:
        address = ipaddress.ip_address(gateway)
    except ValueError as exc:
        raise ValueError(f"gateway {show(gateway)} is not an address like 10.0.0.1") from exc
    if address.version != network.version:
        raise ValueError(f"gateway {gateway} is IPv{address.version}, destination {destination} IPv{network.version}")
    return network, address


def parse_quantity(value: Any, where: str) -> int:
    """Bytes of a Kubernetes quantity (``10Gi``, ``1.5Gi``, ``1Pi``, ``512M``, ``1e9``, ``1073741824``), rounded
    up to a whole byte as Kubernetes rounds a quantity's value; a negative one is refused."""
    text = str(value) if isinstance(value, (str, int)) and not isinstance(value, bool) else None
    match = _QUANTITY_RE.fullmatch(text) if text is not None and len(text) <= MAX_QUANTITY_TEXT else None
    if not match:
        raise ConfigError(f"{where}: {show(value)} is not a quantity like 10Gi")
    number, exponent, suffix = match.groups()
    if exponent is not None and abs(int(exponent)) > 30:
        raise ConfigError(f"{where}: {show(value)} is out of range")
    amount = Fraction(number) * (Fraction(10) ** int(exponent) if exponent is not None else _UNITS[suffix])
    if amount < 0:
        raise ConfigError(f"{where}: {show(value)} is negative")
    return math.ceil(amount)


def parse_percent(value: Any, where: str) -> int:
    """An integer percent 1..100, as an integer or a string of one (``80``, ``"80"``: how
    ``capacity.requests`` must write it)."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ConfigError(f"{where}: {show(value)} must be an integer percent in 1..100")
    text = str(value).strip()
    if not text.isascii() or not text.isdigit() or len(text) > 3 or not 1 <= int(text) <= 100:
        raise ConfigError(f"{where}: {show(value)} must be an integer percent in 1..100")
    return int(text)


def _unknown(obj: dict[str, Any], allowed: set[str], where: str) -> None:
    extra = sorted(set(obj) - allowed)
    if extra:
        raise ConfigError(f"{where}: unknown field(s) {', '.join(extra)} (allowed: {', '.join(sorted(allowed))})")


def validate_nic(obj: dict[str, Any], where: str) -> dict[str, Any]:
    _unknown(obj, NIC_FIELDS, where)
    out: dict[str, Any] = {}
    if "interfaceName" in obj:
        name = obj["interfaceName"]
        if not is_ifname(name):
            raise ConfigError(
                f"{where}.interfaceName: {show(name)} is not a Linux interface name "
                "(1-15 characters: letters, digits, _ . -)"
            )
        if name == "lo":
            raise ConfigError(f"{where}.interfaceName: 'lo' is the pod's loopback interface")
        out["interfaceName"] = name
    if "mtu" in obj:
        mtu = obj["mtu"]
        if not isinstance(mtu, int) or isinstance(mtu, bool) or not 68 <= mtu <= 65535:
            raise ConfigError(f"{where}.mtu: {show(mtu)} must be an integer in 68..65535")
        out["mtu"] = mtu
    if "addresses" in obj:
        addresses = obj["addresses"]
        if not isinstance(addresses, list) or len(addresses) > MAX_ADDRESSES:
            raise ConfigError(f"{where}.addresses must be a list of at most {MAX_ADDRESSES} CIDR addresses")
        for address in addresses:
            try:
                interface_address(address)
            except ValueError as exc:
                raise ConfigError(f"{where}.addresses: {show(address)} is not an address in CIDR form") from exc
        if len(set(addresses)) != len(addresses):
            raise ConfigError(f"{where}.addresses: duplicate address")
        out["addresses"] = list(addresses)
    if "routes" in obj:
        routes = obj["routes"]
        if not isinstance(routes, list) or len(routes) > MAX_ROUTES:
            raise ConfigError(f"{where}.routes must be a list of at most {MAX_ROUTES} routes")
        checked = []
        for index, route in enumerate(routes):
            if not isinstance(route, dict) or set(route) - {"destination", "gateway"} or "destination" not in route:
                raise ConfigError(f"{where}.routes[{index}] must be {{destination, gateway}}")
            try:
                route_spec(route["destination"], route.get("gateway"))
            except ValueError as exc:
                raise ConfigError(f"{where}.routes[{index}]: {exc}") from exc
            checked.append(dict(route))
        out["routes"] = checked
    if "moveToPod" in obj:
        if not isinstance(obj["moveToPod"], bool):
            raise ConfigError(f"{where}.moveToPod must be a boolean")
        out["moveToPod"] = obj["moveToPod"]
    return out


def validate_limits(limits: Any, where: str) -> dict[str, int]:
    """``sharing.mps.limits``: ``{memory: bytes, compute: percent}``, at least one of them."""
    if not isinstance(limits, dict):
        raise ConfigError(f"{where} must be a mapping with memory (a quantity like 40Gi) and/or compute (1..100)")
    _unknown(limits, LIMIT_FIELDS, where)
    if not limits:
        raise ConfigError(f"{where} is empty: give memory (a quantity like 40Gi), compute (1..100) or both")
    checked: dict[str, int] = {}
    if "memory" in limits:
        memory = parse_quantity(limits["memory"], f"{where}.memory")
        if memory == 0:
            raise ConfigError(f"{where}.memory: 0 is no limit; give a quantity like 40Gi")
        checked["memory"] = memory
    if "compute" in limits:
        checked["compute"] = parse_percent(limits["compute"], f"{where}.compute")
    return checked


def validate_gpu(obj: dict[str, Any], where: str) -> dict[str, Any]:
    _unknown(obj, GPU_FIELDS, where)
    out: dict[str, Any] = {}
    sharing = obj.get("sharing")
    if sharing is None:
        return out
    if not isinstance(sharing, dict):
        raise ConfigError(f"{where}.sharing must be a mapping")
    _unknown(sharing, SHARING_FIELDS, f"{where}.sharing")
    strategy = sharing.get("strategy")
    if strategy not in STRATEGIES:
        raise ConfigError(f"{where}.sharing.strategy: {show(strategy)} must be one of {', '.join(STRATEGIES)}")
    checked: dict[str, Any] = {"strategy": strategy}
    if "timeSlice" in sharing:
        if sharing["timeSlice"] not in TIME_SLICES:
            raise ConfigError(f"{where}.sharing.timeSlice must be one of {', '.join(TIME_SLICES)}")
        checked["timeSlice"] = sharing["timeSlice"]
    if "mps" in sharing:
        mps = sharing["mps"]
        if not isinstance(mps, dict):
            raise ConfigError(f"{where}.sharing.mps must be a mapping")
        _unknown(mps, MPS_FIELDS, f"{where}.sharing.mps")
        checked_mps: dict[str, Any] = {}
        if "activeThreadPercentage" in mps:
            pct = mps["activeThreadPercentage"]
            if not isinstance(pct, int) or isinstance(pct, bool) or not 1 <= pct <= 100:
                raise ConfigError(f"{where}.sharing.mps.activeThreadPercentage must be an integer in 1..100")
            checked_mps["activeThreadPercentage"] = pct
        if "pinnedDeviceMemoryLimit" in mps:
            checked_mps["pinnedDeviceMemoryLimit"] = parse_quantity(
                mps["pinnedDeviceMemoryLimit"], f"{where}.sharing.mps.pinnedDeviceMemoryLimit"
            )
        if "limits" in mps:
            checked_mps["limits"] = validate_limits(mps["limits"], f"{where}.sharing.mps.limits")
        checked["mps"] = checked_mps
    out["sharing"] = checked
    return out


def parse(parameters: Any, where: str) -> tuple[str, dict[str, Any]]:
    """Validate one opaque parameters object; returns (kind, checked fields)."""
    if not isinstance(parameters, dict):
        raise ConfigError(f"{where}: parameters must be an object")
    if parameters.get("apiVersion") != API_VERSION:
        raise ConfigError(f"{where}: apiVersion {show(parameters.get('apiVersion'))} is not {API_VERSION}")
    kind = parameters.get("kind")
    if kind == "NicConfig":
        return kind, validate_nic(parameters, where)
    if kind == "GpuConfig":
        return kind, validate_gpu(parameters, where)
    raise ConfigError(f"{where}: kind {show(kind)} is not one of {', '.join(KINDS)}")


def applies(config_requests: list[str] | None, request: str) -> bool:
    """Whether a config entry for ``config_requests`` applies to the result of ``request``.

    A result of a ``firstAvailable`` subrequest is named ``parent/sub``; config
    naming the parent applies to it.
    """
    if not config_requests:
        return True
    return request in config_requests or request.split("/", 1)[0] in config_requests


def effective(entries: list[dict[str, Any]], driver: str, request: str, device_kind: str) -> dict[str, Any]:
    """The merged configuration of one allocated device.

    ``entries`` is ``status.allocation.devices.config``; FromClass entries are
    applied before FromClaim ones, each in list order. Entries for other
    drivers are ignored; an entry of ours with the wrong kind for the device
    (NicConfig for a GPU) is ignored too, so one config can name requests of
    both kinds.
    """
    wanted = "GpuConfig" if device_kind in ("gpu", "accelerator") else "NicConfig"
    merged: dict[str, Any] = {}
    if not isinstance(entries, list):
        raise ConfigError("status.allocation.devices.config must be a list")
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("opaque") or {}, dict):
            raise ConfigError(f"config[{index}] must be an object with an 'opaque' object")
        requests = entry.get("requests")
        if requests is not None and not (isinstance(requests, list) and all(isinstance(r, str) for r in requests)):
            raise ConfigError(f"config[{index}].requests must be a list of request names")
    ordered = [e for e in entries if e.get("source") == "FromClass"] + [
        e for e in entries if e.get("source") != "FromClass"
    ]
    for index, entry in enumerate(ordered):
        opaque = entry.get("opaque") or {}
        if opaque.get("driver") != driver or not applies(entry.get("requests"), request):
            continue
        kind, fields = parse(opaque.get("parameters"), f"config[{index}] ({show(entry.get('source'), 20)})")
        if kind == wanted:
            merged.update(fields)
    return merged
