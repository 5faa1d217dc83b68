# SPDX-License-Identifier: Apache-2.0
"""What the GPUs are used for, measured through NVML, and the driver's metrics.

- ``watcher``: GPU use per claim (``--usage=on``): the driver's one NVML reader (``load_pynvml``,
  ``NvmlReader``) and the GPU watcher that maps each GPU's processes to the pods of the claims;
- ``gpm``: the share of SMs busy from NVML's GPM, per GPU and per MIG GPU instance, between two
  polls;
- ``series``: the use series, made at scrape time from the watcher's last snapshot and the claims
  prepared now;
- ``reclaim``: ``--reclaim=evict``: GPU memory a fractional claim uses above its request taken back
  (read through the same NVML reader, the pods from the claims' ``reservedFor``);
- ``metrics``: the driver's Prometheus metrics and its health endpoint (``--metrics-address``).

May import: the top-level helpers, :mod:`aligned_dra_driver.network`, :mod:`aligned_dra_driver.sharing`,
:mod:`aligned_dra_driver.devices` (the health causes) and :mod:`aligned_dra_driver.claims` (the
claims' pods, the status writes' backoff); nothing above.
"""
