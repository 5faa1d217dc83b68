# SPDX-License-Identifier: Apache-2.0
"""output_files: a directory made to hold exactly the files given (written when they change, their
mode set, files of the prune patterns that are no longer given removed, nothing else touched), check
mode that reports and changes nothing, and errors that name the option."""

from __future__ import annotations

import os

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.output_files import (
    OutputFileError,
    file_contents,
    is_file_name,
    parse_mode,
    write_directory,
    write_text_file,
)


def mode_of(path) -> int:
    return os.stat(path).st_mode & 0o7777


def test_a_new_directory_gets_its_files_with_their_modes_and_a_diff_per_file(tmp_path):
    directory = tmp_path / "west" / "claims"
    outcome = write_directory(str(directory), {"b.yaml": "b\n", "a.yaml": "a\n"}, False, ["*.yaml"], 0o640, 0o750)
    assert outcome["written"] == [f"{directory}/", f"{directory}/a.yaml", f"{directory}/b.yaml"]
    assert outcome["removed"] == []
    assert (directory / "a.yaml").read_text() == "a\n" and mode_of(directory / "a.yaml") == 0o640
    assert mode_of(directory) == 0o750
    assert [d["after_header"] for d in outcome["diff"]] == [f"{directory}/a.yaml", f"{directory}/b.yaml"]
    assert outcome["diff"][0]["before"] == "" and outcome["diff"][0]["after"] == "a\n"
    assert not list(directory.glob("*.tmp"))


def test_a_second_call_changes_nothing_and_leaves_the_files_alone(tmp_path):
    files = {"a.yaml": "a\n", "kustomization.yaml": "k\n"}
    write_directory(str(tmp_path / "d"), files, False, ["*.yaml"], 0o644, 0o755)
    stamp = (tmp_path / "d" / "a.yaml").stat().st_mtime_ns
    assert write_directory(str(tmp_path / "d"), files, False, ["*.yaml"], 0o644, 0o755) == {
        "written": [],
        "removed": [],
        "diff": [],
    }
    assert (tmp_path / "d" / "a.yaml").stat().st_mtime_ns == stamp


def test_only_files_of_the_prune_patterns_that_are_no_longer_given_are_removed(tmp_path):
    directory = tmp_path / "d"
    directory.mkdir()
    (directory / "gone.yaml").write_text("old object\n")
    (directory / "notes.txt").write_text("the user's\n")
    (directory / "sub.yaml").mkdir()  # a directory is never removed
    outcome = write_directory(str(directory), {"kept.yaml": "k\n"}, False, ["*.yaml"], 0o644, None)
    assert outcome["removed"] == [str(directory / "gone.yaml")]
    assert sorted(p.name for p in directory.iterdir()) == ["kept.yaml", "notes.txt", "sub.yaml"]
    removal = outcome["diff"][-1]
    assert removal["before"] == "old object\n" and removal["after"] == ""
    assert removal["after_header"].endswith("(removed)")


def test_without_prune_patterns_nothing_is_removed(tmp_path):
    (tmp_path / "other.yaml").write_text("x")
    assert write_directory(str(tmp_path), {"a.yaml": "a"}, False)["removed"] == []
    assert (tmp_path / "other.yaml").exists()


def test_a_mode_that_alone_differs_is_set_and_reported_without_a_content_diff(tmp_path):
    dest = tmp_path / "a.yaml"
    dest.write_text("a\n")
    dest.chmod(0o600)
    assert write_text_file(str(dest), "a\n", False, mode=0o644) == (True, {})
    assert mode_of(dest) == 0o644
    assert write_text_file(str(dest), "a\n", False, mode=0o644) == (False, {})
    # no mode: an existing file's is left alone
    dest.chmod(0o600)
    assert write_text_file(str(dest), "a\n", False) == (False, {})


def test_an_existing_directory_keeps_its_mode_when_none_is_given(tmp_path):
    tmp_path.chmod(0o711)
    outcome = write_directory(str(tmp_path), {"index.json": "{}\n"}, False, [], 0o644, None)
    assert outcome["written"] == [str(tmp_path / "index.json")]
    assert mode_of(tmp_path) == 0o711
    outcome = write_directory(str(tmp_path), {"index.json": "{}\n"}, False, [], 0o644, 0o755)
    assert outcome["written"] == [f"{tmp_path}/"] and mode_of(tmp_path) == 0o755


def test_check_mode_reports_writes_and_removals_and_changes_nothing(tmp_path):
    directory = tmp_path / "d"
    directory.mkdir()
    (directory / "a.yaml").write_text("old\n")
    (directory / "gone.yaml").write_text("gone\n")
    outcome = write_directory(str(directory), {"a.yaml": "new\n", "b.yaml": "b\n"}, True, ["*.yaml"], 0o644, None)
    assert outcome["written"] == [str(directory / "a.yaml"), str(directory / "b.yaml")]
    assert outcome["removed"] == [str(directory / "gone.yaml")]
    assert outcome["diff"][0] == {
        "before": "old\n",
        "after": "new\n",
        "before_header": str(directory / "a.yaml"),
        "after_header": str(directory / "a.yaml"),
    }
    assert sorted(p.name for p in directory.iterdir()) == ["a.yaml", "gone.yaml"]
    assert (directory / "a.yaml").read_text() == "old\n"
    missing = tmp_path / "new"
    assert write_directory(str(missing), {"x": "x"}, True)["written"] == [f"{missing}/", str(missing / "x")]
    assert not missing.exists()


