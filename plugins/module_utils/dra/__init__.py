# SPDX-License-Identifier: Apache-2.0
"""The DRA device model, shared by the bundled driver and the controller side.

- ``model``: which devices a node publishes and with which attributes, the limits the API server
  enforces, and names;
- ``slices``: the devices cut into ResourceSlices, read back per node, and checked against the limits;
- ``gates``: the Kubernetes minors and which DRA fields (feature gates) each serves;
- ``cel``: CEL device selectors with Kubernetes' functions and error semantics (cel-expr-python);
- ``device_model``: one model of a node's devices joined with the probe, for the planner, the site
  summaries and the report;
- ``labels``: Kubernetes label names and values, and the labels the collection sets (shared by the
  teams and the placement of jobs);
- ``scheduler_counts``: what schedulers other than kube-scheduler count as a GPU (KAI Scheduler's
  rule by name);
- ``mig``: MIG partitions in the model: a GPU's counter set, its MIG devices (static instances, or every
  placement of a partitionable GPU) and the order they are published in.

The driver's wheel vendors this package as it is (``driver/build_backend.py``). It imports only
``node.topology`` (the parsers and vocabulary) and ``node.mig.packing`` (the MIG placement preference, one
rule with the node's layout solver), never the controller side.
"""
