# SPDX-License-Identifier: Apache-2.0
"""The team model of a site, engine-neutral: the settings read and checked (:mod:`settings`) and the
namespaces, device quotas, priority tiers, admin access and template copies (:mod:`render`).

The schedulers' objects for the teams are ``controller/schedulers/``'s; the site's teams with their
engine's objects are rendered by the ``teams_render`` stage.
"""
