# SPDX-License-Identifier: Apache-2.0
"""The validation stage: the whole site's input checked before anything changes, and the controller preflight.

- ``stage``: the stage's one entry, ``run``, which the ``validate`` module and action call;
- ``validate``: argument specs, unknown names, the checks across hosts and stages, the message;
- ``validate_catalogue``: the site's claim catalogue rendered as the claims stage renders it (MIG hosts and
  their probes included), the teams' quotas and templates and the jobs against it;
- ``validate_driver``: each host's driver settings (node name, metrics port, image), the driver role's rules;
- ``validate_placement``: the placement levels and each host's domains, and the jobs' placement;
- ``validate_rails``: every host's rail rule read against its probe;
- ``validate_usage``: ``aligned_dra_usage`` checked before any run (the usage package's own check);
- ``validate_mig``: ``aligned_dra_mig`` of every site (``controller/mig``'s checks), and the hosts ``mig.yml`` rolls;
- ``preflight``: the Python packages the controller needs (standard library only), entered
  through its own ``run``, which the ``preflight`` module calls.

A top-layer package: it imports the controller's engines and vocabulary; nothing imports it.
"""
