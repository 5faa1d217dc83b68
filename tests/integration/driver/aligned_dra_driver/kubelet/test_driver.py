# SPDX-License-Identifier: Apache-2.0
"""The in-process Driver against a claim GET that hangs for real: the call's budget runs out and the hung
claim is answered with a timeout (the Driver's other tests, which wait for no clock, are in
tests/unit/driver/aligned_dra_driver/kubelet/test_driver.py). ``node``: the folder's conftest."""

from __future__ import annotations

import threading

from aligned_dra_driver.devices.inventory import Options
from aligned_dra_driver.kubelet import driver as drv

from ansible_collections.aligned.dra.tests.support.harnesses import driver as h
from ansible_collections.aligned.dra.tests.support.harnesses import driver_doubles as d


def make_slow(node):
    """A Driver as tests/unit/driver/aligned_dra_driver/kubelet/test_driver.py's ``make_slow`` builds it."""
    kube = d.ClaimsInMemory()
    driver = drv.Driver(Options(**node.options()), kube, status_queue=d.StatusRecorder(kube))
    driver.restore()
    driver.rescan()
    kube = d.SlowClaims()
    driver.kube = kube
    driver.status = d.StatusRecorder(kube)
    return driver, kube


def one_gpu(kube, name):
    return kube.add(h.claim_object(name, [{"request": "gpu", "device": h.GPU}]))


def test_a_hung_get_ends_in_a_per_claim_error_within_the_budget(node):
    driver, kube = make_slow(node)
    hung = one_gpu(kube, "hung")
    queued = one_gpu(kube, "queued")
    kube.hold["hung"] = threading.Event()
    answers = driver.prepare([hung, queued], budget=0.5)  # the hang is never released
    assert "read timed out" in answers[hung[1]]["error"]
    if hung[1] < queued[1]:  # claims are taken in UID order: the one after the hung GET finds no time left
        assert "budget" in answers[queued[1]]["error"]
        assert driver.checkpoint.claims == {} and list(node.cdi.iterdir()) == []
    else:
        assert "error" not in answers[queued[1]] and set(driver.checkpoint.claims) == {queued[1]}
