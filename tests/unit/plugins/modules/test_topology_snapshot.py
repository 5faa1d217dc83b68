# SPDX-License-Identifier: Apache-2.0
"""aligned.dra.topology_snapshot: unpacks once, check mode, refuses what it must."""

from __future__ import annotations

import io
import json
import tarfile

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.aligned.dra.plugins.module_utils.node.snapshots import archive as snapshot
from ansible_collections.aligned.dra.plugins.modules import topology_snapshot

ENTRIES = {
    "sys/devices/pci0000:00/0000:00:03.0/vendor": ("file", b"0x8086\n"),
    "sys/bus/pci/devices/0000:00:03.0": ("link", "../../../devices/pci0000:00/0000:00:03.0"),
}


def run(capsys, args: dict) -> dict:
    with patch_module_args(args), pytest.raises(SystemExit):
        topology_snapshot.main()
    return json.loads(capsys.readouterr().out)


def test_unpack_once(tmp_path, capsys):
    archive = tmp_path / "node.tar.gz"
    archive.write_bytes(snapshot.write_archive(ENTRIES))
    dest = tmp_path / "cache" / "node"
    check = run(capsys, {"src": str(archive), "dest": str(dest), "_ansible_check_mode": True})
    assert check["changed"] is True and not (tmp_path / "cache").exists()
    first = run(capsys, {"src": str(archive), "dest": str(dest)})
    assert first["changed"] is True
    assert (first["sysfs_root"], first["procfs_root"]) == (str(dest / "sys"), str(dest / "proc"))
    assert (dest / "sys/bus/pci/devices/0000:00:03.0/vendor").read_text() == "0x8086\n"
    assert (dest / "proc").is_dir()
    assert run(capsys, {"src": str(archive), "dest": str(dest)})["changed"] is False
    assert run(capsys, {"src": str(archive), "dest": str(dest), "_ansible_check_mode": True})["changed"] is False


def test_an_unsafe_archive_fails_and_writes_nothing(tmp_path, capsys):
    archive = tmp_path / "evil.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name in ("sys", "sys/../../escape"):
            info = tarfile.TarInfo(name)
            info.type = tarfile.DIRTYPE if name == "sys" else tarfile.REGTYPE
            tar.addfile(info, io.BytesIO(b""))
    result = run(capsys, {"src": str(archive), "dest": str(tmp_path / "cache" / "node")})
    assert result["failed"] is True and result["msg"].startswith("src: ") and "'..'" in result["msg"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["evil.tar.gz"]


@pytest.mark.parametrize("make", ["file", "full-dir"])
def test_dest_that_is_not_ours_fails(tmp_path, capsys, make):
    archive = tmp_path / "node.tar.gz"
    archive.write_bytes(snapshot.write_archive(ENTRIES))
    dest = tmp_path / "dest"
    if make == "file":
        dest.write_text("x")
    else:
        dest.mkdir()
        (dest / "precious").write_text("keep\n")
    result = run(capsys, {"src": str(archive), "dest": str(dest)})
    assert result["failed"] is True and result["msg"].startswith("dest: ")
    assert dest.is_file() or (dest / "precious").read_text() == "keep\n"


def test_src_that_is_no_archive_fails(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("hello\n")
    for src in (tmp_path / "notes.txt", tmp_path / "missing.tar.gz", tmp_path):
        result = run(capsys, {"src": str(src), "dest": str(tmp_path / "cache")})
        assert result["failed"] is True and result["msg"].startswith("src: "), result["msg"]
    assert not (tmp_path / "cache").exists()
