# SPDX-License-Identifier: Apache-2.0
"""MIG advice from measured use, on the DGX H100 fixture's GPUs (documented H100 80GB: 1g.10gb, 1g.20gb,
2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb; 8 memory slices, 7 compute slices).

Claims are usage summary rows (``usage/summary.claim_summary``'s shape, the fields the advice reads),
measured over ten steps unless said otherwise."""

from __future__ import annotations

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.mig import checks
from ansible_collections.aligned.dra.plugins.module_utils.controller.mig import model as mig_model
from ansible_collections.aligned.dra.plugins.module_utils.controller.usage import mig_advice, summary
from ansible_collections.aligned.dra.plugins.module_utils.controller.validation import validate
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra
from ansible_collections.aligned.dra.plugins.module_utils.node.probe import gpu_mig
from ansible_collections.aligned.dra.tests.support.fakes.nvml import FakeNvml
from ansible_collections.aligned.dra.tests.support.sites import mig_usage_site as site

GIB = 1 << 30
NODE = "node-a"


@pytest.fixture(scope="module")
def topo():
    return site.topology()


@pytest.fixture(scope="module")
def names(topo):
    return site.gpu_names(topo)


@pytest.fixture(scope="module")
def gpus(topo):
    return mig_advice.site_gpus({NODE: topo})


def ratio(p95, points=10):
    return None if p95 is None else {"mean": p95, "p95": p95, "max": p95, "points": points}


def row(name, device, peak, team="team-a", kind="whole", sm_p95=None, unknown_hours=0.0, fraction=None, busy_p95=None):
    """One claim as the usage summary lists it; ``peak`` None: never measured. ``sm_p95``: NVML's per-process
    SM figure (a share of time); ``busy_p95``: GPM's share of SMs busy."""
    memory = None if peak is None else {"mean": peak, "p50": peak, "p95": peak, "max": peak, "points": 10}
    return {
        "namespace": "ns",
        "claim": name,
        "team": team,
        "template": summary.UNKNOWN_TEMPLATE,
        "node": NODE,
        "device": device,
        "gpu_uuid": f"GPU-{device}",
        "kind": kind,
        "gpu_fraction": fraction if fraction is not None else (1.0 if kind == "whole" else None),
        "hours": {"allocated": 1.0, "active": 1.0, "idle": 0.0, "unknown": unknown_hours},
        "memory_used_bytes": memory,
        "sm_ratio": ratio(sm_p95),
        "sms_busy_ratio": ratio(busy_p95),
    }


def advise(gpus, claims, headroom=0.0):
    """The advice without headroom unless said: the profiles' own sizes, as these tests' figures are."""
    return mig_advice.advise({"claims": claims}, gpus, headroom)


@pytest.mark.parametrize(
    ("peak", "sm_p95", "profile"),
    [
        (8 * GIB, None, "1g.10gb"),
        (10 * GIB, None, "1g.10gb"),  # exactly the profile's memory holds
        (15 * GIB, None, "1g.20gb"),  # one compute slice is enough: not the 2g
        (15 * GIB, 0.25, "2g.20gb"),  # 0.25 of 7 compute slices: 2
        (30 * GIB, None, "3g.40gb"),
        (30 * GIB, 0.5, "4g.40gb"),  # 3.5 compute slices: 4
        (79 * GIB, None, "7g.80gb"),
    ],
)
def test_the_smallest_profile_holds_the_peak_and_the_p95_sm(gpus, names, peak, sm_p95, profile):
    (group,) = advise(gpus, [row("c", names[0], peak, sm_p95=sm_p95)])["groups"]
    (claim,) = group["claims"]
    assert claim["profile"] == profile and not claim["needs_whole_gpu"]
    assert claim["compute_known"] is (sm_p95 is not None)
    assert claim["compute_source"] == (None if sm_p95 is None else "time share")
    assert claim["profile_memory_source"] == "documented nominal" and claim["peak_source"] == "measured"
    assert group["model"] == "H100-SXM5-80GB" and group["source"] == "documented" and group["device_id"] == "0x2330"


def test_a_peak_no_profile_holds_keeps_a_whole_gpu(gpus, names):
    (group,) = advise(gpus, [row("big", names[0], 85 * GIB)])["groups"]
    assert group["claims"][0]["needs_whole_gpu"] and group["claims"][0]["profile"] is None
    assert group["whole_gpus"] == 1 and group["gpus_needed"] == 1 and group["profiles"] == {}
    assert group["snippet"] is None and "whole" in group["reason"]


