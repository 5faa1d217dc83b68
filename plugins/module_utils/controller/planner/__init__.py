# SPDX-License-Identifier: Apache-2.0
"""The allocation planner (claims placed on the site's devices as kube-scheduler would) and
utilization measured from published slices and claims, on the same device model.

- ``allocator``: one claim placed on one node's devices;
- ``consumption``: what an allocation consumes of a device (capacity under ``requestPolicy``, shared counters);
- ``plan``: how many claims of each template fit on each node (``plan.json``);
- ``inputs``: the planner's input loaded from the modules' options (objects, topologies or slices);
- ``rails``: which rail each allocated NIC is on, and how many claims fit per rail;
- ``mig``: the plan's ``mig`` section (per MIG GPU and template, the claims that fit alone and in the mix);
- ``thin``: the thin ratio of burstable templates (GPU memory promised over GPU memory there is);
- ``gpu_counts``: per node, the GPUs its drivers publish beside those KAI Scheduler would count;
- ``utilization``: the devices in use, measured from ResourceSlices and ResourceClaims;
- ``utilization_mig``: its ``mig`` section (MIG devices per profile, GPU, node and team; GPU-equivalents);
- ``held``: the devices a site's claims hold now, read from this run's ``utilization.json``;
- ``model_store``: the site model (the planner's nodes) one stage of a run built, kept for a later one.
"""
