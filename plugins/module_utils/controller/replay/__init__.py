# SPDX-License-Identifier: Apache-2.0
"""Replay of a workload trace on a site's GPUs: the vocabulary of the package.

``trace`` reads the pods of a trace (the openb CSV of a published production
GPU-sharing trace, or the collection's generic CSV), ``nodes`` the nodes (an
openb node list, or a site's ``plan.json``), ``engine`` places the pods
(saturation or timeline, whole, fractional or thin GPUs, pack or spread) and
``result`` turns the outcome into the ``replay`` result. Thin provisioning
on measured use reads the pods' usage series (``usage``), walks time placing
by request and evicting by the driver's reclaim rule (``thin_walk``) and
shapes its part of the result (``thin_result``). The ``mig`` policy places the
pods on the site's MIG partitions (``mig``: the GPUs and both orders;
``mig_sizing``: the smallest profile that holds a pod's memory and its compute
share, with headroom on measured peaks, and which need decided it;
``mig_draws``: the first fit with seeded random ties among the nodes, the
figure as a range; ``mig_result``: the site's MIG GPUs and the result). docs/replay.md describes the semantics.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

SCHEMA_VERSION = 1
TRACE_FORMATS = ("openb", "csv")
POLICIES = ("whole", "fractional", "thin", "mig")
ORDERS = ("pack", "spread")
MODES = ("saturation", "timeline")
# One GPU, in milli-GPUs (openb's unit).
GPU_MILLI = 1000
# Most GPUs one node may have, and so one pod may ask for (a pod runs on one
# node): a typo (80 for 8) is refused, not replayed.
MAX_NODE_GPUS = 64


class ReplayError(ValueError):
    """Input the replay cannot use; the message names the option, and the line and column of a file."""
