# SPDX-License-Identifier: Apache-2.0
"""The gang search: where each multi-node job goes, whole, on the site's domains.

- ``search``: places each job whole on the levels, or says which domain came closest and why;
- ``capacity``: how many workers each node holds per rail signature (the planner's public shapes);
- ``choice``: which domains and nodes take a job's workers;
- ``site_view``: the planner's nodes joined to the placement's hosts.

It uses the planner through its public names and the levels of ``controller.domains``.
"""
