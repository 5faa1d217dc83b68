# SPDX-License-Identifier: Apache-2.0
"""The claims role through real ansible-playbook runs: probe, render, plan, write, apply.

The apply path talks to tests/support/fakes/apiserver/ (a strict in-memory API server:
no real kube-apiserver can run here) through kubernetes.core.k8s.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ansible_collections.aligned.dra.tests.fixtures.materialize import materialize
from ansible_collections.aligned.dra.tests.support.fakes.apiserver import FakeApiServer
from ansible_collections.aligned.dra.tests.support.harnesses.playbook_runs import (
    PLAYBOOKS,
    REPO,
    recap,
    run_playbook,
    tree_vars,
    write_imports,
    write_inventory,
)


@pytest.fixture(scope="module")
def trees(tmp_path_factory):
    out = tmp_path_factory.mktemp("claims-trees")
    return {name: materialize(name, out) for name in ("dgx-h100", "vm-flat")}


def setup(tmp_path: Path, trees: dict, claims: dict | None = None, **extra) -> tuple[Path, Path]:
    output = tmp_path / "out"
    hosts = {"dgx1": tree_vars(trees["dgx-h100"]), "vm1": tree_vars(trees["vm-flat"])}
    variables = {
        "aligned_dra_output_dir": str(output),
        "aligned_dra_site": "west",
        "aligned_dra_kubernetes_version": "1.36",
        "aligned_dra_device_options": {"exclude": ["eno*"]},
        "aligned_dra_claims": claims
        if claims is not None
        else {"templates": {"pairs": {"counts": [1, 8]}}, "required": ["gpu-nic-pair-1"]},
        **extra,
    }
    path = write_inventory(tmp_path / "hosts.yml", hosts, variables)
    play = write_imports(tmp_path / "play.yml", [PLAYBOOKS / "probe.yml", PLAYBOOKS / "claims.yml"])
    return path, play


def test_render_plan_and_write_then_idempotent(tmp_path, trees):
    inventory, play = setup(tmp_path, trees)
    first = run_playbook(inventory, play)
    assert first.returncode == 0, first.stdout + first.stderr
    site = tmp_path / "out" / "west"
    plan = json.loads((site / "plan.json").read_text())
    assert plan["site"] == "west" and plan["kubernetes_version"] == "1.36"
    pair1 = next(t for t in plan["templates"] if t["name"] == "gpu-nic-pair-1")
    # 8 GPU/NIC pairs on the DGX, each behind its own host bridge; the VM's
    # GPUs and EFA share its only root (PHB by the VM's flat layout)
    assert pair1["nodes"]["dgx1"]["fits"] == 8
    assert pair1["nodes"]["dgx1"]["worst_level"] == "PXB"
    assert pair1["required"] and pair1["satisfiable"]
    kustomization = yaml.safe_load((site / "claims" / "kustomization.yaml").read_text())
    assert "claimtemplate-gpu-nic-pair-8.yaml" in kustomization["resources"]
    for name in kustomization["resources"]:
        assert (site / "claims" / name).is_file()
    # the summary line says what plan.json says, in the words of the plan (never a level for an unknown)
    assert f"gpu-nic-pair-1: 9 claims fit, worst level {pair1['worst_level_text']}" in first.stdout
    assert pair1["worst_level_text"] == "PHB"

    second = run_playbook(inventory, play)
    assert second.returncode == 0, second.stdout + second.stderr
    assert recap(second.stdout)["changed"] == 0


def test_a_driver_split_by_kind_gets_its_gpu_class_and_kai_counts_its_gpus_in_the_plan(tmp_path, trees):
    split = {"exclude": ["eno*"], "split_gpu_driver": "gpu.aligned.dev"}
    inventory, play = setup(tmp_path, trees, aligned_dra_device_options=split)
    # the DGX's H100s run dynamic MIG (profiles from the documented geometry: a captured tree has no NVML)
    data = yaml.safe_load(inventory.read_text())
    data["aligned_dra_nodes"]["hosts"]["dgx1"]["aligned_dra_mig"] = {"mode": "dynamic"}
    inventory.write_text(yaml.safe_dump(data))
    result = run_playbook(inventory, play)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    site = tmp_path / "out" / "west"
    gpu_class = yaml.safe_load((site / "claims" / "deviceclass-aligned-gpu.yaml").read_text())
    assert gpu_class["spec"]["selectors"][0]["cel"]["expression"].startswith('device.driver == "gpu.aligned.dev" && ')
    # MIG devices are published by the GPU driver: the MIG classes select its name; a template per H100 profile
    mig_class = yaml.safe_load((site / "claims" / "deviceclass-mig.aligned.dev.yaml").read_text())
    assert mig_class["spec"]["selectors"][0]["cel"]["expression"].startswith('device.driver == "gpu.aligned.dev" && ')
    pair = yaml.safe_load((site / "claims" / "claimtemplate-mig-3g-40gb-nic.yaml").read_text())
    assert pair["spec"]["spec"]["devices"]["constraints"][0]["matchAttribute"] == "resource.kubernetes.io/pcieRoot"
    written = {p.name for p in (site / "claims").iterdir()}
    assert {f"claimtemplate-mig-{t}.yaml" for t in ("1g-10gb", "2g-20gb", "4g-40gb", "7g-80gb")} <= written
    nic_class = yaml.safe_load((site / "claims" / "deviceclass-aligned-nic.yaml").read_text())
    assert nic_class["spec"]["selectors"][0]["cel"]["expression"].startswith('device.driver == "dra.aligned.dev" && ')
    plan = json.loads((site / "plan.json").read_text())
    pair1 = next(t for t in plan["templates"] if t["name"] == "gpu-nic-pair-1")
    # as with one driver (test_render_plan_and_write_then_idempotent): a dynamic GPU is still published whole;
    # KAI counts every GPU, and (no counters in KAI) every MIG device of the GPU driver too: 25 per H100
    assert (pair1["nodes"]["dgx1"]["fits"], pair1["nodes"]["dgx1"]["worst_level"], pair1["fits_total"]) == (8, "PXB", 9)
    assert plan["gpu_counts"]["dgx1"] == {"published": 8, "counted_by_kai": 8 + 8 * 25}
    assert plan["gpu_counts"]["vm1"]["counted_by_kai"] == plan["gpu_counts"]["vm1"]["published"] > 0


def test_a_template_that_is_no_longer_rendered_is_removed(tmp_path, trees):
    inventory, play = setup(tmp_path, trees)
    assert run_playbook(inventory, play).returncode == 0
    inventory, play = setup(tmp_path, trees, claims={"templates": {"pairs": {"counts": [1]}}})
    result = run_playbook(inventory, play)
    assert result.returncode == 0, result.stdout + result.stderr
    claims_dir = tmp_path / "out" / "west" / "claims"
    assert not (claims_dir / "claimtemplate-gpu-nic-pair-8.yaml").exists()
    assert (claims_dir / "claimtemplate-gpu-nic-pair-1.yaml").exists()


def test_check_mode_writes_nothing_and_shows_a_diff(tmp_path, trees):
    inventory, play = setup(tmp_path, trees)
    result = run_playbook(inventory, play, "--check", "--diff")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "+++ after" in result.stdout
    assert not (tmp_path / "out" / "west" / "plan.json").exists()


def test_unsatisfiable_required_template_fails_the_play(tmp_path, trees):
    inventory, play = setup(tmp_path, trees, claims={"templates": {"pairs": {"counts": [8]}}, "required": ["vf-only"]})
    result = run_playbook(inventory, play)
    assert result.returncode != 0
    assert "required templates cannot be satisfied on site west: vf-only" in result.stdout


def test_bad_settings_fail_before_anything_is_written(tmp_path, trees):
    inventory, play = setup(tmp_path, trees, claims={"drivers": ["acme.io"]})
    result = run_playbook(inventory, play)
    assert result.returncode != 0
    assert "aligned_dra_claims.drivers" in result.stdout
    assert not (tmp_path / "out" / "west" / "claims").exists()


TOLERATE_UNHEALTHY = [{"key": "dra.aligned.dev/unhealthy", "operator": "Exists", "effect": "NoSchedule"}]


def test_tolerations_without_the_gate_are_refused(tmp_path, trees):
    inventory, play = setup(
        tmp_path, trees, aligned_dra_kubernetes_version="1.35", aligned_dra_claims_tolerations=TOLERATE_UNHEALTHY
    )
    result = run_playbook(inventory, play)
    assert result.returncode != 0
    assert "aligned_dra_claims_tolerations: device taint tolerations need feature gate DRADeviceTaints" in result.stdout
    assert not (tmp_path / "out" / "west" / "claims").exists()


def test_tolerations_are_written_into_the_templates(tmp_path, trees):
    inventory, play = setup(tmp_path, trees, aligned_dra_claims_tolerations=TOLERATE_UNHEALTHY)
    result = run_playbook(inventory, play)
    assert result.returncode == 0, result.stdout[-3000:]
    template = yaml.safe_load((tmp_path / "out" / "west" / "claims" / "claimtemplate-gpu-only.yaml").read_text())
    assert template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["tolerations"] == TOLERATE_UNHEALTHY


def test_bad_minor_is_refused_by_the_argument_spec(tmp_path, trees):
    inventory, play = setup(tmp_path, trees, aligned_dra_kubernetes_version="1.30")
    result = run_playbook(inventory, play)
    assert result.returncode != 0
    assert "aligned_dra_kubernetes_version" in result.stdout


def test_server_side_apply_and_dry_run_in_check_mode(tmp_path, trees):
    with FakeApiServer(minor="1.36") as api:
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        inventory, play = setup(
            tmp_path,
            trees,
            claims={"templates": {"pairs": {"counts": [1]}, "pairs_fallback": {"enabled": False}}},
            aligned_dra_claims_apply=True,
            aligned_dra_claims_kubeconfig=str(kubeconfig),
        )
        dry = run_playbook(inventory, play, "--check", "--diff")
        assert dry.returncode == 0, dry.stdout + dry.stderr
        assert api.list("deviceclasses") == []
        applies = [r for r in api.requests if r[0] == "PATCH"]
        assert applies and all(r[2] == "application/apply-patch+yaml" for r in applies)
        # the server refuses an apply without fieldManager (422); a dry run stores nothing
        assert api.rejections == []

        applied = run_playbook(inventory, play)
        assert applied.returncode == 0, applied.stdout + applied.stderr
        classes = {o["metadata"]["name"] for o in api.list("deviceclasses")}
        assert classes == {"aligned-gpu", "aligned-nic", "aligned-vf"}
        template = api.get("resourceclaimtemplates", "gpu-nic-pair-1", "default")
        assert (
            template["spec"]["spec"]["devices"]["constraints"][0]["matchAttribute"] == "resource.kubernetes.io/pcieRoot"
        )
        assert api.rejections == []


def test_extended_resource_name_is_written_and_applied(tmp_path, trees):
    claims = {"templates": {"pairs": {"counts": [1]}}, "extended_resources": {"gpu": "aligned.dev/gpu"}}
    with FakeApiServer(minor="1.36") as api:
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        inventory, play = setup(
            tmp_path, trees, claims=claims, aligned_dra_claims_apply=True, aligned_dra_claims_kubeconfig=str(kubeconfig)
        )
        result = run_playbook(inventory, play)
        assert result.returncode == 0, result.stdout + result.stderr
        written = yaml.safe_load((tmp_path / "out" / "west" / "claims" / "deviceclass-aligned-gpu.yaml").read_text())
        assert written["spec"]["extendedResourceName"] == "aligned.dev/gpu"
        # the fake server checks the name and, with the gate off, would drop it as a real one does
        assert api.get("deviceclasses", "aligned-gpu")["spec"]["extendedResourceName"] == "aligned.dev/gpu"
        assert "extendedResourceName" not in api.get("deviceclasses", "aligned-nic")["spec"]
        assert api.rejections == []


def test_extended_resource_name_with_the_gate_off_fails_before_anything_is_written(tmp_path, trees):
    claims = {"extended_resources": {"gpu": "aligned.dev/gpu"}}
    inventory, play = setup(tmp_path, trees, claims=claims, aligned_dra_kubernetes_version="1.35")
    result = run_playbook(inventory, play)
    assert result.returncode != 0
    assert "aligned_dra_claims.extended_resources.gpu" in result.stdout
    assert "DRAExtendedResource, which is off on Kubernetes 1.35" in result.stdout
    assert not (tmp_path / "out" / "west" / "claims").exists()


def test_what_if_plans_a_site_on_a_tree_it_does_not_have(tmp_path, trees):
    inventory, _play = setup(tmp_path, trees, claims={"templates": {"pairs": {"counts": [1]}}})
    dest = tmp_path / "what-if.json"
    extra = json.dumps(
        {
            "aligned_dra_what_if_site": "west",
            "aligned_dra_what_if_trees": {"dgx-next": str(trees["dgx-h100"])},
            "aligned_dra_what_if_dest": str(dest),
        }
    )
    result = run_playbook(inventory, REPO / "playbooks" / "what_if.yml", "-e", extra)
    assert result.returncode == 0, result.stdout + result.stderr
    plan = json.loads(dest.read_text())
    pair1 = next(t for t in plan["templates"] if t["name"] == "gpu-nic-pair-1")
    assert list(pair1["nodes"]) == ["dgx-next"]
    assert pair1["fits_total"] == 8
    # nothing of the site itself was probed or written
    assert not (tmp_path / "out").exists()
    assert "mig" not in plan  # the site runs no MIG


def test_what_if_takes_the_sites_mig_settings_on_the_other_nodes(tmp_path, trees):
    """The site's aligned_dra_mig (its first host's) on the other node: MIG templates for the profiles its GPUs
    offer, the GPU planned as the driver would publish it there, a MIG + NIC claim at the GPU's level."""
    mig = {"mode": "dynamic", "gpus": {"indices": [0]}}
    inventory, _play = setup(tmp_path, trees, claims={"templates": {"pairs": {"counts": [1]}}}, aligned_dra_mig=mig)
    dest = tmp_path / "what-if.json"
    extra = {"aligned_dra_what_if_site": "west", "aligned_dra_what_if_trees": {"dgx-next": str(trees["dgx-h100"])},
             "aligned_dra_what_if_dest": str(dest)}  # fmt: skip
    result = run_playbook(inventory, REPO / "playbooks" / "what_if.yml", "-e", json.dumps(extra))
    assert result.returncode == 0, result.stdout + result.stderr
    plan = json.loads(dest.read_text())
    (gpu,) = plan["mig"]["nodes"]["dgx-next"]["gpus"]
    assert (gpu["pci_address"], gpu["mode"], gpu["source"]) == ("0000:1a:00.0", "dynamic", "documented")
    assert gpu["templates"]["mig-1g-10gb"]["claims"] == 7
    templates = {t["name"]: t for t in plan["templates"]}
    assert templates["mig-3g-40gb-nic"]["aligned_level"] == templates["gpu-nic-pair-1"]["aligned_level"] == "PXB"
    assert templates["gpu-nic-pair-1"]["fits_total"] == 8  # the MIG GPU whole still pairs with its NIC
    assert "mig-1g-10gb: on 1 MIG GPUs, 7 claims each GPU serving it alone" in " ".join(result.stdout.split())