def test_seven_small_whole_gpu_claims_fit_one_gpu_against_seven_today(gpus, names):
    claims = [row(f"c{i}", names[i], 6 * GIB) for i in range(7)]
    (group,) = advise(gpus, claims)["groups"]
    assert group["profiles"] == {"1g.10gb": 7}
    assert group["gpus_today"] == {"gpu_equivalents": 7.0, "gpus": 7}
    assert (group["gpus_needed"], group["gpus_needed_lower_bound"]) == (1, 1)
    assert group["uniform_layout"] == {"mig-devices": {"1g.10gb": 7}, "gpus": 1}
    assert group["snippet"]["mig_configs"]["aligned-advice"][0]["mig-devices"] == {"1g.10gb": 7}
    assert group["snippet"]["gpus"] == {"device_ids": ["0x2330"]}


def test_gpus_needed_packs_the_profiles_and_the_layout_repeats(gpus, names):
    # three 3g.40gb and one 1g.10gb: two GPUs (4 + 4 slices, then 4 + 1), lower bound ceil(13 / 8) = 2
    claims = [row(f"c{i}", names[i], 30 * GIB) for i in range(3)] + [row("s", names[3], 5 * GIB)]
    (group,) = advise(gpus, claims)["groups"]
    assert group["profiles"] == {"1g.10gb": 1, "3g.40gb": 3}
    assert (group["gpus_needed"], group["gpus_needed_lower_bound"]) == (2, 2)
    assert sorted(map(sorted, (layout.items() for layout in group["layouts"]))) == [
        [("1g.10gb", 1), ("3g.40gb", 1)],
        [("3g.40gb", 2)],
    ]
    # one layout on every GPU: two 3g and a 1g take 9 slices of 8, so a 3g and a 1g each, on three GPUs
    assert group["uniform_layout"] == {"mig-devices": {"1g.10gb": 1, "3g.40gb": 1}, "gpus": 3}


def test_profiles_no_single_layout_holds_give_per_gpu_layouts_and_no_snippet(gpus, names):
    claims = [row("big", names[0], 70 * GIB), row("small", names[1], 5 * GIB)]
    (group,) = advise(gpus, claims)["groups"]
    assert group["profiles"] == {"1g.10gb": 1, "7g.80gb": 1}
    assert group["gpus_needed"] == 2 and group["uniform_layout"] is None and group["snippet"] is None
    assert group["layouts"] == [{"7g.80gb": 1}, {"1g.10gb": 1}] and "layouts" in group["reason"]


def test_the_snippet_passes_the_mig_roles_argument_spec_and_the_layout_checks(gpus, names, topo):
    claims = [row(f"c{i}", names[i], 30 * GIB) for i in range(3)] + [row("s", names[3], 15 * GIB, sm_p95=0.2)]
    (group,) = advise(gpus, claims)["groups"]
    snippet = group["snippet"]
    assert snippet["mode"] == "static" and snippet["layout"] == "aligned-advice"
    problems = validate.check_host_settings("gpu-01", {"aligned_dra_mig": snippet}, stages=("mig",))
    assert [p.reason for p in problems] == []
    assert checks.layout_problems(snippet, topo) == []
    # and a layout the GPU cannot hold would have been refused by the same checks
    too_many = dict(snippet["mig_configs"]["aligned-advice"][0], **{"mig-devices": {"3g.40gb": 3}})
    broken = dict(snippet, mig_configs={"aligned-advice": [too_many]})
    assert checks.layout_problems(broken, topo)


def test_shares_are_advised_and_today_counts_their_share_of_the_gpu(gpus, names):
    claims = [
        row("s1", names[0], 9 * GIB, kind="share", fraction=0.25),
        row("s2", names[0], 18 * GIB, kind="share", fraction=0.25),
    ]
    (group,) = advise(gpus, claims)["groups"]
    assert [c["profile"] for c in group["claims"]] == ["1g.10gb", "1g.20gb"]
    assert group["gpus_today"] == {"gpu_equivalents": 0.5, "gpus": 1}
    assert group["gpus_needed"] == 1


