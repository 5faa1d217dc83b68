# SPDX-License-Identifier: Apache-2.0
"""Checks of the values the driver and the netdev hook take from outside.

The kubelet's gRPC requests (claim UID, namespace, name), the ResourceClaim
read from the API server (allocation results, opaque configuration) and the
hook's command line all reach file names, netlink calls or CDI specs. Every
pattern here is matched against the *whole* value (``re.fullmatch``: a
``$``-anchored ``re.match`` lets a trailing newline through) and is ASCII only.

Kubernetes names (DNS labels and subdomains) are checked by the shared
device model's functions (``dra``), which the planner and renderer use too.

Messages show a refused value through :func:`show`, which cuts it to a
readable length: a request may carry strings of megabytes.
"""

from __future__ import annotations

import os
import re

from .collection import dra

# Kubernetes object UIDs are RFC 4122 UUIDs in their 36-character text form (the API server makes them).
UID_RE = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
# PCI address as the kernel names it in sysfs: domain (4 hex digits, 8 on some hosts), bus, device, function
BDF_RE = re.compile(r"[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")
# Linux interface names: 1-15 bytes; the kernel also refuses "/", ":" and white space; this is stricter
IFNAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,14}")
RDMA_NAME_RE = re.compile(r"[A-Za-z0-9_]{1,64}")
SHOW_LIMIT = 80


def show(value: object, limit: int = SHOW_LIMIT) -> str:
    """``repr`` of a refused value, cut after ``limit`` characters."""
    text = repr(value)
    if len(text) > limit:
        return f"{text[:limit]}... ({len(value) if isinstance(value, (str, bytes)) else len(text)} characters)"
    return text


def _full(pattern: re.Pattern[str], value: object) -> bool:
    return isinstance(value, str) and pattern.fullmatch(value) is not None


def is_uid(value: object) -> bool:
    return _full(UID_RE, value)


is_dns_label = dra.is_dns_label
is_dns_subdomain = dra.is_dns_subdomain


def is_bdf(value: object) -> bool:
    return _full(BDF_RE, value)


def is_ifname(value: object) -> bool:
    return _full(IFNAME_RE, value) and value not in (".", "..")


def is_rdma_name(value: object) -> bool:
    return _full(RDMA_NAME_RE, value)


def claim_ref_problem(namespace: object, uid: object, name: object) -> str | None:
    """Why a (namespace, uid, name) from the kubelet cannot name a ResourceClaim; None when it can."""
    problems = []
    if not is_uid(uid):
        problems.append(f"UID {show(uid)} is not a Kubernetes UID (8-4-4-4-12 hexadecimal digits)")
    if not is_dns_label(namespace):
        problems.append(f"namespace {show(namespace)} is not a DNS label (lowercase, at most 63 characters)")
    if not is_dns_subdomain(name):
        problems.append(f"name {show(name)} is not a DNS subdomain (lowercase, at most 253 characters)")
    return "; ".join(problems) or None


def contained(directory: str, path: str) -> bool:
    """Whether ``path``, without following links, names an entry directly inside ``directory``."""
    if "\0" in path or "\0" in directory:
        return False
    return os.path.dirname(os.path.normpath(path)) == os.path.normpath(directory)