def test_what_if_needs_one_source_of_nodes(tmp_path, trees):
    inventory, _play = setup(tmp_path, trees)
    result = run_playbook(inventory, REPO / "playbooks" / "what_if.yml", "-e", "aligned_dra_what_if_site=west")
    assert result.returncode != 0
    assert "exactly one of" in result.stdout


def test_plan_on_the_resource_slices_of_every_driver_in_the_cluster(tmp_path, trees):
    from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra
    from ansible_collections.aligned.dra.plugins.module_utils.dra import slices as dra_slices
    from ansible_collections.aligned.dra.plugins.module_utils.node.topology import probe

    root = trees["dgx-h100"]
    topology = probe(str(root / "sys"), str(root / "proc"))
    nics = dra.devices_from_topology(topology, {"gpus": False, "exclude": ["eno*"]})
    # another driver publishes two of the GPUs, with the standard attributes
    nvidia = [
        {
            "name": f"gpu-{i}",
            "attributes": {
                "type": {"string": "gpu"},
                dra.ATTR_PCIE_ROOT: {"string": root_name},
                dra.ATTR_PCI_BUS_ID: {"string": bdf},
            },
        }
        for i, (bdf, root_name) in enumerate([("0000:1a:00.0", "pci0000:15"), ("0000:9a:00.0", "pci0000:95")])
    ]
    with FakeApiServer(minor="1.36") as api:
        for node in ("dgx1", "vm1"):
            api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}})
        for item in dra_slices.resource_slices("dgx1", nics) + dra_slices.resource_slices(
            "dgx1", nvidia, driver="gpu.nvidia.com"
        ):
            api.create(item)
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        inventory, play = setup(
            tmp_path,
            trees,
            claims={
                "drivers": ["dra.aligned.dev", "gpu.nvidia.com"],
                "gpu_driver": "gpu.nvidia.com",
                "templates": {"pairs": {"counts": [1, 2]}, "pairs_fallback": {"enabled": False}},
                "required": ["gpu-nic-pair-1"],
            },
            aligned_dra_claims_plan_source="cluster",
            aligned_dra_claims_kubeconfig=str(kubeconfig),
        )
        result = run_playbook(inventory, play)
        assert result.returncode == 0, result.stdout + result.stderr
    plan = json.loads((tmp_path / "out" / "west" / "plan.json").read_text())
    assert plan["nodes"] == ["dgx1"]  # the VM publishes nothing in this cluster
    pair1 = next(t for t in plan["templates"] if t["name"] == "gpu-nic-pair-1")
    node = pair1["nodes"]["dgx1"]
    assert node["fits"] == 2
    assert node["allocations"][0]["devices"] == {"gpu-0": ["gpu.nvidia.com/gpu-0"], "nic-0": ["nic-0000-1d-00-0"]}
    assert node["worst_level"] == "PXB"  # levels from the probed topology, by PCI address
    pair2 = next(t for t in plan["templates"] if t["name"] == "gpu-nic-pair-2")
    assert pair2["fits_total"] == 1 and pair2["worst_level"] == "SYS"


