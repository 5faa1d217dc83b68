# SPDX-License-Identifier: Apache-2.0
"""The validation stage's rails check: each host's ``aligned_dra_rails`` against its probe.

The rule is read by :func:`controller.fabric.rails.host_rails`, the code
``summary.json`` and the plan use (and the driver runs on the node), so the
validation refuses exactly what the driver would publish wrong: a malformed
rule, a node missing one of the ``count`` rails, a rail given to two NICs of
a node, a rule that matches none of the node's RDMA NICs, a map entry that
is not an RDMA NIC of the node. Each problem names the NIC and the rule; the
validation adds the host.

Where the rails cannot be known, the rule is checked for its shape only and
nothing else is refused (``host_rails``' one policy): a host this run did
not probe, and a ``subnet`` rule whose probe read no addresses (a captured
tree), whose NICs are on an unknown rail, not on none.

Controller-side; no Ansible imports.
"""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.fabric import rails as fabric_rails
from ansible_collections.aligned.dra.plugins.module_utils.controller.inputs.site import kubernetes_node_name
from ansible_collections.aligned.dra.plugins.module_utils.controller.topology import fact as topology_fact

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

VARIABLE = "aligned_dra_rails"
TOPOLOGY_FACT = "aligned_dra_topology"


def rail_problems(host: str, settings: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``[(variable, reason)]``: what is wrong with ``host``'s rails; empty without a rule.

    ``settings`` are the host's variables: ``aligned_dra_rails``, the probe's
    ``aligned_dra_topology`` fact when this run probed the host, and the
    Kubernetes node name (:func:`kubernetes_node_name`) a per-node map is keyed by.
    """
    rule = settings.get(VARIABLE)
    if rule is None or rule == {}:
        return []
    try:
        topology = topology_fact.full_topology(host, settings.get(TOPOLOGY_FACT))
    except topology_fact.TopologyFactError as exc:
        return [(TOPOLOGY_FACT, str(exc))]
    entry = fabric_rails.host_rails(host, rule, kubernetes_node_name(host, settings), topology or None)
    return [(VARIABLE, problem) for problem in (entry or {}).get("problems") or []]
