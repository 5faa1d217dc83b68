# SPDX-License-Identifier: Apache-2.0
"""What a prepared claim leaves on the node, and what the kubelet's Prepare and Unprepare write for it.

- ``checkpoint``: what the driver prepared, kept across restarts and reboots (written atomically);
- ``cdi``: the CDI spec of each prepared claim, and look-ups in the vendors' own specs;
- ``container_edits``: what a prepared device gives its container: device nodes, environment,
  sharing mounts, the NIC hook with its addresses and routes;
- ``status``: the claims' ``status.devices`` written in the background, never part of an answer;
- ``locks``: per-claim locks: calls on one claim take turns, other claims never wait;
- ``pods``: the pods of every prepared claim, as its ``status.reservedFor`` names them.

Prepare and Unprepare themselves (the order of these writes) are
:mod:`aligned_dra_driver.kubelet.driver`'s.

May import: the top-level helpers, :mod:`aligned_dra_driver.network`, :mod:`aligned_dra_driver.sharing`
and :mod:`aligned_dra_driver.devices`; nothing above.
"""
