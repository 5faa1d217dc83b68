# SPDX-License-Identifier: Apache-2.0
"""MIG on the controller: ``aligned_dra_mig`` checked before any node changes, and the one MIG model of the site.

- ``geometry``: the MIG geometry NVIDIA documents per PCI device ID (A30, A100, H100, H200, B200), marked
  ``documented``; NVML's profiles from the probe where it read them;
- ``checks``: the layouts, the GPUs they configure, one mode per GPU, MIG beside MPS fractions, and
  partitionable devices per minor, which the validation stage asks once per site;
- ``model``: each node's MIG GPUs and what the driver publishes for them, the site's MIG capacity, the
  smallest profile holding a need and a ready layout snippet: what the planner, claims, teams, utilization
  and replay read.

An engines-and-models package: it imports ``controller/topology/``, ``controller/deploy/`` (the driver role's
rule for ``dynamic`` per minor) and the node's layout reader and packing solver (``node/mig/layout``,
``node/mig/packing``, standard library only) and the device model (``dra/mig``); the site stages import it.
"""
