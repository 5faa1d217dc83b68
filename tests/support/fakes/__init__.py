# SPDX-License-Identifier: Apache-2.0
"""FAKES for the tests (never shipped): strict stand-ins for what a test cannot have.

- ``nvml``: a fake NVML (``pynvml`` of nvidia-ml-py) for the driver's reclaim watcher, and a node of GPUs and
  procfs cgroups it reads;
- ``nvml_mig``: the fake NVML's MIG half (GPU models, MIG mode by architecture, GPU and compute instances,
  MIG devices, the nvidia-caps access files), mixed into ``nvml``'s ``FakeNvml``;
- ``apiserver``: the strict fake Kubernetes API server, one module per concern, and its background runner
  for the Molecule scenarios (``daemon.py``, run as a script);
- ``netlink``: network namespaces with links, addresses and routes, answering pyroute2's ``IPRoute`` calls.
"""
