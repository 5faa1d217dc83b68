# SPDX-License-Identifier: Apache-2.0
"""TEST HARNESSES (never shipped): what runs a real part under test and talks to it.

- ``driver``: the bundled DRA driver as a process on a fixture node, with a gRPC client on its sockets;
- ``driver_doubles``: in-process doubles of the driver's Kube and status queue;
- ``fault_proxy``: an HTTP proxy between the driver and the fake API server that injects faults.
"""
