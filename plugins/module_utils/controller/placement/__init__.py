# SPDX-License-Identifier: Apache-2.0
"""Placement: the site's levels (block, rack, ...) and each node's domains, and the search that places
each multi-node job on them (its capacity per node, the choice of domains and nodes, the site it sees).
"""