def test_claims_that_keep_a_whole_gpu_are_beside_the_layout_not_in_it(gpus, names):
    claims = [row("big", names[0], 85 * GIB), row("small", names[1], 5 * GIB), row("tiny", names[2], 4 * GIB)]
    (group,) = advise(gpus, claims)["groups"]
    assert group["whole_gpus"] == 1 and group["profiles"] == {"1g.10gb": 2}
    assert (group["gpus_needed"], group["gpus_needed_lower_bound"]) == (2, 2)
    assert group["uniform_layout"] == {"mig-devices": {"1g.10gb": 2}, "gpus": 1}


def test_per_team_groups(gpus, names):
    claims = [row("a", names[0], 5 * GIB, team="team-a"), row("b", names[1], 30 * GIB, team="team-b")]
    groups = advise(gpus, claims)["groups"]
    assert [(g["team"], g["profiles"]) for g in groups] == [("team-a", {"1g.10gb": 1}), ("team-b", {"3g.40gb": 1})]


def test_unknown_stays_unknown(gpus, names):
    claims = [
        row("never", names[0], None),
        row("elsewhere", names[0], 5 * GIB) | {"node": "node-z"},
        row("sized-not", names[0], 5 * GIB, kind="unknown"),
        row("partial", names[1], 5 * GIB, unknown_hours=0.5),
        row("mig", names[2] + "-mig-1g-10gb-0", 5 * GIB, kind="mig"),
    ]
    result = advise(gpus, claims)
    reasons = {c["claim"]: c["reason"] for c in result["not_advised"]}
    assert set(reasons) == {"never", "elsewhere", "sized-not"}
    assert "peak is unknown" in reasons["never"] and "model is unknown" in reasons["elsewhere"]
    assert "size is unknown" in reasons["sized-not"]
    (group,) = result["groups"]
    # measured at only some steps: it may have peaked in the others, so the profile is at least this
    assert [c["claim"] for c in group["claims"]] == ["partial"]
    assert group["claims"][0]["peak_lower_bound"] and group["peaks_lower_bound"]


def test_a_gpu_without_mig_and_a_site_without_any(names):
    claim = row("a", names[0], 5 * GIB)
    result = advise({(NODE, names[0]): None, (NODE, names[1]): {"profiles": []}}, [claim])
    assert result["not_advised"][0]["reason"] == "its GPU has no MIG"
    alone = advise({(NODE, names[0]): None}, [claim])
    assert alone["groups"] == [] and alone["not_advised"] == [] and "no GPU of the site" in alone["reason"]


def test_site_gpus_from_the_published_device_ids_without_a_probe(topo, names):
    found = mig_advice.site_gpus({}, site.slices(NODE, {"mode": "off"}, topo))
    state = found[(NODE, names[0])]
    assert state["source"] == "documented" and state["device_id"] == "0x2330" and state["memory_slices"] == 8


def test_a_peak_fits_a_profile_only_with_headroom(gpus, names):
    peak = int(9.6 * GIB)  # 96 % of the documented 1g.10gb's 10 GiB
    (bare,) = advise(gpus, [row("c", names[0], peak)], headroom=0.0)["groups"]
    assert bare["claims"][0]["profile"] == "1g.10gb"
    result = mig_advice.advise({"claims": [row("c", names[0], peak)]}, gpus)  # the default: 0.05
    assert result["headroom"] == 0.05
    (claim,) = result["groups"][0]["claims"]
    assert claim["profile"] == "1g.20gb" and claim["usable_memory_bytes"] == int(20 * GIB * 0.95)
    # exactly at the usable memory still fits
    (edge,) = advise(gpus, [row("c", names[0], int(10 * GIB * 0.95))], headroom=0.05)["groups"]
    assert edge["claims"][0]["profile"] == "1g.10gb" and edge["headroom"] == 0.05


@pytest.mark.parametrize("headroom", [-0.01, 1.0, 1.5])
def test_a_headroom_outside_zero_to_one_is_refused(gpus, names, headroom):
    with pytest.raises(ValueError, match="mig_headroom"):
        mig_advice.advise({"claims": [row("c", names[0], GIB)]}, gpus, headroom)


