# SPDX-License-Identifier: Apache-2.0
"""The site report: self-contained HTML pages built from the same device model as the plan.

- ``pages``: the Jinja2 templates loaded, the sections and pages rendered and written;
- ``inputs``: the files the report reads besides the topologies (plan, teams, utilization, replay,
  jobs), checked;
- ``layouts``: layouts of a site's nodes and each layout's GPU x NIC level matrix;
- ``svg``: the geometry of the pictures the templates draw;
- ``data``: the rows and figures each section shows;
- ``jobs``: the jobs section, each job as a row and on a picture of the site;
- ``replay``: the replay section (whole, fractional and thin GPUs);
- ``mig``: each static MIG layout drawn (memory slices, a box per instance) and the replay's MIG figures;
- ``gpudirect``: the GPUDirect RDMA section (per node ready or not, per pair its path);
- ``usage``: used versus allocated (the measured use in ``utilization.json``);
- ``driver_metrics``: the metrics the bundled driver exports, as the report lists them.
"""
