# SPDX-License-Identifier: Apache-2.0
"""Kubernetes labels: the syntax of label names and values, and the labels the collection sets.

Team settings, the placement levels, the node labels and the rendered objects
check labels with :func:`is_label_name`, :func:`is_label_value` and
:func:`label_value_problem`; every object the collection renders carries
:data:`MANAGED` and its site's :data:`SITE_LABEL`. They live here, below the
controller's packages, so that the teams and the placement read one
definition without importing each other.

The code runs on nodes (Python >= 3.9) and imports nothing from Ansible.
"""

from __future__ import annotations

import re

from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra

# The collection's site label: on every object it renders, and on every node of a site with placement
# levels (the label the site's default ResourceFlavor selects once it has a topology).
SITE_LABEL = "aligned.dev/site"
MANAGED = {"app.kubernetes.io/managed-by": "aligned.dra"}
# the team and tier of a namespace (and of the objects rendered for a team)
TEAM_LABEL = "aligned.dev/team"
TIER_LABEL = "aligned.dev/tier"
# the ResourceClaimTemplate a claim was made from: the templates put it on the claims Kubernetes makes of them
TEMPLATE_LABEL = "aligned.dev/template"

_LABEL_NAME_RE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


def is_label_name(value: object) -> bool:
    """A Kubernetes qualified name (label key, resource name): ``[prefix/]name``."""
    if not isinstance(value, str):
        return False
    prefix, sep, name = value.rpartition("/")
    if sep and not dra.is_dns_subdomain(prefix):
        return False
    return bool(_LABEL_NAME_RE.match(name))


def is_label_value(value: object) -> bool:
    return isinstance(value, str) and (value == "" or bool(_LABEL_NAME_RE.match(value)))


def label_value_problem(value: object) -> str | None:
    """Why ``value`` cannot be a (non-empty) label value, or None."""
    if isinstance(value, bool) or not isinstance(value, str):
        return f"{value!r} is not a string (quote numbers: label values are strings)"
    if not value:
        return "must not be empty"
    if not is_label_value(value):
        return (
            f"{value!r} is not a valid label value (at most 63 letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit)"
        )
    return None
