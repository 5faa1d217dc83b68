# SPDX-License-Identifier: Apache-2.0
"""IPv4 addresses of network interfaces, read on a live node (the ``subnet`` rail rule needs them).

sysfs has no addresses: they are read with the ``SIOCGIFADDR`` and
``SIOCGIFNETMASK`` ioctls in the caller's network namespace, which give each
interface's primary IPv4 address (the one a rail's subnet gives it). An
interface without one, or gone, gets an empty list. Python >= 3.9, standard
library only.
"""

from __future__ import annotations

import ipaddress
import socket
import struct

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

SIOCGIFADDR = 0x8915
SIOCGIFNETMASK = 0x891B
_IFNAMSIZ = 16


def _ioctl_ipv4(sock: socket.socket, request: int, name: str) -> str | None:
    import fcntl

    packed = struct.pack("256s", name.encode()[: _IFNAMSIZ - 1])
    try:
        answer = fcntl.ioctl(sock.fileno(), request, packed)
    except OSError:
        return None  # no IPv4 address (EADDRNOTAVAIL) or no such interface (ENODEV)
    return socket.inet_ntoa(answer[20:24])


def ipv4_addresses(names: Iterable[str]) -> dict[str, list[str]]:
    """``{interface: ["192.168.128.5/21"]}`` for each name (empty list: none)."""
    found: dict[str, list[str]] = {}
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for name in names:
            address = _ioctl_ipv4(sock, SIOCGIFADDR, name)
            mask = _ioctl_ipv4(sock, SIOCGIFNETMASK, name) if address else None
            if address and mask:
                prefix = ipaddress.IPv4Network(f"0.0.0.0/{mask}").prefixlen
                found[name] = [f"{address}/{prefix}"]
            else:
                found[name] = []
    return found
