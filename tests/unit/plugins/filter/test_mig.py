# SPDX-License-Identifier: Apache-2.0
"""The mig_settings filter: the hosts with MIG and their settings, a layout file read inline."""

from __future__ import annotations

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.aligned.dra.plugins.filter.mig import FilterModule, mig_settings

CONFIGS = {"half": [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}]}


def test_the_filter_is_registered():
    assert FilterModule().filters()["mig_settings"] is mig_settings


def test_only_hosts_with_a_mode_other_than_off_are_handed_on():
    hostvars = {
        "a": {"aligned_dra_mig": {"mode": "dynamic"}},
        "b": {"aligned_dra_mig": {"mode": "off"}},
        "c": {},
        "d": {"aligned_dra_mig": {"mode": "static", "layout": "half", "mig_configs": CONFIGS}},
    }
    assert mig_settings(hostvars, ["d", "c", "b", "a"]) == {
        "a": {"mode": "dynamic"},
        "d": {"mode": "static", "layout": "half", "mig_configs": CONFIGS},
    }
    assert mig_settings({"c": {}}, ["c"]) == {}


def test_a_layout_file_is_read_from_the_base_directory_and_handed_on_inline(tmp_path):
    (tmp_path / "layouts.yaml").write_text(yaml.safe_dump({"version": "v1", "mig-configs": CONFIGS}))
    hostvars = {"a": {"aligned_dra_mig": {"mode": "static", "layout": "half", "mig_configs_file": "layouts.yaml"}}}
    assert mig_settings(hostvars, ["a"], str(tmp_path)) == {
        "a": {"mode": "static", "layout": "half", "mig_configs": CONFIGS}
    }


def test_bad_input_names_the_host_or_the_file(tmp_path):
    with pytest.raises(AnsibleFilterError, match="'x' is not an inventory host"):
        mig_settings({}, ["x"])
    with pytest.raises(AnsibleFilterError, match="hosts must be a list"):
        mig_settings({}, "a")
    hostvars = {"a": {"aligned_dra_mig": {"mode": "static", "layout": "half", "mig_configs_file": "gone.yaml"}}}
    with pytest.raises(AnsibleFilterError, match=r"a: aligned_dra_mig: mig_configs_file gone.yaml: cannot be read"):
        mig_settings(hostvars, ["a"], str(tmp_path))
