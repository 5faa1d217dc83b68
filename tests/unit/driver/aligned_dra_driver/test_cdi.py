# SPDX-License-Identifier: Apache-2.0
"""CDI spec files: names, atomic writes, stray clean-up and vendor look-ups."""

from __future__ import annotations

import json
import os

import pytest
from aligned_dra_driver import cdi


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
