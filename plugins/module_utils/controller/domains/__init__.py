# SPDX-License-Identifier: Apache-2.0
"""The vocabulary of topology levels (block, rack, NVLink clique, ...) and each node's domains at them.

- ``shared``: the placement's error, a host's problem and how both are said (the names
  of the variables, the check of a level's name and label, problems grouped by host);
- ``presets``: the providers' presets of levels and the sources a level is read from;
- ``level_specs``: the levels read from the cluster or named by a preset, checked;
- ``sources``: each node's domains read from its labels, its DRA devices or the files that hold them;
- ``levels``: the site's levels and placement in every form, node labels, Topology levels and the
  tree of domains (the entry: it hands the other forms to ``level_specs`` and ``sources``).

Teams, jobs, the gang search, the report and the validation read it; it imports only
``controller.inputs`` and ``dra``.
"""
