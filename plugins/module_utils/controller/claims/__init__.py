# SPDX-License-Identifier: Apache-2.0
"""DeviceClasses and ResourceClaimTemplates for a site, rendered and checked per Kubernetes minor.

- ``render``: the DeviceClasses and ResourceClaimTemplates per minor;
- ``burst``: the burstable fractional template beside the fractional one (a request, a limit above
  it); its ``render`` is ``render.render`` plus that template, what the ``claims_render`` stage calls;
- ``tolerations``: the site's device taint tolerations, checked and put in every template's requests;
- ``rails``: the rail templates for the workers of a multi-node job on a rail-optimised fabric;
- ``mig``: MIG partitions in the catalogue: ``mig.aligned.dev`` and a DeviceClass per profile, a template per
  profile the site's MIG GPUs offer, MIG + NIC on the parent's ``pcieRoot``, ``firstAvailable`` lists, and the
  ``DRAPartitionableDevices`` warnings.
"""
