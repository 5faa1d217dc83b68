# SPDX-License-Identifier: Apache-2.0
"""The mig role's GPU clients started again (roles/mig/tasks/clients_start.yml) on a node that no longer
answers (its SSH port refused: Ansible's unreachable, as a node that did not come back from the rollout's
reboot): the units' start is tried and ignored as unreachable, the DaemonSet labels, written from the
controller, still get their values back on the fake API server, and the run fails naming the units that did
not come back. A real ansible-playbook run, its node a host whose connection is refused. And main.yml takes a
node that stops answering after the reboot or for its verification as a failed change, so that always: runs."""

from __future__ import annotations

import socket

import yaml

from ansible_collections.aligned.dra.tests.support.fakes.apiserver import FakeApiServer
from ansible_collections.aligned.dra.tests.support.harnesses.playbook_runs import (
    REPO,
    environment,
    run_playbook,
    write_inventory,
    write_play,
)

PAUSE_LABEL, EXPORTER_LABEL = "aligned.dra/deploy.driver", "nvidia.com/gpu.deploy.dcgm-exporter"
PAUSED = "paused-for-mig-change"


def closed_port() -> int:
    """A local TCP port nothing listens on (bound, then closed: a connection to it is refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_node_that_no_longer_answers_still_gets_its_labels_back_and_the_run_names_its_units(tmp_path):
    with FakeApiServer(minor="1.35") as api:
        labels = {EXPORTER_LABEL: PAUSED, PAUSE_LABEL: PAUSED}
        api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gone", "labels": labels}})
        node = {
            "ansible_connection": "ssh",
            "ansible_host": "127.0.0.1",
            "ansible_port": closed_port(),
            "ansible_ssh_common_args": "-o ConnectTimeout=5 -o StrictHostKeyChecking=no -o BatchMode=yes",
            "ansible_python_interpreter": "/usr/bin/python3",
        }
        inventory = write_inventory(tmp_path / "hosts.yml", {"gone": node}, {})
        play = [
            {
                "name": "the GPU clients of a node that no longer answers",
                "hosts": "gone",
                "gather_facts": False,
                "tasks": [
                    {
                        "name": "start them again",
                        "ansible.builtin.include_role": {"name": "aligned.dra.mig", "tasks_from": "clients_start"},
                    }
                ],
            }
        ]
        variables = {
            "aligned_dra_kubeconfig": str(api.write_kubeconfig(tmp_path / "kubeconfig")),
            # what clients_stop.yml remembered: the exporter's label was "true", the driver's absent
            "aligned_dra_mig_clients_paused": {EXPORTER_LABEL: "true", PAUSE_LABEL: None},
            "aligned_dra_mig_units_to_start": ["dcgm-exporter.service", "nvidia-dcgm.service"],
        }
        run = run_playbook(
            inventory,
            write_play(tmp_path / "play.yml", play),
            extra_vars=variables,
            env=environment(ANSIBLE_CONFIG=str(REPO / "ansible.cfg")),
            cwd=REPO,
            timeout=120,
        )
        assert run.returncode != 0, run.stdout + run.stderr
        assert api.get("nodes", "gone")["metadata"]["labels"] == {EXPORTER_LABEL: "true"}
        # the units in the list's order, each named as not back
        named = run.stdout.split("GPU clients that did not come back on gone: ")[1]
        assert named.index("nvidia-dcgm.service") < named.index("dcgm-exporter.service"), named
        assert "the DaemonSets paused" not in named  # the labels came back


def test_the_change_fails_into_always_when_the_node_stops_answering():
    """Ansible skips always: for a host that became unreachable: main.yml's tasks that ask the node after the
    reboot and for the verification take the unreachable answer, and the next task fails the change with it,
    so always: starts the clients again (the run above shows what that does for a node still gone)."""
    (block,) = [t for t in yaml.safe_load((REPO / "roles" / "mig" / "tasks" / "main.yml").read_text()) if "block" in t]
    tasks = block["block"]
    for register in ("aligned_dra_mig_reapplied", "aligned_dra_mig_verify"):
        (index,) = [i for i, t in enumerate(tasks) if t.get("register") == register]
        assert tasks[index]["ignore_unreachable"] is True and "aligned.dra.mig" in tasks[index]
        assert tasks[index + 1]["when"] == f"{register} is unreachable" and "ansible.builtin.fail" in tasks[index + 1]
    assert [t["ansible.builtin.include_tasks"] for t in block["always"]] == ["clients_start.yml"]
