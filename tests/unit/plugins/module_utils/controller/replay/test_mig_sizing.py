# SPDX-License-Identifier: Apache-2.0
"""The ``mig`` policy's sizing: the smallest profile holding the pod's memory and its GPU share, NVML's sizes where
the probe read them, headroom on measured peaks only, and what decided each pod."""

from __future__ import annotations

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.mig import model as mig_model
from ansible_collections.aligned.dra.plugins.module_utils.controller.replay import ReplayError, mig_sizing
from ansible_collections.aligned.dra.tests.support.sites.replay_mig import (
    A100_40,
    DYNAMIC,
    GIB,
    H100,
    MIB,
    nvml_topology,
    replay_mig,
    topology,
)


def _placed(run: dict, order: str = "first_fit") -> dict[str, tuple]:
    return {p["pod"]: (p["profile"], p["decided_by"]) for p in run["mig"]["orders"][order]["placements"]}


def test_a_half_gpu_pod_with_little_memory_takes_half_the_compute_not_a_1g(tmp_path):
    rows = [
        "half,0,,0.5,4Gi",  # 4 GiB: a 1g.10gb by memory, but 3.5 of 7 compute slices: 4g.40gb
        "big,1,,0.1,30Gi",  # 30 GiB: 3g.40gb; 0.7 slice alone would be a 1g
        "even,2,,0.14,10Gi",  # 0.98 slice and 10 GiB: 1g.10gb either way
        "quarter,3,,0.25,15Gi",  # 15 GiB alone: 1g.20gb; 2 slices alone: 2g.20gb (same memory): compute decides
        "openb,4,,0.25,",  # no memory known: its share of the compute
        "pair,5,,2,",  # whole GPUs: nothing rounded
    ]
    run = replay_mig(tmp_path, rows, {"n1": (H100, 6, 0)}, {"n1": DYNAMIC})
    assert _placed(run) == {
        "half": ("4g.40gb", "compute"),
        "big": ("3g.40gb", "memory"),
        "even": ("1g.10gb", "both"),
        "quarter": ("2g.20gb", "compute"),
        "openb": ("2g.20gb", "compute"),
        "pair": (None, "whole"),
    }
    first = run["mig"]["orders"]["first_fit"]
    # per pod, not per device: the pair of whole GPUs counts once
    assert first["decided_by"] == {"memory": 1, "compute": 3, "both": 1, "whole": 1}
    assert first["sized_by"] == {"compute_share": 1, "gpu_memory": 4, "whole": 1}
    assert run["first_unplaced"] is None


def test_the_profile_a_pod_needs_is_the_smallest_holding_both_not_the_larger_of_the_two():
    """On an A100 40GB (documented), 9 GiB and one slice: memory alone picks 1g.10gb, which holds the compute too;
    9 GiB and 2 slices: 2g.10gb, compute's pick (memory's is the 1g.10gb); 45 GiB: nothing (no GPU whole)."""
    state = mig_model.gpu_state({"kind": "gpu", "vendor_id": "0x10de", "device_id": A100_40})
    profiles = [p for p in state["profiles"] if "+" not in p["name"]]
    assert mig_sizing.target(profiles, False, 40 * GIB, ("gpu_memory", 9 * GIB, 100), 0.0) == ("1g.10gb", "memory")
    assert mig_sizing.target(profiles, False, 40 * GIB, ("gpu_memory", 9 * GIB, 250), 0.0) == ("2g.10gb", "compute")
    assert mig_sizing.target(profiles, False, 40 * GIB, ("gpu_memory", 45 * GIB, 100), 0.0) == (False, "memory")
    # a GPU published whole (81 GiB here, above its largest profile) takes a share no profile holds, where its
    # memory fits the GPU's; a measured peak keeps the headroom free of the GPU whole too
    h100 = mig_model.gpu_state({"kind": "gpu", "vendor_id": "0x10de", "device_id": H100})["profiles"]
    over = int(80.5 * GIB)
    assert mig_sizing.target(h100, True, 81 * GIB, ("gpu_memory", over, 500), 0.0) == (None, "memory")
    assert mig_sizing.target(h100, False, 81 * GIB, ("gpu_memory", over, 500), 0.0) == (False, "memory")
    assert mig_sizing.target(h100, True, 81 * GIB, ("measured", over, 500), 0.05) == (False, "memory")
    assert mig_sizing.target(h100, True, 81 * GIB, ("measured", 76 * GIB, 500), 0.05) == ("7g.80gb", "memory")


