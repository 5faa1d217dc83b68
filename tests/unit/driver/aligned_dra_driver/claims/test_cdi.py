# SPDX-License-Identifier: Apache-2.0
"""CDI spec files: names (one set per driver name), atomic writes, stray clean-up and vendor look-ups."""

from __future__ import annotations

import json
import os

import pytest
from aligned_dra_driver.claims import cdi


def test_write_read_remove(tmp_path):
    spec = cdi.build_spec([{"name": "u-gpu-0", "containerEdits": {"env": ["A=1"]}}], env=["B=2"])
    path = cdi.write_spec(str(tmp_path), "u", spec)
    assert os.path.basename(path) == "aligned.dev-claim_u.json"
    assert json.loads(open(path).read()) == spec
    assert spec["cdiVersion"] == "0.5.0" and spec["kind"] == "aligned.dev/claim"
    assert cdi.read_spec(str(tmp_path), "u") == spec
    assert cdi.claim_specs(str(tmp_path)) == {"u": path}
    assert cdi.remove_spec(str(tmp_path), "u") is True
    assert cdi.remove_spec(str(tmp_path), "u") is False
    assert not list(tmp_path.iterdir())


def test_temporary_files_are_cleaned_and_others_kept(tmp_path):
    (tmp_path / ".aligned.dev-claim_x.json.tmp").write_text("{")
    (tmp_path / "nvidia.json").write_text("{}")
    assert cdi.remove_temporary(str(tmp_path)) == [str(tmp_path / ".aligned.dev-claim_x.json.tmp")]
    assert [p.name for p in tmp_path.iterdir()] == ["nvidia.json"]
    assert cdi.claim_specs(str(tmp_path / "missing")) == {}


def test_cdi_names():
    assert cdi.cdi_device_name("1-2", "gpu-0000-18-00-0") == "1-2-gpu-0000-18-00-0"
    assert cdi.qualified("n") == "aligned.dev/claim=n"
    with pytest.raises(ValueError):
        cdi.cdi_device_name("a b", "c")


def test_vendor_specs_are_reread_when_the_directory_changes(tmp_path):
    vendor = cdi.VendorSpecs([str(tmp_path), str(tmp_path / "absent")])
    assert vendor.lookup("GPU-abc") is None
    (tmp_path / "nvidia.json").write_text(
        json.dumps({"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu", "devices": [{"name": "GPU-ABC"}, {"name": "0"}]})
    )
    (tmp_path / "other.json").write_text(json.dumps({"kind": "example.com/net", "devices": [{"name": "GPU-abc"}]}))
    (tmp_path / "broken.json").write_text("{")
    os.utime(tmp_path, ns=(1, 2))  # a new mtime even within the same clock tick
    assert vendor.lookup(None, "GPU-abc") == "nvidia.com/gpu=GPU-ABC"


@pytest.mark.parametrize("mask", [0o022, 0o077])
def test_spec_mode_is_0644_whatever_the_umask(tmp_path, mask):
    """0600 under the unit's UMask=0077 and 0644 in the DaemonSet, before the mode was set explicitly."""
    previous = os.umask(mask)
    try:
        path = cdi.write_spec(str(tmp_path), "u", cdi.build_spec([]))
    finally:
        os.umask(previous)
    assert os.stat(path).st_mode & 0o7777 == cdi.SPEC_MODE == 0o644


GPU_DRIVER = "gpu.aligned.dev"
UID = "0f8e3c5a-0000-4000-8000-000000000001"


def test_the_default_driver_keeps_the_file_names_of_before_the_split(tmp_path):
    assert cdi.spec_prefix() == cdi.spec_prefix("dra.aligned.dev") == "aligned.dev-claim_"
    assert cdi.spec_path("/run/cdi", UID) == f"/run/cdi/aligned.dev-claim_{UID}.json"
    assert cdi.spec_path("/run/cdi", UID, GPU_DRIVER) == f"/run/cdi/aligned.dev-claim-gpu.aligned.dev_{UID}.json"
    # a spec written by a release before the split is the default driver's own
    (tmp_path / f"aligned.dev-claim_{UID}.json").write_text("{}")
    assert list(cdi.claim_specs(str(tmp_path))) == [UID] and cdi.claim_specs(str(tmp_path), GPU_DRIVER) == {}


