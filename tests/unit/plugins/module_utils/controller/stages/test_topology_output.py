# SPDX-License-Identifier: Apache-2.0
"""The ``topology_output`` stage, as the module and the action plugin run it: files by site, a loader for facts."""

from __future__ import annotations

import json

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.stages import StageError, topology_output
from ansible_collections.aligned.dra.plugins.module_utils.controller.topology import fact as topology_fact

NODES = {"n1": {"site": "lab", "topology": {"gpus": 1}}, "n2": {"site": "lab", "topology": {"gpus": 2}}}


def test_each_node_file_is_written_once_and_diff_names_the_files(tmp_path):
    params = {"output_dir": str(tmp_path), "nodes": NODES, "sites": ["lab", "empty"]}
    result = topology_output.run(params, check_mode=False, diff=True)
    files = [str(tmp_path / "lab" / "nodes" / f"{n}.json") for n in ("n1", "n2")]
    assert result["changed"] is True
    assert result["nodes"] == 2
    assert set(files) <= set(result["written"])
    assert str(tmp_path / "empty" / "nodes") + "/" in result["written"]
    assert result["diff"]["after"] == "".join(path + "\n" for path in result["written"])
    assert json.loads((tmp_path / "lab" / "nodes" / "n2.json").read_text()) == {"gpus": 2}
    again = topology_output.run(params, check_mode=False, diff=True)
    assert again == {"changed": False, "written": [], "nodes": 2}


def test_check_mode_writes_nothing(tmp_path):
    params = {"output_dir": str(tmp_path), "nodes": NODES, "sites": ["lab"]}
    result = topology_output.run(params, check_mode=True, diff=False)
    assert result["changed"] is True and "diff" not in result
    assert not (tmp_path / "lab").exists()


def test_the_loader_gives_each_files_content(tmp_path):
    seen = []

    def load(node, fact):
        seen.append(node)
        return dict(fact, node=node)

    params = {"output_dir": str(tmp_path), "nodes": NODES, "sites": []}
    topology_output.run(params, check_mode=False, diff=False, load=load)
    assert seen == ["n1", "n2"]
    assert json.loads((tmp_path / "lab" / "nodes" / "n1.json").read_text()) == {"gpus": 1, "node": "n1"}


def test_a_fact_the_loader_cannot_read_fails_the_stage_with_its_message(tmp_path):
    def load(node, fact):
        raise topology_fact.TopologyFactError(f"{node}: cannot read its topology")

    params = {"output_dir": str(tmp_path), "nodes": NODES, "sites": []}
    with pytest.raises(StageError, match="^n1: cannot read its topology$"):
        topology_output.run(params, check_mode=False, diff=False, load=load)


def test_a_bad_node_name_fails_before_anything_is_written(tmp_path):
    params = {"output_dir": str(tmp_path), "nodes": {"../x": NODES["n1"]}, "sites": ["lab"]}
    with pytest.raises(StageError, match="is not a usable file name"):
        topology_output.run(params, check_mode=False, diff=False)
    assert list(tmp_path.iterdir()) == []
