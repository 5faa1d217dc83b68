# SPDX-License-Identifier: Apache-2.0
"""docs/images/site-report.png, the README's picture of the site report, shows today's templates.

The picture records the digest of the report's templates it was taken with (scripts/report_picture.py,
run by ``scripts/docs.sh --picture``); a clone gives every file the same mtime, so the digest, not the
files' times, says whether it is current. Read in this process: no browser, no playbook.
"""

from __future__ import annotations

import importlib.util
import shutil
import struct
import zlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
REGENERATE = "run scripts/docs.sh --picture and commit docs/images/site-report.png"

_spec = importlib.util.spec_from_file_location("report_picture", REPO / "scripts" / "report_picture.py")
picture = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(picture)


def chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def tiny_png(*extra: bytes) -> bytes:
    """A valid 1x1 grey PNG, with ``extra`` chunks after IHDR."""
    header = chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0))
    return picture.SIGNATURE + header + b"".join(extra) + chunk(b"IDAT", zlib.compress(b"\0\x80")) + chunk(b"IEND", b"")


def test_the_picture_is_a_png_of_the_first_screen_small_enough_for_the_readme():
    path = REPO / "docs" / "images" / "site-report.png"
    assert path.is_file(), REGENERATE
    png = path.read_bytes()
    assert picture.size(png) == picture.SIZE, REGENERATE
    assert len(png) < 300 * 1024
    assert "docs/images/site-report.png" in (REPO / "README.md").read_text()


def test_the_picture_shows_todays_templates():
    png = (REPO / "docs" / "images" / "site-report.png").read_bytes()
    recorded = picture.recorded_digest(png)
    assert recorded is not None, f"the picture records no templates' digest: {REGENERATE}"
    assert recorded == picture.templates_digest(), f"the report's templates changed since the picture: {REGENERATE}"


def test_the_digest_covers_every_template_and_its_name(tmp_path):
    copy = tmp_path / "report"
    shutil.copytree(picture.TEMPLATES, copy)
    assert picture.templates_digest(copy) == picture.templates_digest()
    assert (copy / "page.html.j2").read_text().count("<style>") == 1  # the stylesheet lives in a template
    for path in sorted(copy.glob("*.j2")):
        before = picture.templates_digest(copy)
        path.write_bytes(path.read_bytes() + b" ")
        assert picture.templates_digest(copy) != before, path.name
    before = picture.templates_digest(copy)
    (copy / "index.html.j2").rename(copy / "index2.html.j2")
    assert picture.templates_digest(copy) != before  # a renamed template
    before = picture.templates_digest(copy)
    (copy / "new.html.j2").write_text("")
    assert picture.templates_digest(copy) != before  # a new, empty one


def test_stamp_records_one_digest_and_keeps_the_image():
    png = tiny_png(chunk(b"tEXt", b"Software\0chromium"))
    assert picture.recorded_digest(png) is None
    once = picture.stamp(png, "sha256:aa")
    twice = picture.stamp(once, "sha256:bb")
    assert picture.recorded_digest(once) == "sha256:aa" and picture.recorded_digest(twice) == "sha256:bb"
    kinds = [c[0] for c in picture.chunks(twice)]
    assert kinds == [b"IHDR", b"tEXt", b"tEXt", b"IDAT", b"IEND"]  # one digest; the other text kept
    assert [c for c in picture.chunks(twice) if c[0] != b"tEXt"] == [c for c in picture.chunks(png) if c[0] != b"tEXt"]
    assert picture.size(twice) == (1, 1)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda png: b"GIF89a" + png[6:], "no PNG signature"),
        (lambda png: png[:-3], "truncated"),
        (lambda png: png[:20] + bytes([png[20] ^ 1]) + png[21:], "bad CRC"),
        (lambda png: png[:-12], "IEND last"),
    ],
    ids=["signature", "truncated", "crc", "no-iend"],
)
def test_a_damaged_png_is_refused(damage, message):
    with pytest.raises(ValueError, match=message):
        picture.chunks(damage(tiny_png()))
