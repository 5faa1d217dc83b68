# SPDX-License-Identifier: Apache-2.0
"""TEST HARNESSES (never shipped): what runs a real part under test and talks to it.

- ``driver``: the bundled DRA driver as a process on a fixture node, with a gRPC client on its sockets;
- ``driver_doubles``: in-process doubles of the driver's Kube and status queue;
- ``driver_rails_node``: the driver's node with a second RDMA NIC, for the rails;
- ``netns``: a pod's network namespace read and changed by a process of its own (``nsenter``), never by a fork;
- ``fault_proxy``: an HTTP proxy between the driver and the fake API server that injects faults;
- ``driver_role``: the driver role run without a node, and the systemd units it renders read back;
- ``playbook_runs``: every ``ansible-playbook`` run of the integration tests, their inventories and recaps;
- ``installed_collection``: the collection built and installed as users get it;
- ``browser``: headless Chromium driven over the DevTools protocol;
- ``admission_policies``: a ValidatingAdmissionPolicy's CEL run as the API server runs it;
- ``jobs_module``: the ``jobs`` module run in-process;
- ``role_messages``: a module run in-process and a role's message rendered, as the docs show them;
- ``prometheus``: a real Prometheus on loopback and its ``promtool``.
"""
