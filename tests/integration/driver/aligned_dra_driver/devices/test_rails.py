# SPDX-License-Identifier: Apache-2.0
"""``--rails-file``: the real driver process publishes each NIC's and VF's rail, follows the file, and keeps the
rails while a NIC is in a pod (scans and a restart)."""

from __future__ import annotations

import shutil
from typing import Any

import pytest

from ansible_collections.aligned.dra.tests.support.fakes.apiserver import FakeApiServer
from ansible_collections.aligned.dra.tests.support.harnesses import driver as h
from ansible_collections.aligned.dra.tests.support.harnesses import driver_rails_node as r

RAIL = "dra.aligned.dev/rail"
NETDEV = "dra.aligned.dev/netdev"
BEFORE = {r.DEV_A: 0, r.DEV_B: 1, r.DEV_VF: 0}


@pytest.fixture
def build_node():
    return r.build


def pool(api: FakeApiServer) -> tuple[int, dict[str, dict[str, Any]]]:
    """The newest generation of the node's pool and its devices by name."""
    items = api.list("resourceslices")
    if not items:
        return 0, {}
    generation = max(item["spec"]["pool"]["generation"] for item in items)
    devices = {
        d["name"]: d
        for item in items
        if item["spec"]["pool"]["generation"] == generation
        for d in item["spec"]["devices"]
    }
    return generation, devices


def rails_of(devices: dict[str, dict[str, Any]]) -> dict[str, int | None]:
    return {n: (d["attributes"].get(RAIL) or {}).get("int") for n, d in devices.items() if n != h.GPU}


def wait_rails(api: FakeApiServer, wanted: dict[str, int | None], what: str) -> int:
    """Until the published NICs and VFs have exactly these rails; the pool's generation then."""

    def generation_when_published() -> int:
        generation, devices = pool(api)
        return generation if rails_of(devices) == wanted else 0

    return h.wait_until(generation_when_published, what=what)


def start(node: h.NodeTree, api: FakeApiServer, rails_file, port: int | None = None) -> h.DriverProcess:
    extra = ["--rails-file", str(rails_file)]
    if port:
        extra += ["--metrics-address", f"127.0.0.1:{port}"]
    return h.DriverProcess(node, api, extra=extra).start()


def test_the_slice_carries_the_rails_and_follows_the_file(node, api):
    path = node.root / "rails.json"
    r.write_rails(path, {"by": "pci_order"})
    process = start(node, api, path)
    try:
        first = wait_rails(api, BEFORE, "rails on NICs and their VF")
        r.write_rails(path, {"by": "map", "map": {r.NIC_A: 5, r.NIC_B: 4}})
        assert wait_rails(api, {r.DEV_A: 5, r.DEV_B: 4, r.DEV_VF: 5}, "the new rails") == first + 1
        r.write_rails(path, None)  # the node leaves the file: no rail, as without the option
        wait_rails(api, {r.DEV_A: None, r.DEV_B: None, r.DEV_VF: None}, "no rail")
        assert api.rejections == []
    finally:
        process.stop()


def test_a_missing_file_is_no_error_and_is_read_once_it_is_there(node, api):
    port = h.free_port()
    path = node.root / "site" / "rails.json"
    process = start(node, api, path, port)
    try:
        wait_rails(api, {r.DEV_A: None, r.DEV_B: None, r.DEV_VF: None}, "devices without rails")
        text = h.http_get(f"http://127.0.0.1:{port}/metrics")[1]
        assert h.metric_value(text, "aligned_dra_rails_file_error") == 1
        path.parent.mkdir()
        r.write_rails(path, {"by": "netdev_name", "pattern": r"^aldnic(\d+)$", "count": 3})
        wait_rails(api, BEFORE, "the rails once the file is there")
        text = h.http_get(f"http://127.0.0.1:{port}/metrics")[1]
        assert h.metric_value(text, "aligned_dra_rails_file_error") == 0
        assert h.metric_value(text, "aligned_dra_rail_problems") == 1  # rail 2 of count 3 is missing
        assert h.metric_value(text, "aligned_dra_rail_nics") == 2
        assert "rails 2 of count 3" in process.log.read_text()
    finally:
        process.stop()


def test_an_empty_rails_file_option_is_refused(node, api):
    process = h.DriverProcess(node, api, extra=["--rails-file="])
    with pytest.raises(RuntimeError, match="exited with 2") as caught:
        process.start()
    assert "--rails-file is empty" in str(caught.value)


