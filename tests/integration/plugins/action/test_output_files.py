# SPDX-License-Identifier: Apache-2.0
"""aligned.dra.output_files through real ansible-playbook runs: a template entry renders byte for byte
as ansible.builtin.template renders the same template (ansible_managed, trim_blocks, the entry as
``item``), a second run changes nothing, check mode shows the diff and writes nothing, stale files of
the prune patterns go, and bad entries fail naming the entry."""

from __future__ import annotations

import json
from pathlib import Path

from ansible_collections.aligned.dra.tests.support.harnesses.playbook_runs import recap, run_on_localhost, write_play

OBJECT_TEMPLATE = """\
# {{ ansible_managed | comment(decoration='') | trim }}
# {{ item.object.kind }} {{ item.object.metadata.name }} for site {{ site }}.
{% if item.object.kind == 'DeviceClass' %}
# a class
{% endif %}
{{ item.object | to_nice_yaml(indent=2, sort_keys=false) }}
"""
OBJECTS = [
    {"name": "deviceclass-gpu.yaml", "object": {"kind": "DeviceClass", "metadata": {"name": "gpu"}, "spec": {"b": 1, "a": ["x", "y"]}}},
    {"name": "claimtemplate-pair.yaml", "object": {"kind": "ResourceClaimTemplate", "metadata": {"name": "pair"}, "spec": {}}},
]  # fmt: skip


def project(tmp_path: Path, dest: Path, reference: Path) -> Path:
    """A playbook beside its templates/: the objects with output_files, and each with ansible.builtin.template."""
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "object.yaml.j2").write_text(OBJECT_TEMPLATE)
    files = "{{ objects | map('combine', {'template': 'object.yaml.j2'}) | list + [{'name': 'notes.md', 'content': 'n\\n'}] }}"
    tasks = [
        {"name": "All objects in one call", "aligned.dra.output_files": {"dest": str(dest), "files": files, "prune": ["*.yaml"]}},
        {"name": "Each object as the template module writes it", "ansible.builtin.template":
            {"src": "object.yaml.j2", "dest": f"{reference}/{{{{ item.name }}}}", "mode": "0644"},
         "loop": "{{ objects }}", "when": "not ansible_check_mode", "changed_when": False},
    ]  # fmt: skip
    play = {"hosts": "localhost", "gather_facts": False, "vars": {"objects": OBJECTS, "site": "west"}, "tasks": tasks}
    return write_play(tmp_path / "play.yml", [play])


def test_templates_render_as_the_template_module_and_a_second_run_changes_nothing(tmp_path):
    dest, reference = tmp_path / "out" / "claims", tmp_path / "reference"
    reference.mkdir()
    play = project(tmp_path, dest, reference)
    dest.mkdir(parents=True)
    (dest / "claimtemplate-gone.yaml").write_text("an object no longer rendered\n")
    first = run_on_localhost(play)
    assert first.returncode == 0, first.output
    assert sorted(p.name for p in dest.iterdir()) == ["claimtemplate-pair.yaml", "deviceclass-gpu.yaml", "notes.md"]
    for entry in OBJECTS:
        assert (dest / entry["name"]).read_bytes() == (reference / entry["name"]).read_bytes()
    assert (
        "# Ansible managed\n# DeviceClass gpu for site west.\n# a class\nkind: DeviceClass"
        in (dest / "deviceclass-gpu.yaml").read_text()
    )
    assert oct((dest / "notes.md").stat().st_mode & 0o777) == "0o644"
    second = run_on_localhost(play)
    assert second.returncode == 0 and recap(second.stdout) == {"changed": 0, "failed": 0}, second.output


def test_check_mode_shows_each_file_s_diff_and_writes_nothing(tmp_path):
    dest, reference = tmp_path / "out" / "claims", tmp_path / "reference"
    play = project(tmp_path, dest, reference)
    dest.mkdir(parents=True)
    (dest / "deviceclass-gpu.yaml").write_text("old\n")
    (dest / "claimtemplate-gone.yaml").write_text("gone\n")
    result = run_on_localhost(play, "--check", "--diff")
    assert result.returncode == 0, result.output
    assert recap(result.stdout)["changed"] == 1
    assert f"--- before: {dest}/deviceclass-gpu.yaml" in result.stdout and "-old" in result.stdout
    assert f"+++ after: {dest}/claimtemplate-gone.yaml (removed)" in result.stdout
    assert "+kind: ResourceClaimTemplate" in result.stdout
    assert sorted(p.name for p in dest.iterdir()) == ["claimtemplate-gone.yaml", "deviceclass-gpu.yaml"]
    assert (dest / "deviceclass-gpu.yaml").read_text() == "old\n"


def test_bad_entries_fail_naming_the_entry_and_write_nothing(tmp_path):
    dest = tmp_path / "out"
    cases = {
        "a/b.yaml": [{"name": "a/b.yaml", "content": "x"}],
        "both": [{"name": "a.yaml", "content": "x", "template": "object.yaml.j2"}],
        "twice": [{"name": "a.yaml", "content": "x"}, {"name": "a.yaml", "content": "y"}],
        "missing template": [{"name": "a.yaml", "template": "nowhere.j2"}],
        "template not text": [{"name": "a.yaml", "template": 5}],
        "bad mode": [{"name": "a.yaml", "content": "x"}],
    }
    tasks = []
    for index, (label, files) in enumerate(cases.items()):
        arguments = {"dest": str(dest), "files": files, **({"mode": "rw-r--r--"} if label == "bad mode" else {})}
        tasks.append(
            {"name": label, "aligned.dra.output_files": arguments, "ignore_errors": True, "register": f"r{index}"}
        )
    messages = "{{ [" + ", ".join(f"r{i}.msg" for i in range(len(cases))) + "] }}"
    tasks.append(
        {"name": "Messages", "ansible.builtin.copy": {"content": messages, "dest": str(tmp_path / "msgs.json")}}
    )
    play = write_play(tmp_path / "play.yml", [{"hosts": "localhost", "gather_facts": False, "tasks": tasks}])
    result = run_on_localhost(play)
    assert result.returncode == 0, result.output
    assert recap(result.stdout)["failed"] == 0  # ignored failures are not counted as failed
    messages = json.loads((tmp_path / "msgs.json").read_text())
    assert messages[0] == "files[0] (a/b.yaml): name must be a plain file name, got 'a/b.yaml'"
    assert messages[1] == "files[0] (a.yaml): give exactly one of content and template"
    assert messages[2] == "files[1] (a.yaml): a.yaml is given twice"
    assert messages[3].startswith("files[0] (a.yaml): template: ") and "nowhere.j2" in messages[3]
    assert messages[4] == "files[0] (a.yaml): template must be the name of a template file"
    assert messages[5] == "mode: 'rw-r--r--' is not an octal mode such as '0644'"
    assert not dest.exists()
