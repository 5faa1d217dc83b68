# SPDX-License-Identifier: Apache-2.0
"""controller/validation/stage.py: the stage's one entry gives the result and the message the module and action return."""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.validation import stage, validate


def run(settings: dict[str, dict], stages=("probe",)):
    return stage.run(list(settings), lambda h: list(settings[h]), lambda h, n, d: settings[h].get(n, d), stages)


def test_a_clean_site_has_no_message_and_counts_its_hosts_and_sites():
    result, message = run({"gpu-01": {}, "gpu-02": {"aligned_dra_site": "west"}})
    assert message is None
    inputs = result.pop("site_inputs")
    assert result == {"changed": False, "hosts": 2, "sites": ["default", "west"], "problems": [], "mig_hosts": []}
    assert sorted(inputs) == ["default", "west"]


def test_site_inputs_come_from_the_one_read_of_each_host(tmp_path):
    """What site.yml compares with the last run: the settings' digest (no runtime fact), the inventory
    folder, files named by absolute path, the output directory, and whether the site reads the cluster."""
    trace = tmp_path / "trace.csv"
    trace.write_text("pod\n")
    inventory = str(tmp_path / "inventory")
    west = {"aligned_dra_site": "west", "inventory_dir": inventory, "aligned_dra_replay": {"trace": str(trace)}}
    east = {"aligned_dra_site": "east", "inventory_dir": inventory, "aligned_dra_claims_apply": True}
    inputs = run({"gpu-01": west, "gpu-02": east})[0]["site_inputs"]
    assert inputs["west"]["files"] == [str(trace)] and inputs["west"]["live"] is None
    assert inputs["west"]["inventory_dirs"] == [inventory]
    assert inputs["west"]["output_dir"] == f"{inventory}/output"
    assert inputs["east"]["live"] == "aligned_dra_claims_apply applies to the cluster"
    # a fact of this run is not an input; a setting is
    with_fact = run({"gpu-01": dict(west, aligned_dra_validate_done=True), "gpu-02": east})[0]["site_inputs"]
    assert with_fact["west"]["settings"] == inputs["west"]["settings"]
    moved = run({"gpu-01": dict(west, aligned_dra_output_dir="/srv/out"), "gpu-02": east})[0]["site_inputs"]
    assert moved["west"]["settings"] != inputs["west"]["settings"] and moved["west"]["output_dir"] == "/srv/out"


def test_site_inputs_name_each_sites_hosts_and_those_whose_driver_reads_the_cluster():
    """What the node check compares: the hosts in inventory order, and the host-mode drivers whose token the
    role reads from the cluster (their node steps always run)."""
    cluster = {"aligned_dra_site": "west", "aligned_dra_driver_kubeconfig": "/etc/kubernetes/admin.conf"}
    hosts = {
        "gpu-02": {"aligned_dra_site": "west"},
        "gpu-01": cluster,
        "gpu-03": dict(cluster, aligned_dra_driver_mode="daemonset", aligned_dra_driver_image="r/d:1"),
    }
    inputs = run(hosts)[0]["site_inputs"]["west"]
    assert inputs["hosts"] == ["gpu-02", "gpu-01", "gpu-03"]
    assert inputs["nodes_live"] == {
        "gpu-01": "aligned_dra_driver_kubeconfig: the driver's token is read from the cluster"
    }


def test_no_site_inputs_when_a_problem_was_found():
    assert run({"gpu-01": {"aligned_dra_sit": "west"}})[0]["site_inputs"] == {}


def test_every_problem_is_returned_and_said_in_the_message_as_the_checks_say_it():
    settings = {"gpu-01": {"aligned_dra_sit": "west"}, "gpu-02": {}}
    result, message = run(settings)
    problems, sites = validate.validate(
        list(settings), lambda h: list(settings[h]), lambda h, n, d: settings[h].get(n, d), ("probe",)
    )
    assert problems, "the misspelt name is a problem"
    assert result["problems"] == [problem.__dict__ for problem in problems]
    assert result["problems"][0]["host"] == "gpu-01" and result["problems"][0]["variable"] == "aligned_dra_sit"
    assert message == validate.report(problems, sites)
