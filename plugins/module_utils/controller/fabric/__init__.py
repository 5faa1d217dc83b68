# SPDX-License-Identifier: Apache-2.0
"""The fabric across nodes: rails (which NIC is on which rail).

``rails`` is the one entry (every host's rule read against its probe, the
driver's rails file); ``rails_summary`` is its view in ``summary.json``,
``summary.md`` and the report.
"""
