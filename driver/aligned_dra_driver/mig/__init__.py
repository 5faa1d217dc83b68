# SPDX-License-Identifier: Apache-2.0
"""MIG in the driver (``--mig=static|dynamic``), by concern:

- :mod:`.nvml`: the NVML calls MIG needs, on ``pynvml`` (or the tests' fake);
- :mod:`.devices`: what each scan publishes in the MIG GPUs' place (:class:`.devices.MigScanner`);
- :mod:`.prepare`: instances made and destroyed at Prepare and Unprepare (:class:`.prepare.MigPreparer`);
- :mod:`.restore`: crash safety at start and the retries at each rescan (mixed into ``MigPreparer``);
- :mod:`.mode`: a MIG mode change, its activation status and the mode read back.

The processes that hold a GPU (PID and command), for a refused change, are named by the collection's
``node/mig/holders`` (``aligned_dra_driver.collection.mig_holders``), as the rollout's module names them.

May import: the top-level helpers (``collection``, ``fsutil``), :mod:`aligned_dra_driver.usage` (the one NVML
loader, ``load_pynvml``) and :mod:`aligned_dra_driver.claims` (the container edits, ``PrepareError``) and
the packages below them; only :mod:`aligned_dra_driver.kubelet` imports it.
"""
