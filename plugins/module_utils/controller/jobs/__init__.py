# SPDX-License-Identifier: Apache-2.0
"""Multi-node jobs of a site: their input (:mod:`spec`), their Kubernetes objects per minor (:mod:`render`:
Indexed Job, headless Service, Kueue labels), the Workload/PodGroup for gang and topology scheduling
(:mod:`workload`), the NCCL environment rails imply (:mod:`nccl`), the checks of the objects
(:mod:`checks`), and a job list placed as the inventory gives it (:mod:`place`).

The scheduler-specific parts are ``controller/schedulers/``'s (Kueue's queue, KAI's PodGroup); the
``jobs`` module's run is the ``jobs`` stage's.
"""
