# SPDX-License-Identifier: Apache-2.0
"""Helpers of the tests (never shipped), one package per concern.

- ``fakes``: strict stand-ins for what a test cannot have (NVML, ...);
- ``harnesses``: what runs a real part under test and talks to it (the driver, its doubles, the fault proxy).
"""
