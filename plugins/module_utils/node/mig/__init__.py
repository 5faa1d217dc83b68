# SPDX-License-Identifier: Apache-2.0
"""MIG on a node: a GPU's MIG state read from NVML, placements for wanted instances, layouts and their apply.

Node side: Python >= 3.9, standard library only, nothing from Ansible or the controller. The driver's wheel
vendors the package (``driver/build_backend.py``); the driver imports it through
``aligned_dra_driver.collection`` (``mig_state``, ``mig_packing``, ``mig_holders``). Its modules:

- ``nvml_state``: :func:`read_gpu` and :func:`read_node`, a GPU's MIG state as a plain dict (MIG mode,
  profiles with their placements, GPU and compute instances, MIG UUIDs, processes), and the wrappers of
  NVML's list calls (``possible_placements``, ``gpu_instances``, ``compute_instances``);
- ``packing``: :func:`pack`, placements for wanted instances beside existing ones (disjoint memory slices,
  NVML's offered placements, instance counts), or why they do not fit; :func:`placement_order`, the
  preference among a profile's placements;
- ``layout``: mig-parted configs, the selection of GPUs, and their validation against NVML's profiles;
- ``apply``: the plan of changes per GPU (instances to destroy and create, MIG mode) and its apply.
- ``holders``: the processes that hold a GPU (NVML's compute processes, then those with its device file open),
  named by PID and command for a refused change, by ``apply`` and the driver alike.
- ``boot``: the boot-time apply of a static node's layout as the role recorded it (``aligned-dra-mig.service``,
  ``python -m``), one GPU at a time through ``apply``.
"""
