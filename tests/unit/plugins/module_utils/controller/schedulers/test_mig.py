# SPDX-License-Identifier: Apache-2.0
"""The teams stage's view of a site's MIG (controller/schedulers/mig.py): the MIG classes found by their selectors
(renamed ones too), the hosts by mode, the capacity from the controller's MIG model (unknown, never 0, where
a host is unprobed), and the MIG devices the driver publishes per host."""

from __future__ import annotations

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import render as claims
from ansible_collections.aligned.dra.plugins.module_utils.controller.mig import model as mig_model
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers import mig as schedulers_mig
from ansible_collections.aligned.dra.tests.support.sites.mig_settings import DYNAMIC
from ansible_collections.aligned.dra.tests.support.sites.mig_settings import HALF as STATIC
from ansible_collections.aligned.dra.tests.support.sites.report_sites import topology_of


@pytest.fixture(scope="module")
def dgx():
    return topology_of("dgx-h100")


def test_mig_classes_are_found_by_their_selectors_the_class_of_every_mig_device_first(dgx):
    settings = {"classes": {"mig": "partitions.example.com"}}
    objects = claims.render(settings, "s", "1.36", mig={"h1": DYNAMIC}, topologies={"h1": dgx})["objects"]
    found = schedulers_mig.mig_classes(objects)
    assert next(iter(found)) == "partitions.example.com" and found["partitions.example.com"] is None
    assert found["mig-3g-40gb.aligned.dev"] == "3g.40gb" and found["mig-1g-10gb-me.aligned.dev"] == "1g.10gb+me"
    assert len(found) == 8 and "aligned-gpu" not in found
    assert schedulers_mig.pool_class(found) == "partitions.example.com"
    assert schedulers_mig.mig_classes(claims.render({}, "s", "1.36")["objects"]) == {}
    assert schedulers_mig.pool_class({}) is None


@pytest.mark.parametrize("mig", [None, {}, {"h1": {"mode": "off"}}, {"h1": None}])
def test_no_host_running_mig_is_no_mig(mig, dgx):
    assert schedulers_mig.site(mig, {"h1": dgx}) is None
    assert schedulers_mig.published_per_gpu({"h1": dgx}, mig) == {}


def test_the_capacity_is_the_models_with_the_hosts_by_mode(dgx):
    mig = {"d": DYNAMIC, "s": STATIC, "x": {"mode": "off"}}
    site = schedulers_mig.site(mig, {"d": dgx, "s": dgx, "x": dgx})
    assert site["hosts"] == {"static": ["s"], "dynamic": ["d"]} and site["unprobed"] == []
    expected = mig_model.site_capacity({"d": dgx, "s": dgx}, {"d": DYNAMIC, "s": STATIC})
    assert {k: site["capacity"][k] for k in expected} == expected
    # eight dynamic H100s (80Gi counters each) and eight static ones with two 3g.40gb each: 640Gi + 640Gi
    assert site["capacity"]["memory"] == "1280Gi" and site["capacity"]["gpus"] == 16
    assert site["capacity"]["bound"] is True and site["capacity"]["sources"] == {"documented": 16}
    assert schedulers_mig.published_per_gpu({"d": dgx, "s": dgx}, mig) == {
        "d": {"gpus": 8, "devices": 8 * 26},
        "s": {"gpus": 8, "devices": 16},
    }


def test_an_unprobed_host_makes_the_capacity_unknown_naming_it(dgx):
    site = schedulers_mig.site({"a": DYNAMIC, "b": DYNAMIC}, {"a": dgx})
    assert site["unprobed"] == ["b"]
    assert site["capacity"]["memory_bytes"] is None and site["capacity"]["gpus"] is None
    assert "no probed topology of b" in site["capacity"]["reason"]


def test_settings_the_model_cannot_read_are_refused_naming_the_variable(dgx):
    with pytest.raises(schedulers_mig.MigTeamsError, match="aligned_dra_mig"):
        schedulers_mig.site({"h1": {"mode": "static"}}, {"h1": dgx})  # static without a layout


def test_device_capacity_is_what_exists_at_once_not_every_placement_published(dgx):
    objects = claims.render({}, "s", "1.36", mig={"d": DYNAMIC, "s": STATIC}, topologies={"d": dgx, "s": dgx})
    classes = schedulers_mig.mig_classes(objects["objects"])
    both = dict(schedulers_mig.site({"d": DYNAMIC, "s": STATIC}, {"d": dgx, "s": dgx}), classes=classes)
    # dynamic H100s: 7 x 1g.10gb at most each (the driver publishes 25 MIG placements per GPU); static: 2 x 3g.40gb
    assert both["capacity"]["devices"] == {
        "all": 8 * 7 + 8 * 2,
        "by_profile": {
            "1g.10gb": 56,
            "1g.10gb+me": 8,
            "1g.20gb": 32,
            "2g.20gb": 24,
            "3g.40gb": 16 + 16,
            "4g.40gb": 8,
            "7g.80gb": 8,
        },
        "dynamic_gpus": 8,
    }
    pool = schedulers_mig.device_capacity(both, "mig.aligned.dev")
    assert pool["capacity"] == 72 and pool["bound"] is True and "exist at once" in pool["capacity_is"]
    assert schedulers_mig.device_capacity(both, "mig-3g-40gb.aligned.dev")["capacity"] == 32
    assert schedulers_mig.device_capacity(both, "aligned-gpu") is None
    static = dict(schedulers_mig.site({"s": STATIC}, {"s": dgx}), classes={"mig.aligned.dev": None})
    assert schedulers_mig.device_capacity(static, "mig.aligned.dev") == {
        "capacity": 16,
        "bound": False,
        "capacity_is": "the static layouts' instances",
    }
    unknown = dict(schedulers_mig.site({"x": DYNAMIC}, {}), classes={"mig.aligned.dev": None})
    assert schedulers_mig.device_capacity(unknown, "mig.aligned.dev")["capacity"] is None
