# SPDX-License-Identifier: Apache-2.0
"""The fake API server daemon as a process: started with --address, a second address that passes
connections through to the server, and stopped.

Its options and the objects it starts with, in-process, are tests/unit/support/fakes/apiserver/test_daemon.py's.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

DAEMON = Path(__file__).resolve().parents[4] / "support" / "fakes" / "apiserver" / "daemon.py"
# Any 127/8 address is on the loopback interface: a stand-in for a gateway address the nodes reach.
OTHER = "127.0.0.2"


def daemon(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(DAEMON), *args], capture_output=True, text=True, check=False)


def call(url: str, method: str = "GET", body: dict | None = None) -> tuple[int, dict]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@pytest.fixture
def served(tmp_path):
    started = daemon("start", str(tmp_path), "--node", "rails-a", "--address", OTHER)
    assert started.returncode == 0, started.stderr
    yield tmp_path
    assert daemon("stop", str(tmp_path)).returncode == 0


def test_address_is_what_url_and_kubeconfig_name_and_it_serves_the_one_store(served):
    url = (served / "url").read_text().strip()
    assert url.startswith(f"http://{OTHER}:")
    kubeconfig = yaml.safe_load((served / "kubeconfig").read_text())
    assert kubeconfig["clusters"][0]["cluster"]["server"] == url

    status, node = call(f"{url}/api/v1/nodes/rails-a")  # created by the server, read through the relay
    assert status == 200, node
    body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "rails-b"}}
    status, created = call(f"{url}/api/v1/nodes", "POST", body)
    assert status == 201, created
    status, listed = call(f"{url}/api/v1/nodes")
    assert sorted(item["metadata"]["name"] for item in listed["items"]) == ["rails-a", "rails-b"]
    # strictness comes through unchanged: the server's own refusal
    status, refused = call(f"{url}/api/v1/nodes", "POST", {**body, "metadata": {"name": "rails-c"}, "bogus": 1})
    assert status in (400, 422), refused
    assert "bogus" in refused["message"]


def test_stop_closes_the_address(served):
    url = (served / "url").read_text().strip()
    assert daemon("stop", str(served)).returncode == 0
    with pytest.raises(OSError):
        urllib.request.urlopen(f"{url}/version", timeout=5)
