# SPDX-License-Identifier: Apache-2.0
"""How the bundled driver is installed: cluster objects, the DaemonSet, host-mode units.

- ``driver``: the cluster objects, the DaemonSet, node kubeconfigs, wheel platforms, and the rule for
  the driver image's Python and glibc;
- ``driver_instances``: a node's kubelet plugins (one, or two split by kind), their arguments,
  state and ports;
- ``reclaim``: the reclaim watcher as the role installs it (``aligned_dra_driver_reclaim``);
- ``mig``: MIG as the role installs it (``aligned_dra_mig``: ``--mig``, ``--mig-gpus``, NVML's MIG grants in
  the DaemonSet, partitionable devices per minor);
- ``monitoring``: how the driver's metrics are made visible (``aligned_dra_monitoring``: scrape
  objects or files, NVML for the use metrics), with ``monitoring_rules`` (the alerting rules) and
  ``monitoring_dashboard`` (the Grafana dashboard).
"""
