# SPDX-License-Identifier: Apache-2.0
"""Every node accounted for: which of a site's nodes failed, and how."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

NODE_STATES = ("failed", "unreachable")


def node_accounting(
    site_hosts: Iterable[str],
    ok_hosts: Iterable[str],
    failures: dict[str, dict[str, Any]],
    stage: str,
    stale_ages: dict[str, int] | None = None,
) -> dict[str, Any]:
    """``nodes_failed`` and ``node_counts`` of one site.

    ``site_hosts`` are the site's nodes this run targets, ``ok_hosts`` those
    still in the run, ``failures`` the recorded failures (``state``, ``stage``,
    ``task``, ``error``) by node. A node with a failure is failed (or
    unreachable, as recorded); a node neither ok nor with a failure is
    unreachable in ``stage``. ``stale_ages`` gives the age in seconds of the
    facts file an earlier run left for a failed node: it is reported, never used.
    """
    ok = set(ok_hosts)
    stale_ages = stale_ages or {}
    nodes_failed: dict[str, dict[str, Any]] = {}
    hosts = sorted(set(site_hosts))
    for host in hosts:
        failure = failures.get(host)
        if failure is None:
            if host in ok:
                continue
            failure = {
                "state": "unreachable",
                "stage": stage,
                "task": None,
                "error": f"the node gave no result in stage {stage} (unreachable: the run's output has the connection error)",
            }
        state = failure.get("state") or "failed"
        if state not in NODE_STATES:
            raise ValueError(f"{host}: aligned_dra_node_failure.state {state!r} is not one of {list(NODE_STATES)}")
        age = stale_ages.get(host)
        nodes_failed[host] = {
            "state": state,
            "stage": str(failure.get("stage") or stage),
            "task": None if failure.get("task") in (None, "") else str(failure["task"]),
            "error": str(failure.get("error") or ""),
            "stale_facts": None
            if age is None
            else {"file": f"nodes/{host}.json", "age_s": max(0, int(age)), "used": False},
        }
    states = [entry["state"] for entry in nodes_failed.values()]
    return {
        "nodes_failed": nodes_failed,
        "node_counts": {
            "ok": len(hosts) - len(nodes_failed),
            "failed": states.count("failed"),
            "unreachable": states.count("unreachable"),
        },
    }


def node_counts_line(site: str, counts: dict[str, int]) -> str:
    """The run's last word on a site: ``site <name>: nodes <ok> ok / <failed> failed / <unreachable> unreachable``."""
    return f"site {site}: nodes {counts['ok']} ok / {counts['failed']} failed / {counts['unreachable']} unreachable"
