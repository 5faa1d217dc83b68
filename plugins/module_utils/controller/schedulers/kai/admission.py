# SPDX-License-Identifier: Apache-2.0
"""Who may use a KAI queue, and that device pods go through KAI: a site's ValidatingAdmissionPolicies.

KAI reads a workload's queue from the label ``kai.scheduler/queue`` on the
pod or its top owner as given and checks no right to use a queue; and the
queues cap only the pods KAI schedules (a GPU class has no ResourceQuota on a
``kai`` site). In the namespaces of the site's teams (namespace labels
``aligned.dev/site`` and ``aligned.dev/team``) three policies, each with a
``Deny`` binding:

- ``aligned-<site>-kai-queues``: a Pod, Job, JobSet or PodGroup that names a
  queue in the label names its namespace's team's;
- ``aligned-<site>-kai-podgroups``: a PodGroup's ``spec.queue`` is the team's
  or KAI's default queue (which KAI's pod grouper gives a workload that names
  none); one policy per resource keeps each expression typed on its object;
- ``aligned-<site>-kai-scheduler``: a pod that claims devices
  (``spec.resourceClaims``) names KAI's scheduler, so that no device pod runs
  beside its team's queue uncapped. Namespaces allowed admin access
  (``resource.kubernetes.io/admin-access``) are left out: their monitoring
  agents are DaemonSets that the default scheduler places.

An update that keeps the queue an object already had is let through, so an
object made before the policy stays changeable and deletable.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kai import api as kai_api
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kai.api import (
    POLICY_RESOURCES,
    QUEUE_LABEL,
)
from ansible_collections.aligned.dra.plugins.module_utils.dra import labels as dra_labels

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

TEAM_LABEL = dra_labels.TEAM_LABEL
# the namespace label DRA requires of namespaces whose claims ask for admin access
ADMIN_ACCESS_LABEL = "resource.kubernetes.io/admin-access"
_TEAM = {"name": "team", "expression": f"namespaceObject.metadata.labels['{TEAM_LABEL}']"}
_OWNER = "'namespace ' + namespaceObject.metadata.name + ' belongs to team ' + variables.team"


def _labels(site: str) -> dict[str, str]:
    return dict(dra_labels.MANAGED, **{dra_labels.SITE_LABEL: site})


def _label_of(obj: str) -> str:
    """CEL: the queue label of ``obj`` (``object`` or ``oldObject``), '' when it has none."""
    return (
        f"has({obj}.metadata.labels) && '{QUEUE_LABEL}' in {obj}.metadata.labels"
        f" ? {obj}.metadata.labels['{QUEUE_LABEL}'] : ''"
    )


def _spec_queue(obj: str) -> str:
    """CEL: a PodGroup's ``spec.queue`` (``object`` or ``oldObject``), '' when it has none."""
    return f"has({obj}.spec.queue) ? {obj}.spec.queue : ''"


def _policy(
    name: str, site: str, resources: list[tuple[str, str, str]], operations: list[str], spec: dict[str, Any]
) -> list[dict[str, Any]]:
    """A policy over ``resources`` in the site's team namespaces, and its Deny binding."""
    selector = {
        "matchExpressions": [
            {"key": dra_labels.SITE_LABEL, "operator": "In", "values": [site]},
            {"key": TEAM_LABEL, "operator": "Exists"},
        ]
    }
    rules = [
        {"apiGroups": [group], "apiVersions": [version], "operations": operations, "resources": [plural]}
        for group, version, plural in resources
    ]
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name, "labels": _labels(site)},
        "spec": dict(
            {"failurePolicy": "Fail", "matchConstraints": {"resourceRules": rules, "namespaceSelector": selector}},
            **spec,
        ),
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name, "labels": _labels(site)},
        "spec": {"policyName": name, "validationActions": ["Deny"], "matchResources": {"namespaceSelector": selector}},
    }
    return [policy, binding]


def queue_label_policy(site: str) -> list[dict[str, Any]]:
    """``aligned-<site>-kai-queues``: the queue label of pods and of the owners KAI reads it from."""
    old_label = f"request.operation == 'UPDATE' ? ({_label_of('oldObject')}) : ''"
    spec = {
        "variables": [
            _TEAM,
            {"name": "named", "expression": _label_of("object")},
            {"name": "oldNamed", "expression": old_label},
        ],
        "validations": [
            {
                "expression": "variables.named in ['', variables.team, variables.oldNamed]",
                "messageExpression": (
                    f"{_OWNER} + ', whose KAI queue is ' + variables.team + '; {QUEUE_LABEL} names queue '"
                    " + variables.named"
                ),
                "reason": "Forbidden",
            }
        ],
    }
    return _policy(f"aligned-{site}-kai-queues", site, list(POLICY_RESOURCES), ["CREATE", "UPDATE"], spec)


def pod_group_policy(site: str) -> list[dict[str, Any]]:
    """``aligned-<site>-kai-podgroups``: a PodGroup's queue (its top owner may be of any kind)."""
    groups = [r for r in POLICY_RESOURCES if r[2] == "podgroups"]
    old_queue = f"request.operation == 'UPDATE' ? ({_spec_queue('oldObject')}) : ''"
    spec = {
        "variables": [
            _TEAM,
            {"name": "queue", "expression": _spec_queue("object")},
            {"name": "oldQueue", "expression": old_queue},
        ],
        "validations": [
            {
                "expression": f"variables.queue in ['', variables.team, '{kai_api.DEFAULT_QUEUE}', variables.oldQueue]",
                "messageExpression": f"{_OWNER} + '; the PodGroup names queue ' + variables.queue",
                "reason": "Forbidden",
            }
        ],
    }
    return _policy(f"aligned-{site}-kai-podgroups", site, groups, ["CREATE", "UPDATE"], spec)


def scheduler_policy(site: str, scheduler_name: str) -> list[dict[str, Any]]:
    """``aligned-<site>-kai-scheduler``: a pod that claims devices names KAI's scheduler (pods: CREATE only,
    ``schedulerName`` cannot change)."""
    pods = [r for r in POLICY_RESOURCES if r[2] == "pods"]
    spec = {
        "matchConditions": [
            {
                "name": "claims-devices",
                "expression": "has(object.spec.resourceClaims) && size(object.spec.resourceClaims) > 0",
            },
            {
                "name": "no-admin-access",
                "expression": (
                    f"!(has(namespaceObject.metadata.labels) && '{ADMIN_ACCESS_LABEL}' in namespaceObject.metadata.labels"
                    f" && namespaceObject.metadata.labels['{ADMIN_ACCESS_LABEL}'] == 'true')"
                ),
            },
        ],
        "variables": [_TEAM],
        "validations": [
            {
                "expression": f"has(object.spec.schedulerName) && object.spec.schedulerName == '{scheduler_name}'",
                "messageExpression": (
                    f"{_OWNER} + ', whose devices KAI shares out: a pod that claims devices sets schedulerName "
                    f"{scheduler_name} (it names ' + (has(object.spec.schedulerName) ? object.spec.schedulerName"
                    " : 'none') + ')'"
                ),
                "reason": "Forbidden",
            }
        ],
    }
    return _policy(f"aligned-{site}-kai-scheduler", site, pods, ["CREATE"], spec)


def policies(site: str, scheduler_name: str) -> list[dict[str, Any]]:
    """The site's three policies, each followed by its binding."""
    return queue_label_policy(site) + pod_group_policy(site) + scheduler_policy(site, scheduler_name)