# shared mode: the NIC stays an RDMA NIC without its interface (netdev_name would lose it); exclusive mode: a
# plain NIC (pci_order would renumber the other one)
@pytest.mark.parametrize(
    ("exclusive", "rule"),
    [(False, {"by": "netdev_name", "pattern": r"^aldnic(\d+)$"}), (True, {"by": "pci_order"})],
    ids=["rdma-shared", "rdma-exclusive"],
)
def test_a_nic_in_a_pod_changes_no_rail_on_rescan_or_restart(node, api, exclusive, rule):
    if exclusive:
        params = node.sys / "module" / "ib_core" / "parameters"
        params.mkdir(parents=True)
        (params / "netns_mode").write_text("0\n")
    path = node.root / "rails.json"
    r.write_rails(path, rule)
    port = h.free_port()
    process = start(node, api, path, port)
    try:
        wait_rails(api, BEFORE, "the rails")
        claim = api.create(h.claim_object("railnic", [{"request": "nic", "device": r.DEV_A}]))
        uid = claim["metadata"]["uid"]
        assert process.prepare([h.claim_ref(claim)]).claims[uid].error == ""
        # the container starts: the hook moves the NIC's interface (and RDMA device) into the pod
        r.to_pod(node, r.NIC_A, "aldnic0", "mlx5_0" if exclusive else None)
        if exclusive:  # the host sees a plain NIC now, which is not published
            in_pod = {r.DEV_B: 1, r.DEV_VF: 0}
            generation = wait_rails(api, in_pod, "the pool without the NIC in the pod")
        else:  # still an RDMA NIC, without its interface

            def generation_without_interface() -> int:
                published, devices = pool(api)
                return published if r.DEV_A in devices and NETDEV not in devices[r.DEV_A]["attributes"] else 0

            generation = h.wait_until(generation_without_interface, what="the NIC published without its interface")
            in_pod = BEFORE
        assert rails_of(pool(api)[1]) == in_pod
        process.stop()
        # a restart with the claim still prepared and the NIC still in the pod
        process = start(node, api, path, port)
        h.wait_until(lambda: h.http_get(f"http://127.0.0.1:{port}/readyz")[0] == 200, what="the first publication")
        assert pool(api) == (generation, pool(api)[1])  # nothing to write: the same devices, the same rails
        assert rails_of(pool(api)[1]) == in_pod
        # the pod is gone: the NIC is back on the host, with its rail
        r.back(node, r.NIC_A, "aldnic0", "mlx5_0" if exclusive else None)
        assert process.unprepare([h.claim_ref(claim)]).claims[uid].error == ""
        wait_rails(api, BEFORE, "the NIC back with its rail")
        assert api.rejections == []
    finally:
        process.stop()


def test_an_infiniband_nic_without_ipoib_in_a_pod_changes_no_rail(node, api, tmp_path):
    # nic A has an RDMA device and no interface on the host; exclusive mode moves the RDMA device into the pod
    params = node.sys / "module" / "ib_core" / "parameters"
    params.mkdir(parents=True)
    (params / "netns_mode").write_text("0\n")
    r.to_pod(node, r.NIC_A, "aldnic0")  # no interface, ever
    path = node.root / "rails.json"
    r.write_rails(path, {"by": "pci_order", "count": 2})
    port = h.free_port()
    process = start(node, api, path, port)
    function = (node.sys / "bus" / "pci" / "devices" / r.NIC_A).resolve()
    link = node.sys / "class" / "infiniband" / "mlx5_0"
    try:
        wait_rails(api, BEFORE, "the rails, nic A without an interface")
        claim = api.create(h.claim_object("railib", [{"request": "nic", "device": r.DEV_A}]))
        uid = claim["metadata"]["uid"]
        assert process.prepare([h.claim_ref(claim)]).claims[uid].error == ""
        shutil.move(str(function / "infiniband" / "mlx5_0"), str(tmp_path / "mlx5_0"))  # into the pod
        link.unlink()
        in_pod = {r.DEV_B: 1, r.DEV_VF: 0}  # nic B keeps rail 1: nic A is read as the driver recorded it
        generation = wait_rails(api, in_pod, "the pool without the NIC in the pod")
        process.stop()
        process = start(node, api, path, port)
        h.wait_until(lambda: h.http_get(f"http://127.0.0.1:{port}/readyz")[0] == 200, what="the first publication")
        assert pool(api) == (generation, pool(api)[1])
        assert rails_of(pool(api)[1]) == in_pod
        text = h.http_get(f"http://127.0.0.1:{port}/metrics")[1]
        assert h.metric_value(text, "aligned_dra_rail_problems") == 0
        shutil.move(str(tmp_path / "mlx5_0"), str(function / "infiniband" / "mlx5_0"))  # the pod is gone
        link.symlink_to(function / "infiniband" / "mlx5_0")
        assert process.unprepare([h.claim_ref(claim)]).claims[uid].error == ""
        wait_rails(api, BEFORE, "the NIC back with its rail")
        assert api.rejections == []
    finally:
        process.stop()
