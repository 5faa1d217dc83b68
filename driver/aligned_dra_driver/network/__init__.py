# SPDX-License-Identifier: Apache-2.0
"""NICs handed to pods: the interfaces of PCI functions, their IPv4 addresses and routes, the CDI hook.

- ``interfaces``: a PCI function's network interfaces over netlink: found by PCI address, read,
  renamed and put back;
- ``addresses``: a NIC's IPv4 addresses and routes: read on the host, given to the pod, put back on
  the host at Unprepare;
- ``hook``: ``aligned-dra-netdev-hook``, the CDI ``createRuntime`` hook that moves a NIC into a
  pod's network namespace (with its addresses, routes and, in RDMA exclusive mode, its RDMA device).

May import: the top-level helpers (``config``, ``validation``) only; no other package of the driver.
The hook runs as a program of its own on every container start: it stays light.
"""