def test_a_file_of_other_bytes_is_replaced(tmp_path):
    dest = tmp_path / "a.yaml"
    dest.write_bytes(b"\xff\xfe binary")
    changed, diff = write_text_file(str(dest), "text\n", False)
    assert changed and dest.read_text() == "text\n" and diff["after"] == "text\n"


@pytest.mark.parametrize("name", ["", ".", "..", "a/b.yaml", "x.tmp", "nul\0", None, 3])
def test_names_that_are_not_plain_file_names_are_refused_before_anything_is_written(tmp_path, name):
    assert not is_file_name(name)
    with pytest.raises(OutputFileError, match="files: not a plain file name"):
        write_directory(str(tmp_path / "d"), {"good.yaml": "g", name: "x"}, False)
    assert not (tmp_path / "d").exists()


def test_a_file_where_the_directory_should_be_is_named(tmp_path):
    (tmp_path / "claims").write_text("a file")
    with pytest.raises(OutputFileError, match=r"^dest: cannot create .*claims: Not a directory"):
        write_directory(str(tmp_path / "claims"), {"a.yaml": "a"}, False)
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.yaml").mkdir()
    with pytest.raises(OutputFileError, match=r"^files: cannot write .*a.yaml: Is a directory"):
        write_directory(str(tmp_path / "d"), {"a.yaml": "a"}, True)


@pytest.mark.parametrize(
    ("value", "mode"), [("0644", 0o644), ("755", 0o755), (0o600, 0o600), (None, None), ("preserve", None)]
)
def test_modes_read_as_octal_text_or_numbers(value, mode):
    assert parse_mode(value, "mode") == mode


@pytest.mark.parametrize("value", ["rw-r--r--", "0999", "-1", 0o17777, True, [], 420.0])
def test_a_mode_that_is_not_octal_is_refused_naming_the_option(value):
    with pytest.raises(ValueError, match="^directory_mode: .* is not an octal mode"):
        parse_mode(value, "directory_mode")


def test_a_symbolic_link_is_replaced_by_a_file_never_written_through(tmp_path):
    target = tmp_path / "elsewhere.yaml"
    target.write_text("a\n")
    target.chmod(0o600)
    (tmp_path / "d").mkdir()
    link = tmp_path / "d" / "a.yaml"
    link.symlink_to(target)
    outcome = write_directory(str(tmp_path / "d"), {"a.yaml": "a\n"}, False, [], 0o644, None)
    assert outcome["written"] == [str(link)]
    assert not link.is_symlink() and link.read_text() == "a\n"
    assert target.read_text() == "a\n" and mode_of(target) == 0o600  # the link's target is left alone
    dangling = tmp_path / "d" / "b.yaml"
    dangling.symlink_to(tmp_path / "missing")
    assert write_text_file(str(dangling), "b\n", False)[0]
    assert not dangling.is_symlink() and dangling.read_text() == "b\n"


def test_line_ends_are_compared_as_they_are_on_disk(tmp_path):
    dest = tmp_path / "a.yaml"
    dest.write_bytes(b"a\r\nb\r\n")
    changed, diff = write_text_file(str(dest), "a\nb\n", False)
    assert changed and dest.read_bytes() == b"a\nb\n"
    assert write_text_file(str(dest), "a\nb\n", False) == (False, {})
    assert write_text_file(str(dest), "a\r\n", False)[0] and dest.read_bytes() == b"a\r\n"
    assert write_text_file(str(dest), "a\r\n", False) == (False, {})


def test_without_a_mode_a_replaced_file_keeps_its_own(tmp_path):
    dest = tmp_path / "summary.json"
    dest.write_text("old\n")
    dest.chmod(0o640)
    assert write_text_file(str(dest), "new\n", False)[0]
    assert dest.read_text() == "new\n" and mode_of(dest) == 0o640


def test_pruning_leaves_hidden_files_links_and_directories_and_removes_unreadable_files(tmp_path):
    directory = tmp_path / "d"
    directory.mkdir()
    (directory / ".hidden.yaml").write_text("h\n")
    (directory / "link.yaml").symlink_to(tmp_path / "target.yaml")
    (tmp_path / "target.yaml").write_text("t\n")
    (directory / "binary.yaml").write_bytes(b"\xff\xfe\x00")
    outcome = write_directory(str(directory), {}, False, ["*.yaml"])
    assert outcome["removed"] == [str(directory / "binary.yaml")]
    assert sorted(p.name for p in directory.iterdir()) == [".hidden.yaml", "link.yaml"]
    assert (tmp_path / "target.yaml").exists()


def test_entries_are_checked_and_a_template_needs_a_renderer():
    files = [{"name": "a.yaml", "content": "a\n"}, {"name": "b.yaml", "template": "object.yaml.j2", "object": 1}]
    rendered = file_contents(files, lambda entry, where: f"{where}: {entry['object']}\n")
    assert rendered == {"a.yaml": "a\n", "b.yaml": "files[1] (b.yaml): 1\n"}
    with pytest.raises(ValueError, match=r"^files\[1\] \(b.yaml\): a template is rendered by the action plugin only"):
        file_contents(files)
    with pytest.raises(ValueError, match=r"^files\[1\] \(a.yaml\): a.yaml is given twice$"):
        file_contents([files[0], files[0]])
    with pytest.raises(ValueError, match=r"^files\[0\]: name must be a plain file name, got None$"):
        file_contents(["not a mapping"])