@pytest.mark.parametrize("name", ["gpu_aligned.dev", "../gpu", "GPU.aligned.dev", "", "a/b"])
def test_a_driver_name_that_is_no_dns_subdomain_makes_no_file_name(name):
    with pytest.raises(ValueError, match="cannot be part of a CDI spec file name"):
        cdi.spec_path("/run/cdi", UID, name)


def one_device_spec(device: str) -> dict:
    return cdi.build_spec([{"name": f"{UID}-{device}", "containerEdits": {}}], env=[f"ALIGNED_DRA_CLAIM_UID={UID}"])


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (GPU_DRIVER, "dra.aligned.dev"),  # the split by kind
        (GPU_DRIVER, "gpu.aligned.dev2"),  # one name the start of the other
        ("a", "a.b"),
        ("x-y", "x"),
    ],
)
def test_two_drivers_in_one_cdi_directory_see_only_their_own_specs(tmp_path, first, second):
    directory = str(tmp_path)
    paths = {
        first: cdi.write_spec(directory, UID, one_device_spec("gpu-0000-18-00-0"), driver_name=first),
        second: cdi.write_spec(directory, UID, one_device_spec("nic-0000-19-00-0"), driver_name=second),
    }
    assert paths[first] != paths[second]
    for name, other in ((first, second), (second, first)):
        assert cdi.claim_specs(directory, name) == {UID: paths[name]}
        assert cdi.read_spec(directory, UID, name) != cdi.read_spec(directory, UID, other)
    # half-written files of both: each driver removes only its own
    half = {name: tmp_path / ("." + os.path.basename(path) + ".tmp") for name, path in paths.items()}
    for path in half.values():
        path.write_text("{")
    assert cdi.remove_temporary(directory, first) == [str(half[first])]
    assert cdi.remove_temporary(directory, second) == [str(half[second])]
    # unprepared by one driver, the claim's other spec stays
    assert cdi.remove_spec(directory, UID, driver_name=first) is True
    cdi.remove_spec_quietly(directory, UID, driver_name=first)
    assert [p.name for p in tmp_path.iterdir()] == [os.path.basename(paths[second])]


def test_the_specs_of_one_claim_by_two_drivers_define_distinct_cdi_names(tmp_path):
    gpu = one_device_spec("gpu-0000-18-00-0")
    nic = one_device_spec("nic-0000-19-00-0")
    assert cdi.spec_problem(gpu) is None and cdi.spec_problem(nic) is None
    assert {d["name"] for d in gpu["devices"]}.isdisjoint(d["name"] for d in nic["devices"])
    # the claim-wide env is the same entry in both: a runtime applying both sets it once, to one value
    assert gpu["containerEdits"] == nic["containerEdits"] == {"env": [f"ALIGNED_DRA_CLAIM_UID={UID}"]}


def test_vendor_specs_skip_the_claim_specs_of_every_driver_of_ours(tmp_path):
    vendor_like = {"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu", "devices": [{"name": "GPU-abc"}]}
    (tmp_path / f"aligned.dev-claim-{GPU_DRIVER}_{UID}.json").write_text(json.dumps(vendor_like))
    (tmp_path / f"aligned.dev-claim_{UID}.json").write_text(json.dumps(vendor_like))
    assert cdi.VendorSpecs([str(tmp_path)]).lookup("GPU-abc") is None
    (tmp_path / "nvidia.json").write_text(json.dumps(vendor_like))
    assert cdi.VendorSpecs([str(tmp_path)]).lookup("GPU-abc") == "nvidia.com/gpu=GPU-abc"
