# SPDX-License-Identifier: Apache-2.0
"""Topology snapshots: capture what the probe reads on a node (``capture``), and the archives
that carry it (``archive``: deterministic writes on the node, safe extraction on the controller).
Python >= 3.9, standard library only.
"""
