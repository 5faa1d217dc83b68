# SPDX-License-Identifier: Apache-2.0
"""MIG in the driver (``--mig=static|dynamic``), by concern:

- :mod:`.nvml`: the NVML calls MIG needs, on ``pynvml`` (or the tests' fake);
- :mod:`.devices`: what each scan publishes in the MIG GPUs' place (:class:`.devices.MigScanner`);
- :mod:`.prepare`: instances made and destroyed at Prepare and Unprepare, crash safety at start
  (:class:`.prepare.MigPreparer`).
"""
