# SPDX-License-Identifier: Apache-2.0
"""The claims_render stage with MIG: the MIG hosts' topologies inline, per file or from the nodes directory,
what is said where a host has none, the DRAPartitionableDevices warning, and inputs that name the option."""

from __future__ import annotations

import json

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.stages import StageError, claims_render
from ansible_collections.aligned.dra.tests.support.sites.mig_settings import DYNAMIC, HALF
from ansible_collections.aligned.dra.tests.support.sites.report_sites import topology_of


@pytest.fixture(scope="module")
def dgx():
    return topology_of("dgx-h100")


def params(**given) -> dict:
    """The module's parameters: its defaults, and ``given``."""
    spec = claims_render.MODULE_SPEC["argument_spec"]
    found = {name: option.get("default") for name, option in spec.items()}
    found.update(site="s", kubernetes_version="1.36")
    found.update(given)
    return found


def names(result: dict, prefix: str = "mig") -> list[str]:
    return [f["name"] for f in result["files"] if f["object"]["metadata"]["name"].startswith(prefix)]


def test_without_mig_nothing_is_read_and_nothing_changes(tmp_path):
    plain = claims_render.run(params())
    # a topology directory that does not exist is never read without MIG hosts
    assert claims_render.run(params(mig={"h1": {"mode": "off"}}, topology_dir=str(tmp_path / "none"))) == plain
    assert plain["warnings"] == [] and names(plain) == []


def test_inline_topologies_give_the_mig_objects_validated(dgx):
    result = claims_render.run(params(mig={"h1": HALF}, topologies={"h1": dgx, "other": None}))
    assert names(result) == [
        "deviceclass-mig.aligned.dev.yaml",
        "claimtemplate-mig-3g-40gb.yaml",
        "claimtemplate-mig-3g-40gb-nic.yaml",
    ]
    assert result["left_out"] == [] and result["warnings"] == []


def test_the_nodes_directory_and_topology_files_are_read_for_the_mig_hosts(tmp_path, dgx):
    (tmp_path / "h1.json").write_text(json.dumps(dgx))
    (tmp_path / "not-mig.json").write_text("not json: never read")
    from_dir = claims_render.run(params(mig={"h1": HALF, "h2": DYNAMIC}, topology_dir=str(tmp_path)))
    assert "claimtemplate-mig-3g-40gb.yaml" in names(from_dir)
    (note,) = from_dir["left_out"]
    assert note["name"] == "mig-*" and note["reason"].startswith("h2: no probed topology")
    from_files = claims_render.run(
        params(mig={"h1": HALF, "h2": DYNAMIC}, topology_files={"h2": str(tmp_path / "h1.json")})
    )
    # h2 is dynamic: every H100 profile; h1 has no file and is said
    assert "claimtemplate-mig-7g-80gb.yaml" in names(from_files)
    assert from_files["left_out"][0]["reason"].startswith("h1: no probed topology")


def test_dynamic_mig_on_1_35_is_a_warning_naming_the_gate(dgx):
    result = claims_render.run(params(kubernetes_version="1.35", mig={"h1": DYNAMIC}, topologies={"h1": dgx}))
    (warning,) = result["warnings"]
    assert warning.startswith("h1: aligned_dra_mig: mode dynamic publishes partitionable devices")
    assert "DRAPartitionableDevices" in warning


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ({"topology_files": {"h1": "{dir}/missing.json"}}, "topology_files.h1: cannot read {dir}/missing.json (h1)"),
        ({"topology_files": {"h1": "{dir}/bad.json"}}, "topology_files.h1: cannot read {dir}/bad.json (h1): "),
        ({"topology_files": {"h1": 5}}, "topology_files.h1: must be the path of the host's topology file (got 5)"),
        ({"topology_files": {"h1": "{dir}/list.json"}}, "topology_files.h1: must be a mapping (got list)"),
        ({"topologies": {"h1": {"devices": [{"kind": "gpu"}]}}}, "topologies.h1.devices[0].pci_address: must be"),
    ],
)
def test_bad_topologies_name_the_option(tmp_path, given, said):
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "list.json").write_text("[1, 2]")
    given = json.loads(json.dumps(given).replace("{dir}", str(tmp_path)))
    with pytest.raises(StageError) as raised:
        claims_render.run(params(mig={"h1": DYNAMIC}, **given))
    assert str(raised.value).startswith(said.replace("{dir}", str(tmp_path)))


def test_mig_settings_that_cannot_be_modelled_name_the_host(dgx):
    with pytest.raises(StageError, match=r"^h1: aligned_dra_mig cannot be read \(AttributeError"):
        claims_render.run(params(mig={"h1": {"mode": "dynamic", "gpus": 5}}, topologies={"h1": dgx}))
    with pytest.raises(StageError, match="^aligned_dra_claims.templates.mig.prioritized"):
        claims_render.run(params(settings={"templates": {"mig": {"prioritized": "3g.40gb"}}}))
