# SPDX-License-Identifier: Apache-2.0
"""Helpers of the tests (never shipped), one package per concern.

- ``fakes``: strict stand-ins for what a test cannot have (the Kubernetes API server, NVML, netlink);
- ``harnesses``: what runs a real part under test and talks to it (the driver, ``ansible-playbook``, Chromium,
  the installed collection, admission policies' CEL, modules and role messages);
- ``fuzzing``: the argument fuzzer's vocabulary and each module's valid and broken arguments;
- ``sites``: nodes, sites, teams and queues the tests build, and the reference model of KAI's fair share;
- ``node_side``: what the Molecule nodes run with the node image's Python: the fake SR-IOV kernel and the
  sysfs fixture builder;
- ``suite_timing``: the suite's own clock, per test file (tests/conftest.py, scripts/test.sh).
"""
