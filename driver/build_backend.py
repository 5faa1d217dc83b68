# SPDX-License-Identifier: Apache-2.0
"""PEP 517 build backend of the driver wheel (standard library only, works offline).

The wheel holds ``aligned_dra_driver/`` (the .proto files and the committed
generated code included) and, as ``aligned_dra_driver/_collection/``, the
collection's ``plugins/module_utils/node/topology/``, ``plugins/module_utils/node/mig/``
and ``plugins/module_utils/dra/`` packages (with the ``__init__.py`` of ``node/``), read from the checkout at build
time: one source file each, never a second copy in git.

    .venv/bin/pip wheel --no-deps -w dist driver/
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import zipfile
from pathlib import Path

import tomllib

HERE = Path(__file__).resolve().parent
PACKAGE = "aligned_dra_driver"
# Packages (directories: every .py file in them), relative to module_utils; the
# __init__.py of every package above one is carried too.
SHARED = ("node/topology", "node/mig", "dra")
# The collection imports its libraries by their collection path
# (``from ansible_collections.aligned.dra.plugins.module_utils[.x] import``);
# inside the wheel they are siblings in ``_collection``.
COLLECTION_IMPORT = re.compile(
    rb"^([ \t]*)from ansible_collections\.aligned\.dra\.plugins\.module_utils((?:\.\w+)*) import ", re.M
)
SHARED_DIR = HERE.parent / "plugins" / "module_utils"


def _project() -> dict:
    with open(HERE / "pyproject.toml", "rb") as handle:
        return tomllib.load(handle)["project"]


def _files() -> list[tuple[str, bytes]]:
    files = []
    for path in sorted((HERE / PACKAGE).rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix in (".py", ".proto"):
            files.append((path.relative_to(HERE).as_posix(), path.read_bytes()))
    files.append(
        (
            f"{PACKAGE}/_collection/__init__.py",
            b'"""The aligned.dra collection\'s shared libraries, copied in when the wheel was built."""\n',
        )
    )
    sources: list[Path] = []
    for name in SHARED:
        package = SHARED_DIR / name
        found = sorted(package.glob("*.py")) if package.is_dir() else []
        if not found:
            raise FileNotFoundError(f"{package} is missing: the driver is built from a collection checkout")
        for parent in Path(name).parents:
            if parent != Path(".") and SHARED_DIR / parent / "__init__.py" not in sources:
                sources.append(SHARED_DIR / parent / "__init__.py")
        sources += found
    for path in sources:
        relative = path.relative_to(SHARED_DIR)
        files.append(
            (f"{PACKAGE}/_collection/{relative.as_posix()}", vendored(path.read_bytes(), len(relative.parts) - 1))
        )
    return files


def vendored(source: bytes, depth: int = 0) -> bytes:
    """A shared library as the wheel holds it: collection imports become relative ones.

    ``depth`` is how many packages below ``_collection`` the file is (2 in
    ``node/topology/``): its relative imports climb that much higher.
    """
    dots = b"." * (depth + 1)
    return COLLECTION_IMPORT.sub(lambda match: match[1] + b"from " + dots + match[2][1:] + b" import ", source)


def _metadata(project: dict) -> bytes:
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {project['name']}",
        f"Version: {project['version']}",
        f"Summary: {project['description']}",
        f"License: {project['license']}",
        f"Requires-Python: {project['requires-python']}",
    ]
    lines += [f"Requires-Dist: {dep}" for dep in project.get("dependencies", [])]
    for extra, deps in sorted(project.get("optional-dependencies", {}).items()):
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {dep}; extra == "{extra}"' for dep in deps]
    return ("\n".join(lines) + "\n").encode()


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def build_wheel(
    wheel_directory: str, config_settings: dict | None = None, metadata_directory: str | None = None
) -> str:
    project = _project()
    dist = project["name"].replace("-", "_")
    version = project["version"]
    info = f"{dist}-{version}.dist-info"
    wheel_name = f"{dist}-{version}-py3-none-any.whl"
    entries = _files()
    scripts = project.get("scripts", {})
    entries.append((f"{info}/METADATA", _metadata(project)))
    entries.append(
        (
            f"{info}/WHEEL",
            b"Wheel-Version: 1.0\nGenerator: aligned-dra build_backend\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
    )
    entries.append(
        (
            f"{info}/entry_points.txt",
            ("[console_scripts]\n" + "".join(f"{k} = {v}\n" for k, v in scripts.items())).encode(),
        )
    )
    record = [_record_line(name, data) for name, data in entries] + [f"{info}/RECORD,,"]
    entries.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode()))
    os.makedirs(wheel_directory, exist_ok=True)
    path = os.path.join(wheel_directory, wheel_name)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries:
            stamp = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            stamp.external_attr = 0o644 << 16
            stamp.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(stamp, data)
    return wheel_name


def get_requires_for_build_wheel(config_settings: dict | None = None) -> list[str]:
    return []
