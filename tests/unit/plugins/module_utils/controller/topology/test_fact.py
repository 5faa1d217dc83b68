# SPDX-License-Identifier: Apache-2.0
"""The probe's slim fact and the whole topology kept behind it."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.topology import fact as topology_fact
from ansible_collections.aligned.dra.tests.support.sites.plan_inputs import PAIR_NODE_TOPOLOGY as TOPOLOGY


def whole() -> dict:
    return dict(TOPOLOGY, schema_version=1, hostname="n1", counts={"gpu": 2, "nic": 1, "vfs": 0}, warnings=["w"])


def test_the_fact_holds_counts_warnings_and_the_file_only(tmp_path):
    path = str(tmp_path / "store" / "n1.json")
    fact = topology_fact.fact_of(whole(), path)
    assert sorted(fact) == sorted(topology_fact.FACT_KEYS)
    assert fact == {"schema_version": 1, "hostname": "n1", "counts": {"gpu": 2, "nic": 1, "vfs": 0},
                    "warnings": ["w"], "file": path}  # fmt: skip
    assert not topology_fact.is_whole(fact) and topology_fact.is_whole(whole())


def test_kept_topology_reads_back_whole_and_leaves_no_temporary_file(tmp_path):
    store = tmp_path / "store"
    path = str(store / "n1.json")
    topology_fact.keep(path, whole())
    assert topology_fact.full_topology("n1", topology_fact.fact_of(whole(), path)) == whole()
    assert os.listdir(store) == ["n1.json"]
    # compact: a large site's store costs its JSON, not indented JSON
    assert "\n" not in (store / "n1.json").read_text()


def test_a_store_that_cannot_be_written_names_the_file_and_leaves_nothing(tmp_path):
    (tmp_path / "store").write_text("a file where the directory should be")
    path = str(tmp_path / "store" / "n1.json")
    with pytest.raises(topology_fact.TopologyFactError, match=r"cannot keep the topology in .*/store/n1.json"):
        topology_fact.keep(path, whole())
    assert sorted(os.listdir(tmp_path)) == ["store"]


def test_a_whole_topology_or_no_fact_is_used_as_it_is():
    assert topology_fact.full_topology("n1", whole()) == whole()
    assert topology_fact.full_topology("n1", None) is None


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, r"n1: the topology of aligned_dra_topology.file cannot be read \(.*: No such file or directory\); "
               r"the file lives as long as the run that probed the node"),
        ("{half", r"n1: the topology of aligned_dra_topology.file cannot be read"),
        ("[1, 2]", r"n1: .* holds no topology"),
    ],
)  # fmt: skip
def test_a_file_that_is_gone_or_damaged_names_the_node_and_the_file(tmp_path, content, message):
    path = tmp_path / "n1.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(topology_fact.TopologyFactError, match=message):
        topology_fact.full_topology("n1", {"counts": {}, "file": str(path)})


@pytest.mark.parametrize("fact", [{"counts": {}}, {"file": ""}, {"file": 3}, "a string", ["a", "list"]])
def test_a_fact_that_is_neither_is_refused_by_name(fact):
    with pytest.raises(topology_fact.TopologyFactError, match="n1: aligned_dra_topology is neither"):
        topology_fact.full_topology("n1", fact)


def test_the_store_json_is_what_the_node_file_holds(tmp_path):
    path = tmp_path / "n1.json"
    topology_fact.keep(str(path), whole())
    assert json.loads(path.read_text()) == whole()
