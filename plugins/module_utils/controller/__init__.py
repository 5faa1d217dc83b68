# SPDX-License-Identifier: Apache-2.0
"""Controller side: per-site work that runs once, on the controller (Python >= 3.12 in practice;
it still parses as Python 3.9 because ansible-test compiles every module_utils file for every
node Python).

- ``inputs``: the site inputs (a host's site and Kubernetes node name, shapes of free-form inputs);
- ``domains``: the topology levels (block, rack, ...) and each node's domains;
- ``gangs``: the gang search that places each multi-node job whole;
- ``validation``: the checks before anything changes (the validation stage, the preflight);
- ``topology``: the slim node fact and its store, node and site summaries, failed-node accounting;
- ``deploy``: how the bundled driver is installed (cluster objects, DaemonSet, host mode);
- ``claims``: DeviceClasses and ResourceClaimTemplates per Kubernetes minor;
- ``planner``: the allocation planner (simulated allocation on the site's devices) and measured
  utilization;
- ``teams``: namespaces, quotas, priority tiers, and Kueue (objects, checks, what-if);
- ``report``: the HTML site report (data, SVG pictures, pages).

It imports ``dra``, the topology vocabulary of ``node.topology`` and, for the validation of SR-IOV
settings, ``node.network.sriov``; nothing on the node side or in ``dra`` imports it.
"""
