# SPDX-License-Identifier: Apache-2.0
"""Controller side: per-site work that runs once, on the controller (Python >= 3.12 in practice;
it still parses as Python 3.9 because ansible-test compiles every module_utils file for every
node Python).

Its packages in three layers (docs/development.md, "Layers"); a package imports its own layer's
packages or lower ones, never a higher one:

- the vocabulary: ``inputs`` (a host's site and Kubernetes node name, shapes of free-form inputs),
  ``domains`` (the topology levels: block, rack, ...; each node's domains);
- the engines and models: ``topology`` (the slim node fact, node and site summaries, failed-node
  accounting), ``planner`` (the allocation planner and measured utilization), ``claims``
  (DeviceClasses and ResourceClaimTemplates per Kubernetes minor), ``fabric`` (the site's rails),
  ``replay`` (a workload trace replayed on the site's GPUs), ``report`` (the HTML site report),
  ``deploy`` (how the bundled driver is installed), ``gangs`` (the gang search that places each
  multi-node job whole), ``teams`` (the engine-neutral team model), ``schedulers`` (the engine
  list; Kueue and KAI Scheduler, a package each), ``jobs`` (multi-node jobs and their objects);
- the stages: ``validation`` (the checks before anything changes, the preflight), ``stages`` (the
  other stages, one per Ansible module, each entered through ``run``).

It imports ``dra``, the topology vocabulary of ``node.topology``, ``json_file`` and, for the
validation of SR-IOV settings, ``node.network.sriov``; nothing on the node side or in ``dra``
imports it.
"""
