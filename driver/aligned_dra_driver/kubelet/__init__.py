# SPDX-License-Identifier: Apache-2.0
"""What the kubelet talks to: the plugin's gRPC services and the answers to its Prepare and Unprepare calls.

- ``services``: the gRPC services on Unix sockets (plugin registration, DRA v1 and v1beta1, device
  health), the sockets themselves and the instance lock that keeps one driver per node;
- ``driver``: the driver's state behind those services: Prepare, Unprepare and the start-up restore,
  in the order of writes that leaves a claim fully prepared or absent after a crash;
- ``proto``: the gRPC code generated from the kubelet's ``.proto`` files (``driver/tools/generate_protos.py``).

May import: every package below it (the top-level helpers, :mod:`aligned_dra_driver.network`,
:mod:`aligned_dra_driver.sharing`, :mod:`aligned_dra_driver.devices`, :mod:`aligned_dra_driver.claims`,
:mod:`aligned_dra_driver.usage`, :mod:`aligned_dra_driver.mig`); only ``cli`` imports it.
"""
