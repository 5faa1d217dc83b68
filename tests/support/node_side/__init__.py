# SPDX-License-Identifier: Apache-2.0
"""What the Molecule nodes run with the node image's Python (3.9 and later, standard library only); tests
only, never shipped. Molecule copies both beside each other onto a node (``/opt/fake-kernel``), as they lie here.

- ``sysfs_builder``: the sysfs fixture builder (one module per subsystem) and the one VF writer;
- ``fake_sysfs_sriov``: a FAKE kernel for SR-IOV sysfs writes, in process or as a watching script.
"""
