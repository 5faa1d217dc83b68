# SPDX-License-Identifier: Apache-2.0
"""The placement search, choice: which domains and nodes take a job's workers, for one rail signature.

:func:`best` gets each domain's hosts with the workers each holds and returns
the best placement, compared by one key, smallest first:

1. the number of domains (a required job, or a preferred one that one domain
   holds: one; a preferred job no domain holds: the fewest that hold it
   together, *k*: as many as the biggest domains must be added up to hold it);
2. the number of nodes (the chosen domains' nodes with the most workers
   first, then by name: the fewest nodes those domains can do it on);
3. the workers the chosen domains hold beyond the job (best fit: big domains
   stay free for big jobs);
4. the domains' names, in natural order (``r2`` before ``r10``,
   :func:`levels.natural_key`), then the rail signature.

One domain: every domain that holds the job is compared, so the order holds
exactly. Several: every set of *k* domains that holds the job and can be
best is compared - domains whose nodes hold the same numbers of workers
differ only by name, so a set takes the first by name of them - while there
are at most :data:`MAX_DOMAIN_SETS` such sets (the order holds exactly: a
site of racks alike stays far below). Beyond, only the *k* - 1 biggest
domains with each other domain that completes them are (``exhaustive``
false): the fewest domains still, but the nodes, the capacity left over and
the names only the best of those sets; the node count is still proven the
fewest where the nodes with the most workers on the whole site need as many
(``fewest_nodes``). The job's ``notes`` say which. Comparing every set is a
search over combinations of domains; the limit keeps it small.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.domains.levels import natural_key

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

# sets of domains compared for a job over several domains before falling back to the biggest ones
MAX_DOMAIN_SETS = 1024


def name_key(name: str | None) -> tuple[Any, ...]:
    """Natural order of a domain or host name (None, no domain: first)."""
    return natural_key(name or "")


def ranked(totals: Mapping[str | None, int]) -> list[str | None]:
    """Domains by the workers they hold, most first, then by name."""
    return sorted(totals, key=lambda d: (-totals[d], name_key(d)))


def _needed(counts: Iterable[int], workers: int) -> int:
    """Nodes that hold ``workers`` taking the nodes that hold the most first: the fewest any order can do."""
    needed, left = 0, workers
    for count in sorted(counts, reverse=True):
        if left <= 0 or not count:
            break
        needed += 1
        left -= count
    return needed


def _profiles(caps: Mapping[str | None, Mapping[str, int]], totals: Mapping[str | None, int]) -> dict[tuple, list]:
    """The domains holding a worker by profile (the workers each of their nodes holds, most first), each
    profile's domains by name: domains of one profile are the same to every criterion but the names."""
    groups: dict[tuple, list] = {}
    for domain in sorted((d for d in caps if totals[d]), key=name_key):
        profile = tuple(sorted((c for c in caps[domain].values() if c), reverse=True))
        groups.setdefault(profile, []).append(domain)
    return groups


def _spanning(
    caps: Mapping[str | None, Mapping[str, int]], order: list, totals: Mapping[str | None, int], workers: int
) -> tuple[list[tuple], bool]:
    """The sets of the fewest domains that together hold ``workers`` that can be best, and whether that is
    every one of them (else the biggest domains but the last with each domain that completes them).

    A set takes of each profile its first domains by name: another domain of
    the same profile would give the same nodes and left over, and names no
    earlier. So the sets are the counts per profile that hold the job.
    """
    held, k = 0, 0
    for domain in order:
        held += totals[domain]
        k += 1
        if held >= workers:
            break
    groups = _profiles(caps, totals)
    profiles = sorted(groups, key=lambda p: (-sum(p), p))
    sets: list[tuple] = []

    def most(index: int, left: int) -> int | None:
        """The most workers ``left`` domains of the profiles from ``index`` on hold; None: too few domains."""
        found = 0
        for profile in profiles[index:]:
            take = min(left, len(groups[profile]))
            found, left = found + take * sum(profile), left - take
        return found if left == 0 else None

    def extend(index: int, left: int, so_far: int, chosen: list) -> None:
        if len(sets) > MAX_DOMAIN_SETS:
            return
        if left == 0:
            sets.append(tuple(chosen))
            return
        reach = most(index, left)
        if reach is None or so_far + reach < workers:
            return
        profile = profiles[index]
        for count in range(min(left, len(groups[profile])), -1, -1):
            extend(index + 1, left - count, so_far + count * sum(profile), chosen + groups[profile][:count])

    extend(0, k, 0, [])
    if len(sets) <= MAX_DOMAIN_SETS:
        return sets, True
    prefix = tuple(order[: k - 1])
    base = sum(totals[d] for d in prefix)
    return [(*prefix, d) for d in order[k - 1 :] if base + totals[d] >= workers], False


def best(
    caps: Mapping[str | None, Mapping[str, int]], workers: int, preferred: bool, signature: tuple[int, ...] | None
) -> tuple[tuple, dict[str, Any]] | None:
    """The best placement of ``workers`` as ``(sort key, choice)``; None when no placement holds them.

    ``caps``: ``{domain: {host: workers it holds}}`` (the domain None: no
    level); ``preferred``: the job may span domains. ``choice``:
    ``{"domains", "picked": [(host, workers)], "signature", "exhaustive",
    "fewest_nodes"}``: ``exhaustive`` false when only the biggest domains with
    one more were compared; ``fewest_nodes`` whether the node count is proven
    the fewest (always when exhaustive; else where no set could do with fewer
    nodes even without the limit on domains).
    """
    totals = {d: sum(hosts.values()) for d, hosts in caps.items()}
    order = ranked(totals)
    candidates = [(d,) for d in order if totals[d] >= workers]
    exhaustive = True
    if not candidates and preferred and sum(totals.values()) >= workers:
        candidates, exhaustive = _spanning(caps, order, totals, workers)
    found = None
    for domains in candidates:
        needed = _needed((c for d in domains for c in caps[d].values()), workers)
        names = sorted(domains, key=name_key)
        key = (len(domains), needed, sum(totals[d] for d in domains) - workers, [name_key(d) for d in names])
        key += (signature or (),)
        if found is None or key < found[0]:
            found = (key, names)
    if found is None:
        return None
    key, names = found
    # the chosen domains' nodes, most workers first, then by name
    pool = sorted((-c, name_key(h), h) for d in names for h, c in caps[d].items() if c)
    picked, left = [], workers
    for negative, _key, host in pool[: key[1]]:
        picked.append((host, min(-negative, left)))
        left -= picked[-1][1]
    # past the limit the node count is still the fewest where no set of domains could do with fewer
    fewest = exhaustive or key[1] == _needed((c for hosts in caps.values() for c in hosts.values()), workers)
    return key, {"domains": names, "picked": picked, "signature": signature, "exhaustive": exhaustive,
                 "fewest_nodes": fewest}  # fmt: skip