def test_rails_render_pinned_templates_and_the_plan_counts_claims_per_rail(tmp_path, trees):
    claims = {
        "templates": {"pairs": {"counts": [1]}, "pairs_fallback": {"enabled": False}, "rails": {"counts": [1, 8]}}
    }
    inventory, play = setup(tmp_path, trees, claims=claims)
    data = yaml.safe_load(inventory.read_text())
    hosts = data["aligned_dra_nodes"]["hosts"]
    # the DGX's eight compute NICs in PCI order; the VM's one NIC is on rail 1, by its Kubernetes node name
    hosts["dgx1"]["aligned_dra_rails"] = {"by": "pci_order", "count": 8, "exclude": ["eno*"]}
    hosts["vm1"]["aligned_dra_rails"] = {
        "by": "map",
        "map": {"0000:00:03.0": 0},
        "nodes": {"k8s-vm1": {"0000:00:03.0": 1}},
    }
    hosts["vm1"]["aligned_dra_driver_node_name"] = "k8s-vm1"
    inventory.write_text(yaml.safe_dump(data))
    result = run_playbook(inventory, play)
    assert result.returncode == 0, result.stdout + result.stderr
    site = tmp_path / "out" / "west"
    plan = json.loads((site / "plan.json").read_text())
    templates = {t["name"]: t for t in plan["templates"]}
    assert plan["rails"] == list(range(8)) and plan["warnings"] == []
    assert [n for n in templates if "rail" in n] == [*(f"gpu-nic-rail-{r}" for r in range(8)), "gpu-nic-rails-8-0"]
    rail_1 = templates["gpu-nic-rail-1"]
    assert [a["rails"] for node in ("dgx1", "vm1") for a in rail_1["nodes"][node]["allocations"]] == [[1], [1]]
    assert rail_1["fits_per_rail"] == {"0": 0, "1": 2, **{str(r): 0 for r in range(2, 8)}}
    assert templates["gpu-nic-rail-0"]["nodes"]["vm1"]["fits"] == 0
    assert templates["gpu-nic-rails-8-0"]["fits_total"] == 1
    assert templates["gpu-nic-pair-1"]["nodes"]["vm1"]["allocations"][0]["rails"] == [1]
    assert "west: gpu-nic-rail-1: 2 claims fit, worst level" in result.stdout
    assert "per rail 0: 0, 1: 2, 2: 0" in " ".join(result.stdout.split())
    kustomization = yaml.safe_load((site / "claims" / "kustomization.yaml").read_text())
    assert "claimtemplate-gpu-nic-rails-8-0.yaml" in kustomization["resources"]

    # what if: the site's rule (the first host's) read on a node it does not have
    dest = tmp_path / "what-if.json"
    extra = {"aligned_dra_what_if_site": "west", "aligned_dra_what_if_trees": {"dgx-next": str(trees["dgx-h100"])},
             "aligned_dra_what_if_dest": str(dest)}  # fmt: skip
    result = run_playbook(inventory, REPO / "playbooks" / "what_if.yml", "-e", json.dumps(extra))
    assert result.returncode == 0, result.stdout + result.stderr
    what_if = {t["name"]: t for t in json.loads(dest.read_text())["templates"]}
    assert what_if["gpu-nic-rail-7"]["nodes"]["dgx-next"]["allocations"][0]["rails"] == [7]
    assert "gpu-nic-rail-7: 1 claims fit" in result.stdout


