# SPDX-License-Identifier: Apache-2.0
"""The fake API server daemon's options and the objects it starts with, in this process.

The daemon as a process (start, --address, stop) is tests/integration/support/fakes/apiserver/test_daemon.py's.
"""

from __future__ import annotations

import pytest

from ansible_collections.aligned.dra.tests.support.fakes.apiserver import daemon


def test_address_must_be_ipv4(tmp_path, capsys):
    with pytest.raises(SystemExit) as refused:
        daemon.main(["start", str(tmp_path), "--address", "gateway"])
    assert refused.value.code == 2
    assert "--address 'gateway' is not an IPv4 address" in capsys.readouterr().err
    assert not (tmp_path / "url").exists()


def test_daemon_workload_options(api):
    api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-b"}})
    daemon.create_workload(api, ["node-a", "node-b"], ["node-a/default/web-1"], ["kube-system/agent"])
    pods = {p["metadata"]["name"]: p for p in api.list("pods")}
    assert sorted(pods) == ["agent-node-a", "agent-node-b", "web-1"]
    assert pods["web-1"]["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet"
    assert pods["agent-node-b"]["spec"]["nodeName"] == "node-b"
    assert (
        pods["agent-node-b"]["metadata"]["ownerReferences"][0]["uid"]
        == api.get("daemonsets", "agent", "kube-system")["metadata"]["uid"]
    )
    with pytest.raises(SystemExit, match="NODE/NAMESPACE/NAME"):
        daemon.create_workload(api, [], ["web-1"], [])
