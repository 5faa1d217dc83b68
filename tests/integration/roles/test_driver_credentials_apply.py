# SPDX-License-Identifier: Apache-2.0
"""The driver role's cluster objects (host mode) applied through real ansible-playbook runs to the strict fake API server.

``playbooks/driver.yml --tags apply`` with a controller kubeconfig: the site's
Namespace, one ServiceAccount and token Secret per node, the ClusterRole and
its binding, and the two ValidatingAdmissionPolicies with their bindings go through
kubernetes.core.k8s server-side apply to tests/support/fakes/apiserver/ (validated
against Kubernetes 1.35's schemas, unknown fields refused). The fake's token
controller fills the token Secrets, as the node's kubeconfig step waits for.
A second run changes nothing.
"""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path

import pytest
import yaml

from ansible_collections.aligned.dra.tests.support.fakes.apiserver import FakeApiServer
from ansible_collections.aligned.dra.tests.support.harnesses.playbook_runs import (
    PLAYBOOKS,
    recap,
    run_playbook,
    write_inventory,
)

NODES = ("gpu-a", "gpu-b")


@pytest.fixture
def api():
    with FakeApiServer(minor="1.35") as server:
        for name in NODES:
            server.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
        yield server


def run(tmp_path: Path, kubeconfig: Path, *args: str) -> subprocess.CompletedProcess:
    variables = {
        "aligned_dra_output_dir": str(tmp_path / "out"),
        "aligned_dra_site": "west",
        "aligned_dra_driver_mode": "host",
        "aligned_dra_driver_kubeconfig": str(kubeconfig),
    }
    inventory = write_inventory(tmp_path / "hosts.yml", NODES, variables)
    return run_playbook(inventory, PLAYBOOKS / "driver.yml", *args)


@pytest.mark.slow
def test_credentials_land_tokens_are_issued_and_a_second_run_changes_nothing(api, tmp_path):
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    first = run(tmp_path, kubeconfig, "--tags", "render,apply")
    assert first.returncode == 0, first.stdout + first.stderr
    assert api.rejections == []
    written = list(yaml.safe_load_all((tmp_path / "out" / "west" / "driver" / "host.yaml").read_text()))
    kinds = sorted(o["kind"] for o in written if o)
    assert kinds == sorted(
        ["Namespace", "ServiceAccount", "ServiceAccount", "Secret", "Secret", "ClusterRole", "ClusterRoleBinding",
         "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicy",
         "ValidatingAdmissionPolicyBinding", "ValidatingAdmissionPolicyBinding"]
    )  # fmt: skip
    assert api.get("namespaces", "aligned-dra")["status"] == {"phase": "Active"}
    accounts = {a["metadata"]["name"]: a for a in api.list("serviceaccounts", "aligned-dra")}
    assert len(accounts) == len(NODES)
    secrets = api.list("secrets", "aligned-dra")
    assert len(secrets) == len(NODES)
    for secret in secrets:
        account = secret["metadata"]["annotations"]["kubernetes.io/service-account.name"]
        assert account in accounts
        assert (
            secret["metadata"]["annotations"]["kubernetes.io/service-account.uid"]
            == accounts[account]["metadata"]["uid"]
        )
        assert base64.b64decode(secret["data"]["token"]).startswith(f"fake-token.aligned-dra.{account}.".encode())
    (binding,) = api.list("clusterrolebindings")
    assert binding["roleRef"]["name"] == api.list("clusterroles")[0]["metadata"]["name"]
    assert {s["name"] for s in binding["subjects"]} == set(accounts)
    policies = {p["metadata"]["name"] for p in api.list("validatingadmissionpolicies")}
    bound = {b["spec"]["policyName"] for b in api.list("validatingadmissionpolicybindings")}
    assert len(policies) == 2 and bound == policies
    second = run(tmp_path, kubeconfig, "--tags", "apply")
    assert second.returncode == 0, second.stdout + second.stderr
    assert recap(second.stdout) == {"changed": 0, "failed": 0}
    assert len(api.list("secrets", "aligned-dra")) == len(NODES)
