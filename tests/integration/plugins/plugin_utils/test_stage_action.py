# SPDX-License-Identifier: Apache-2.0
"""A controller stage's action (plugin_utils.stage_action) through a real ansible-playbook run: on a host
whose module would run on the controller with ansible-playbook's own interpreter, the stage runs in the
controller's process (no module is copied or executed: ``-vvv`` shows no EXEC for it); on a host with
another interpreter the module runs. Both give the same results: check mode and diff, the file written
once, an unchanged second run, and the same failures (an unknown option, options that exclude each
other, a stage error) with the same messages, and the report keeps a page's mode both ways.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import yaml

from ansible_collections.aligned.dra.tests.support.harnesses.playbook_runs import run_playbook, write_play
from ansible_collections.aligned.dra.tests.support.sites.report_sites import topology_of, write_site

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "replay"


def replay_task(name: str, register: str, **options) -> dict:
    args = {
        "trace": str(FIXTURES / "openb-pods.csv"),
        "nodes": str(FIXTURES / "openb-nodes.csv"),
        "policies": ["whole", "fractional"],
        "site": "lab",
        "mode": "timeline",
        "dest": "{{ out }}/{{ inventory_hostname }}/replay.json",
    }
    args.update(options)
    return {"name": name, "aligned.dra.replay": args, "register": register, "ignore_errors": True}


CALLS = ("checked", "written", "again", "unknown", "exclusive", "missing")


def run_on_both(tmp_path: Path, tasks: list[dict], calls: tuple[str, ...]) -> tuple[dict, dict]:
    """``tasks`` on host ``here`` (the playbook's interpreter: in the controller's process) and ``there``
    (another path to the same Python: the module); the registered ``calls`` of each, ``there``'s with its
    own directory's name replaced by ``here``'s."""
    out = tmp_path / "out"
    wrapper = tmp_path / "python-wrapper"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    inventory = tmp_path / "hosts.yml"
    local = {"ansible_connection": "local"}
    hosts = {
        "here": dict(local, ansible_python_interpreter="{{ ansible_playbook_python }}"),
        "there": dict(local, ansible_python_interpreter=str(wrapper)),
    }
    inventory.write_text(yaml.safe_dump({"all": {"hosts": hosts, "vars": {"out": str(out)}}}))
    keep = {
        "name": "Keep the results",
        "ansible.builtin.copy": {
            "content": "{{ {" + ", ".join(f"'{name}': {name}" for name in calls) + "} | to_json }}",
            "dest": "{{ out }}/{{ inventory_hostname }}.json",
        },
    }
    play = write_play(
        tmp_path / "play.yml",
        [
            {"name": "Stages", "hosts": "all", "gather_facts": False, "tasks": tasks},
            {"name": "Keep", "hosts": "all", "gather_facts": False, "tasks": [keep]},
        ],
    )
    result = run_playbook(inventory, play, "-vvv", env=dict(os.environ, ANSIBLE_FORKS="1"))
    assert result.returncode == 0, result.stdout[-3000:]
    stages = result.stdout.split("PLAY [Keep]")[0]
    assert "<here> EXEC" not in stages and "<there> EXEC" in stages
    here = json.loads((out / "here.json").read_text())
    # each host writes in its own directory: paths in the results name it
    there = json.loads((out / "there.json").read_text().replace("/there", "/here"))
    return here, there


REPORT_CALLS = ("report_checked", "report_written", "report_again")


def test_in_the_controllers_process_or_as_a_module_the_results_are_the_same(tmp_path):
    out = tmp_path / "out"
    for host in ("here", "there"):
        write_site(out / host, "west", {"dgx": topology_of("dgx-h100"), "vm": topology_of("vm-flat")})
        (out / host / "index.html").write_text("old")
        (out / host / "index.html").chmod(0o600)
    report = {"aligned.dra.site_report": {"output_dir": "{{ out }}/{{ inventory_hostname }}"}}
    tasks = [
        dict(replay_task("Check", "checked"), check_mode=True, diff=True),
        replay_task("Write", "written"),
        replay_task("Again", "again"),
        replay_task("An unknown option", "unknown", bogus_option=1),
        replay_task("Options that exclude each other", "exclusive", policy="whole"),
        replay_task("A stage error", "missing", nodes=str(tmp_path / "nope.csv")),
        dict(report, name="Check the report", register="report_checked", check_mode=True, diff=True),
        dict(report, name="Write the report", register="report_written"),
        dict(report, name="The report again", register="report_again"),
    ]
    here, there = run_on_both(tmp_path, tasks, CALLS + REPORT_CALLS)
    for name in CALLS + REPORT_CALLS:
        assert here[name] == there[name], name

    assert here["checked"]["changed"] and here["checked"]["diff"]["before"] == ""
    assert here["written"]["changed"] and not here["again"]["changed"]
    written = json.loads((out / "here" / "replay.json").read_text())
    assert written == {"schema_version": 1, "site": "lab", "policies": here["written"]["replays"]}
    assert (out / "here" / "replay.json").read_bytes() == (out / "there" / "replay.json").read_bytes().replace(
        b"/there/", b"/here/"
    )
    assert here["unknown"]["failed"] and here["unknown"]["msg"].startswith(
        "Unsupported parameters for (aligned.dra.replay) module: bogus_option."
    )
    assert here["exclusive"]["failed"] and "mutually exclusive: policy|policies" in here["exclusive"]["msg"]
    assert here["missing"]["failed"] and here["missing"]["msg"].startswith("nodes: cannot read")

    # the report keeps a page's mode as the module's atomic_move keeps it; a new page gets the umask's
    assert here["report_checked"]["changed"] and here["report_written"]["changed"]
    assert not here["report_again"]["changed"]
    for host in ("here", "there"):
        assert (out / host / "index.html").stat().st_mode & 0o777 == 0o600
        assert (out / host / "west" / "report.html").stat().st_mode & 0o777 == 0o644
    assert (out / "here" / "west" / "report.html").read_bytes() == (out / "there" / "west" / "report.html").read_bytes()
