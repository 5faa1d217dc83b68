# SPDX-License-Identifier: Apache-2.0
"""A pod's network namespace read and changed from a test, always in a process of its own.

pyroute2's ``IPRoute(netns=...)`` forks the calling process for each request.
A pytest-xdist worker has threads (execnet's, a fake API server's, a driver's
output readers): a fork taken while one of them holds a lock leaves a child
that never answers, and the test hangs with no timeout. Here every look inside
a namespace is ``nsenter`` running a fresh process, with a deadline.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

DEADLINE = 60.0

# Run inside the namespace: every link with its MTU, operational state and addresses, as JSON.
_LINKS = """
import json
from pyroute2 import IPRoute
found = {}
with IPRoute() as ipr:
    for link in ipr.get_links():
        found[link.get_attr("IFLA_IFNAME")] = {
            "mtu": link.get_attr("IFLA_MTU"),
            "addresses": [a.get_attr("IFA_ADDRESS") for a in ipr.get_addr(index=link["index"])],
            "state": link.get_attr("IFLA_OPERSTATE"),
        }
print(json.dumps(found))
"""

# Run inside the namespace: the driver's own records of one link's addresses and routes, as JSON.
_LAYER3 = """
import json, sys
from pyroute2 import IPRoute
from aligned_dra_driver.network import addresses as netdev_addresses
with IPRoute() as ipr:
    (index,) = ipr.link_lookup(ifname=sys.argv[1])
    print(json.dumps(netdev_addresses.read(ipr, index)))
"""

# Run inside the namespace: the destinations of the IPv4 routes of the main table.
_ROUTES = """
import json
from pyroute2 import IPRoute
with IPRoute() as ipr:
    print(json.dumps([r.get_attr("RTA_DST") for r in ipr.get_routes(family=2)]))
"""


def _prefix(pid: int | None) -> list[str]:
    return ["nsenter", f"--net=/proc/{pid}/ns/net"] if pid else []


def ip(*args: str, pid: int | None = None) -> str:
    """``ip ARGS`` in the pod's namespace (the test's own without a pid); its output, or AssertionError."""
    done = subprocess.run([*_prefix(pid), "ip", *args], capture_output=True, text=True, timeout=DEADLINE, check=False)
    if done.returncode:
        raise AssertionError(f"ip {' '.join(args)} (pid {pid}) exited {done.returncode}: {done.stderr.strip()}")
    return done.stdout


def python_json(code: str, *args: str, pid: int | None = None) -> Any:
    """Run CODE with this interpreter and this process's import path in the pod's namespace; its JSON output."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(path for path in sys.path if path)
    done = subprocess.run(
        [*_prefix(pid), sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=DEADLINE,
        check=False,
    )
    if done.returncode:
        raise AssertionError(f"a probe in pid {pid}'s namespace exited {done.returncode}: {done.stderr.strip()}")
    return json.loads(done.stdout)


def links(pid: int | None = None) -> dict[str, dict[str, Any]]:
    """Every link of the namespace: ``{name: {mtu, addresses, state}}``."""
    return python_json(_LINKS, pid=pid)


def layer3_records(name: str, pid: int | None = None) -> dict[str, Any]:
    """The driver's records (``netdev_addresses.read``) of link NAME's addresses and routes."""
    return python_json(_LAYER3, name, pid=pid)


def route_destinations(pid: int | None = None) -> list[str | None]:
    """The destinations of the namespace's IPv4 routes (None for a default route)."""
    return python_json(_ROUTES, pid=pid)
