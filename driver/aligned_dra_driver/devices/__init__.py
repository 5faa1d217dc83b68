# SPDX-License-Identifier: Apache-2.0
"""The node's devices: what each scan finds, what is published, and how healthy it is.

- ``inventory``: the driver's options and the scan: the node's devices from the topology probe,
  kept by the ``--match`` rules and the CEL ``--selector`` expressions;
- ``publisher``: the node's ResourceSlices (one pool named after the node), replaced as a whole
  generation when they change;
- ``rails``: each RDMA NIC's and VF's rail from ``--rails-file``, read again when the file changes;
- ``health``: device health from every scan: one table for the health stream, the metrics and the
  device taints;
- ``pcihealth``: a PCI function's health signals the probe does not carry (config space, AER,
  carrier);
- ``uevents``: kernel uevents that wake the rescan early.

May import: the top-level helpers (``collection``, ``fsutil``, ``kube``, ``validation``) and
:mod:`aligned_dra_driver.sharing` (a GPU published as shareable); nothing above.
"""
