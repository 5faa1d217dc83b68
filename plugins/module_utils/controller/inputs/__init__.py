# SPDX-License-Identifier: Apache-2.0
"""The bottom of the controller: the site inputs every stage reads.

- ``site``: which site (``aligned_dra_site``) and Kubernetes node
  (``aligned_dra_driver_node_name``) a host is, read in one place, a site's
  settings read once from its first host (``read_site_settings``), and the shape
  checks of the modules' free-form inputs (Kubernetes objects, topologies, the plan),
  which raise :class:`site.InputError` naming the option and the path inside it;
- ``settings_checks``: the checks the team settings and the schedulers' settings
  share (known keys, label maps, DeviceClass keys), each raising its caller's error.

It imports no other controller package.
"""
