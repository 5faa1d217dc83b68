# SPDX-License-Identifier: Apache-2.0
"""MIG on the controller: ``aligned_dra_mig`` checked before any node changes.

- ``geometry``: the MIG geometry NVIDIA documents per PCI device ID (A30, A100, H100, H200, B200), marked
  ``documented``; NVML's profiles from the probe where it read them;
- ``checks``: the layouts, the GPUs they configure, one mode per GPU, MIG beside MPS fractions, and
  partitionable devices per minor, which the validation stage asks once per site.

An engines-and-models package: it imports ``controller/topology/``, ``controller/deploy/`` (the driver role's
rule for ``dynamic`` per minor) and the node's layout reader and packing solver (``node/mig/layout``,
``node/mig/packing``, standard library only); the validation stage imports it.
"""