def test_nvmls_sizes_decide_where_the_probe_read_them_and_each_figure_says_its_source(tmp_path):
    """An A100 40GB's 1g.5gb is 4864 MiB by NVML, not 5 GiB: a pod asking 4900 MiB fits the documented 1g.5gb but
    needs the next profile NVML offers on the probed GPU (the fake's driver lists no 1g.10gb: a 2g.10gb, 9856 MiB)."""
    rows = ["a,0,,0.1,4900Mi"]
    probed = replay_mig(tmp_path, rows, {"n1": nvml_topology(1)}, {"n1": DYNAMIC})
    (tmp_path / "doc").mkdir()
    documented = replay_mig(tmp_path / "doc", rows, {"n1": (A100_40, 1, 0)}, {"n1": DYNAMIC})
    (nvml_place,) = probed["mig"]["orders"]["first_fit"]["placements"]
    (doc_place,) = documented["mig"]["orders"]["first_fit"]["placements"]
    assert (nvml_place["profile"], nvml_place["memory_bytes"], nvml_place["memory_source"]) == (
        "2g.10gb",
        9856 * MIB,
        "nvml",
    )
    assert (doc_place["profile"], doc_place["memory_bytes"], doc_place["memory_source"]) == (
        "1g.5gb",
        5 * GIB,
        "documented",
    )
    assert probed["mig"]["sources"] == {"nvml": 1} and documented["mig"]["sources"] == {"documented": 1}
    (sizes,) = probed["mig"]["profile_sizes"]
    assert sizes["source"] == "nvml" and sizes["gpus"] == 1 and sizes["model"].endswith("A100-SXM4-40GB")
    assert sizes["profiles"]["1g.5gb"] == {"memory_bytes": 4864 * MIB, "memory_slices": 1, "compute_slices": 1}
    assert "1g.5gb+me" not in sizes["profiles"] and "gpu_whole_memory_bytes" not in sizes  # Ampere: no GPU whole
    (doc_sizes,) = documented["mig"]["profile_sizes"]
    assert doc_sizes["source"] == "documented" and doc_sizes["profiles"]["1g.5gb"]["memory_bytes"] == 5 * GIB


def test_headroom_applies_to_a_measured_peak_and_not_to_the_traces_request(tmp_path):
    """10 GiB on an H100's 1g.10gb (10 GiB documented): a request of 9.6 GiB fits as it is; a measured peak of
    9.6 GiB leaves less than 5 % free, so it takes a 1g.20gb; with mig_headroom 0 it fits the 1g.10gb."""
    (tmp_path / "usage.csv").write_text("pod,timestamp,memory_used_bytes\nmeasured,0,10307921510\n")
    rows = ["asked,0,10,0.1,9830Mi", "measured,0,10,0.1,5Gi"]
    common = {"mode": "timeline", "usage": str(tmp_path / "usage.csv"), "gpu_memory": "80Gi"}
    run = replay_mig(tmp_path, rows, {"n1": (H100, 1, 0)}, {"n1": DYNAMIC}, **common)
    assert _placed(run) == {"asked": ("1g.10gb", "both"), "measured": ("1g.20gb", "memory")}
    assert (
        run["mig"]["sizing"]["headroom"] == 0.05
        and "measured peaks only" in run["mig"]["sizing"]["rule"] + (run["mig"]["sizing"]["headroom_applies_to"])
    )
    (tmp_path / "none").mkdir()
    (tmp_path / "none" / "usage.csv").write_text((tmp_path / "usage.csv").read_text())
    common["usage"] = str(tmp_path / "none" / "usage.csv")
    bare = replay_mig(tmp_path / "none", rows, {"n1": (H100, 1, 0)}, {"n1": DYNAMIC}, mig_headroom=0, **common)
    assert _placed(bare) == {"asked": ("1g.10gb", "both"), "measured": ("1g.10gb", "both")}
    assert bare["mig"]["sizing"]["headroom"] == 0.0


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (1, "mig_headroom: 1 is out of range (a fraction of a profile's memory: at least 0, below 1)"),
        (-0.1, "mig_headroom: -0.1 is out of range"),
        ("lots", "mig_headroom: 'lots' is not a fraction"),
        (True, "mig_headroom: True is not a fraction"),
    ],
)
def test_a_headroom_outside_0_to_1_is_refused_naming_the_setting(tmp_path, value, message):
    with pytest.raises(ReplayError) as raised:
        replay_mig(tmp_path, ["a,0,,0.1,"], {"n1": (H100, 1, 0)}, {"n1": DYNAMIC}, mig_headroom=value)
    assert str(raised.value).startswith(message)
    assert mig_sizing.headroom_of("0.1") == 0.1 and mig_sizing.headroom_of(0) == 0.0


def test_the_amount_in_words_says_memory_and_compute():
    assert mig_sizing.amount_text(("gpu_memory", 4 * GIB, 500)) == (
        "4 GiB of memory (gpu_memory) and 500 milli of a GPU's compute"
    )
    assert mig_sizing.amount_text(("measured", 3 * GIB, 100)).startswith("3 GiB of memory (measured peak)")
    assert mig_sizing.amount_text(("compute_share", None, 250)) == "250 milli of a GPU's compute"
    assert mig_sizing.amount_text(("whole", None, 2)) == "2 whole GPU(s)"
    assert topology(H100, 1)["devices"][0]["device_id"] == H100
