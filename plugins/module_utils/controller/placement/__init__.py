# SPDX-License-Identifier: Apache-2.0
"""Placement levels (block, rack, ...) of a site's nodes, and the multi-node jobs placed on them."""
