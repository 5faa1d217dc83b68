# SPDX-License-Identifier: Apache-2.0
"""Multi-node jobs of a site: their Kubernetes objects per minor (Indexed Job, headless Service,
Workload/PodGroup for gang and topology scheduling, Kueue labels) and the NCCL environment rails imply.
"""
