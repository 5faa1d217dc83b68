# SPDX-License-Identifier: Apache-2.0
"""The fabric across nodes: rails (which NIC is on which rail)."""
