# SPDX-License-Identifier: Apache-2.0
"""FAKE NVML, the node most NVML tests start from (never shipped): an A100 40GB, an H100 80GB and an L40S
(no MIG), MIG mode off; NVML initialised unless the code under test does it."""

from __future__ import annotations

from ansible_collections.aligned.dra.tests.support.fakes.nvml import FakeNvml

A100, H100, L40S = "0000:18:00.0", "0000:2a:00.0", "0000:3b:00.0"


def three_gpus(init: bool = True) -> FakeNvml:
    fake = FakeNvml()
    fake.add_gpu(A100, model="A100-SXM4-40GB")
    fake.add_gpu(H100, model="H100-SXM5-80GB")
    fake.add_gpu(L40S, model="L40S")
    if init:
        fake.nvmlInit()
    return fake
