#!/usr/bin/env python
# SPDX-License-Identifier: Apache-2.0
"""The README's picture of the site report: docs/images/site-report.png.

Usage (``scripts/docs.sh --picture`` runs it after the demo's ``playbooks/site.yml``)::

    .venv/bin/python scripts/report_picture.py OUTPUT_DIR [PNG]

Opens ``OUTPUT_DIR/ai-west/report.html`` (the demo's largest site) in headless
Chromium (``$ALIGNED_DRA_CHROMIUM``, else the first of ``chromium``,
``chromium-browser``, ``google-chrome`` on PATH), takes its first screen at
1280x900 and writes it to PNG (default docs/images/site-report.png) with one
``tEXt`` chunk: the digest of the report's templates (``TEMPLATES``; the
stylesheet is inline in ``page.html.j2``, and the pages carry no scripts).
A git clone gives every file the same mtime, so the picture says which
templates it shows by that digest; tests/unit/test_report_picture.py compares
it with the templates of the checkout.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PICTURE = REPO / "docs" / "images" / "site-report.png"
TEMPLATES = REPO / "roles" / "report" / "templates" / "report"
PAGE = Path("ai-west") / "report.html"
SIZE = (1280, 900)
KEYWORD = b"aligned.dra report templates"
SIGNATURE = b"\x89PNG\r\n\x1a\n"
CHROMIUM = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# The flags that keep Chromium off the network (as tests/support/harnesses/browser.py starts it).
FLAGS = (
    "--headless",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--mute-audio",
)


def templates_digest(templates: Path = TEMPLATES) -> str:
    """``sha256:<hex>`` over every template's name and bytes, in name order."""
    digest = hashlib.sha256()
    for path in sorted(templates.rglob("*")):
        if path.is_file():
            name = path.relative_to(templates).as_posix().encode()
            body = path.read_bytes()
            digest.update(struct.pack(">I", len(name)) + name + struct.pack(">Q", len(body)) + body)
    return "sha256:" + digest.hexdigest()


def chunks(png: bytes) -> list[tuple[bytes, bytes]]:
    """``[(type, data)]`` of a PNG, each chunk's CRC checked; ValueError when it is not one."""
    if not png.startswith(SIGNATURE):
        raise ValueError("not a PNG: no PNG signature")
    found, offset = [], len(SIGNATURE)
    while offset < len(png):
        length = struct.unpack(">I", png[offset : offset + 4])[0] if offset + 4 <= len(png) else 0
        if offset + 12 + length > len(png):
            raise ValueError(f"truncated chunk at byte {offset}")
        kind, data = png[offset + 4 : offset + 8], png[offset + 8 : offset + 8 + length]
        (crc,) = struct.unpack(">I", png[offset + 8 + length : offset + 12 + length])
        if zlib.crc32(kind + data) != crc:
            raise ValueError(f"chunk {kind!r} at byte {offset}: bad CRC")
        found.append((kind, data))
        offset += 12 + length
    if not found or found[0][0] != b"IHDR" or found[-1][0] != b"IEND":
        raise ValueError("not a PNG: IHDR first and IEND last expected")
    return found


def size(png: bytes) -> tuple[int, int]:
    """Width and height from the IHDR chunk."""
    return struct.unpack(">II", chunks(png)[0][1][:8])


def recorded_digest(png: bytes) -> str | None:
    """The templates' digest a picture records, or None."""
    for kind, data in chunks(png):
        if kind == b"tEXt" and data.startswith(KEYWORD + b"\0"):
            return data[len(KEYWORD) + 1 :].decode("latin-1")
    return None


def stamp(png: bytes, digest: str) -> bytes:
    """``png`` with its templates' digest as the one ``tEXt`` chunk of KEYWORD, right after IHDR."""
    kept = [(k, d) for k, d in chunks(png) if not (k == b"tEXt" and d.startswith(KEYWORD + b"\0"))]
    kept.insert(1, (b"tEXt", KEYWORD + b"\0" + digest.encode("latin-1")))
    out = [SIGNATURE]
    for kind, data in kept:
        out.append(struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data)))
    return b"".join(out)


def find_chromium() -> str:
    explicit = os.environ.get("ALIGNED_DRA_CHROMIUM")
    found = explicit if explicit else next(filter(None, map(shutil.which, CHROMIUM)), None)
    if not found or not os.access(found, os.X_OK):
        raise SystemExit("report_picture: no Chromium: install the Debian package chromium (scripts/bootstrap.sh does)")
    return found


def screenshot(page: Path, chromium: str) -> bytes:
    """The first screen (SIZE) of ``page`` as Chromium's PNG."""
    with tempfile.TemporaryDirectory(prefix="aligned-dra-picture-") as tmp:
        shot = Path(tmp) / "shot.png"
        args = [chromium, *FLAGS, f"--user-data-dir={tmp}/profile", f"--window-size={SIZE[0]},{SIZE[1]}"]
        if os.geteuid() == 0:
            args.append("--no-sandbox")  # Chromium refuses to start as root otherwise
        args += [f"--screenshot={shot}", page.resolve().as_uri()]
        run = subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, check=False)
        if run.returncode != 0 or not shot.is_file():
            raise SystemExit(f"report_picture: chromium failed ({run.returncode}):\n{run.stdout}{run.stderr}")
        return shot.read_bytes()


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2):
        print(__doc__, file=sys.stderr)
        return 2
    page = Path(argv[0]) / PAGE
    if not page.is_file():
        print(f"report_picture: {page} is missing: run playbooks/site.yml on inventories/demo first", file=sys.stderr)
        return 1
    target = Path(argv[1]) if len(argv) == 2 else PICTURE
    picture = stamp(screenshot(page, find_chromium()), templates_digest())
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(picture)
    print(f"report_picture: {target} ({len(picture) // 1024} KiB, {'x'.join(map(str, size(picture)))})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
