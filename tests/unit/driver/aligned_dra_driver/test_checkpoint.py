# SPDX-License-Identifier: Apache-2.0
"""The checkpoint file: round trip, refusal to guess, the shape the sriov module reads."""

from __future__ import annotations

import json

import pytest
from aligned_dra_driver.checkpoint import Checkpoint, CheckpointError


def test_round_trip_and_shape(tmp_path):
    store = Checkpoint(str(tmp_path / "state"), "dra.aligned.dev", "node-a")
    assert store.load() == {}
    store.claims["u1"] = {"namespace": "ns", "name": "c", "devices": [{"pci_address": "0000:19:00.3"}]}
    store.save()
    data = json.loads((tmp_path / "state" / "checkpoint.json").read_text())
    assert data["claims"]["u1"]["devices"][0]["pci_address"] == "0000:19:00.3"  # docs/network.md
    assert data["version"] == 1 and data["node"] == "node-a"
    again = Checkpoint(str(tmp_path / "state"), "dra.aligned.dev", "node-a")
    assert again.load() == store.claims
    assert not list((tmp_path / "state").glob(".*tmp"))
    assert oct((tmp_path / "state" / "checkpoint.json").stat().st_mode & 0o777) == "0o600"


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("{half", "not valid JSON"),
        ('{"version": 1, "claims": []}', "mapping"),
        ('{"version": 7, "claims": {}}', "version"),
        ('{"version": 1, "driver": "other.example.com", "claims": {}}', "belongs to driver"),
        ('{"version": 1, "claims": {"u": {}}}', "devices"),
    ],
)
def test_unreadable_checkpoint_is_refused(tmp_path, content, needle):
    (tmp_path / "checkpoint.json").write_text(content)
    with pytest.raises(CheckpointError, match=needle):
        Checkpoint(str(tmp_path), "dra.aligned.dev", "node-a").load()
