# SPDX-License-Identifier: Apache-2.0
"""The site's topology as the controller sees it.

- ``fact``: the slim node fact ``aligned_dra_topology`` and where the whole topology is kept;
- ``summary``: node and site summaries over the device model (the topology role's site summary,
  the report);
- ``gpudirect``: GPUDirect RDMA per node and site in the summaries (pairs through the host bridge,
  unverified ones);
- ``accounting``: which of a site's nodes failed a stage, and how.
"""
