# SPDX-License-Identifier: Apache-2.0
"""Multi-node jobs of a site: their input, their Kubernetes objects per minor (Indexed Job, headless
Service, Workload/PodGroup for gang and topology scheduling, Kueue labels), the NCCL environment rails
imply, the checks of the objects, and the runner of the ``jobs`` module.
"""