def test_a_limited_run_renders_the_rail_templates_of_the_whole_site(tmp_path, trees):
    claims = {
        "templates": {"pairs": {"counts": [1]}, "pairs_fallback": {"enabled": False}, "rails": {"counts": [1, 8]}}
    }
    inventory, play = setup(tmp_path, trees, claims=claims)
    data = yaml.safe_load(inventory.read_text())
    hosts = data["aligned_dra_nodes"]["hosts"]
    hosts["dgx1"]["aligned_dra_rails"] = {"by": "pci_order", "count": 8, "exclude": ["eno*"]}
    hosts["vm1"]["aligned_dra_rails"] = {"by": "map", "map": {"0000:00:03.0": 1}}
    inventory.write_text(yaml.safe_dump(data))
    # only vm1 is probed and planned; its own rule declares rail 1, the site's (dgx1's count) rails 0-7
    result = run_playbook(inventory, play, "--limit", "vm1")
    assert result.returncode == 0, result.stdout + result.stderr
    site = tmp_path / "out" / "west"
    plan = json.loads((site / "plan.json").read_text())
    assert plan["nodes"] == ["vm1"] and plan["rails"] == [1] and plan["warnings"] == []
    templates = {t["name"]: t for t in plan["templates"]}
    assert [n for n in templates if "rail" in n] == [*(f"gpu-nic-rail-{r}" for r in range(8)), "gpu-nic-rails-8-0"]
    assert templates["gpu-nic-rail-1"]["fits_total"] == 1 and templates["gpu-nic-rail-7"]["fits_total"] == 0
    written = {p.name for p in (site / "claims").iterdir()}
    assert {"claimtemplate-gpu-nic-rail-7.yaml", "claimtemplate-gpu-nic-rails-8-0.yaml"} <= written
