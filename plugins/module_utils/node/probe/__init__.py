# SPDX-License-Identifier: Apache-2.0
"""The probe module's work on the node: ``aligned.dra.topology_info`` is its arguments, one ``run``, the exit.

- ``topology_info``: :func:`run`, the module's result from its parameters: the topology (``node/topology``),
  on the live node the IPv4 addresses of the RDMA NICs' interfaces, the driver's record of the NICs out
  of the host's view and each NVIDIA GPU's MIG state, and the network plan when asked
  (``node/network/plan``); :class:`ProbeError`, the message the module fails with;
- ``gpu_mig``: each NVIDIA GPU's ``mig`` entry, read through NVML (``node/mig/nvml_state``) where the
  node's Python has ``nvidia-ml-py``, or why it could not be read.

Runs on nodes (Python >= 3.9, standard library only; ``pynvml`` where it is installed, imported only on a
node with NVIDIA GPUs). Imports ``node/`` only.
"""