def test_nvmls_profile_sizes_from_the_probe_are_used_not_the_nominal_ones():
    """An A100 40GB as NVML reads it (the strict fake): its 1g.5gb holds 4864 MiB, not 5 GiB."""
    bus = "0000:07:00.0"
    nvml = FakeNvml()
    nvml.add_gpu(bus, model="A100-SXM4-40GB")
    nvml.enable_mig(bus)
    device = {"pci_address": bus, "kind": "gpu", "vendor_id": "0x10de", "device_id": "0x20b0"}
    gpu_mig.add_entries([device], lambda: nvml)  # the probe's own reading
    name = dra.device_name("gpu", bus)
    state = mig_model.gpu_state(device)
    gpus = {(NODE, name): dict(state, device_id="0x20b0")}
    mib = 1 << 20
    # 4700 MiB: within 5 GiB less 5 %, but above NVML's 4864 MiB less 5 % (4620.8 MiB)
    (group,) = advise(gpus, [row("c", name, 4700 * mib)], headroom=0.05)["groups"]
    (claim,) = group["claims"]
    assert group["source"] == "nvml" and group["figure_sources"]["profiles"] == "NVML from the probe"
    assert claim["profile"] == "2g.10gb" and claim["profile_memory_bytes"] == 9856 * mib
    assert claim["profile_memory_source"] == "nvml"
    nominal = mig_model.gpu_state({"pci_address": bus, "device_id": "0x20b0"})
    (documented,) = advise({(NODE, name): nominal}, [row("c", name, 4700 * mib)], headroom=0.05)["groups"]
    assert documented["claims"][0]["profile"] == "1g.5gb"
    assert documented["claims"][0]["profile_memory_source"] == "documented nominal"
    assert documented["figure_sources"]["profiles"] == "documented nominal sizes"


def test_gpms_share_of_sms_busy_is_preferred_over_the_share_of_time(gpus, names):
    # busy 10 % of the SMs, but some kernel ran 55 % of the time (3.85 of 7 compute slices): GPM's figure chooses
    claims = [row("gpm", names[0], 5 * GIB, sm_p95=0.55, busy_p95=0.1), row("time", names[1], 5 * GIB, sm_p95=0.55)]
    (group,) = advise(gpus, claims)["groups"]
    gpm, time = group["claims"]
    assert (gpm["compute_source"], gpm["compute_p95"], gpm["profile"]) == ("sms busy", 0.1, "1g.10gb")
    assert (time["compute_source"], time["compute_p95"], time["profile"]) == ("time share", 0.55, "4g.40gb")
    assert group["compute_sources"] == {"sms busy": 1, "time share": 1, "none": 0}
    # GPM measured at only some of the steps: the figure is preferred, and said not to cover the window
    partial = row("p", names[0], 5 * GIB, sm_p95=0.6) | {"sms_busy_ratio": ratio(0.1, points=4)}
    (one,) = advise(gpus, [partial])["groups"][0]["claims"]
    assert one["compute_source"] == "sms busy" and one["compute_known"] is False


def test_which_need_decided_each_profile_is_counted(gpus, names):
    claims = [
        row("memory", names[0], 15 * GIB, sm_p95=0.1),  # 1g.20gb: one compute slice would do
        row("compute", names[1], 5 * GIB, sm_p95=0.25),  # 2g.20gb: 5 GiB alone is a 1g.10gb
        row("both", names[2], 30 * GIB, busy_p95=0.4),  # 3g.40gb either way
        row("no-sm", names[3], 5 * GIB),  # memory alone
        row("whole", names[4], 85 * GIB),
    ]
    (group,) = advise(gpus, claims)["groups"]
    assert [c["decided_by"] for c in group["claims"]] == ["memory", "compute", "both", "memory", "whole GPU"]
    assert group["decided_by"] == {"memory": 2, "compute": 1, "both": 1, "whole GPU": 1}
    assert group["claims"][3]["compute_known"] is False and group["compute_sources"]["none"] == 2


def test_every_figure_of_a_group_says_its_source(gpus, names):
    claims = [row("a", names[0], 5 * GIB), row("b", names[1], 5 * GIB, unknown_hours=0.5)]
    (group,) = advise(gpus, claims)["groups"]
    sources = group["figure_sources"]
    assert set(sources) == {"profiles", "peaks", "gpus_today", "gpus_needed", "gpus_needed_lower_bound"}
    assert "lower bound" in sources["peaks"] and "lower bound" in sources["gpus_needed_lower_bound"]
    assert "not proven the fewest" in sources["gpus_needed"]
    assert [c["peak_source"] for c in group["claims"]] == ["measured", "measured, lower bound"]
