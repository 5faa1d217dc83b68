# SPDX-License-Identifier: Apache-2.0
"""Fractional GPUs: shareable devices in the slices, a share's request and its limit, MPS and time slicing.

- ``fractional``: GPUs published as shareable (consumable capacity), the CUDA MPS daemon per GPU and
  the time slice, the container edits that enforce a share;
- ``limits``: thin provisioning: a share's request (what the scheduler placed) and its limit (what
  the workload may use while the GPU has room), checked against the GPU.

Taking memory back above a request (``--reclaim=evict``) reads the GPUs' use: it lives in
:mod:`aligned_dra_driver.usage.reclaim`.

May import: the top-level helpers (``collection``, ``config``, ``validation``) only; no other package
of the driver.
"""
