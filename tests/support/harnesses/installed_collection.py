# SPDX-License-Identifier: Apache-2.0
"""TEST HELPER: the collection as users get it - a built tarball installed into a
collections path of its own, with kubernetes.core beside it. Never shipped.

Galaxy is unreachable here: kubernetes.core is installed from the copy that
scripts/bootstrap.sh took out of the ``ansible`` wheel (``.cache/collections``),
built into a tarball of its own first, so it is installed the way a user's
offline install does it (``ansible-galaxy collection install <tarball>``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
BUNDLED = REPO / ".cache" / "collections" / "ansible_collections"


def run(*command: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run ``command``; fail with its output when it fails."""
    result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd, check=False)
    if result.returncode != 0:
        raise AssertionError(f"{' '.join(command)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
    return result


# Built tarballs, one per state of the checkout: the files that build it, their sizes and
# modification times. The tests of one run (on every xdist worker) share the first build.
BUILDS = REPO / ".cache" / "tests" / "collection-builds"


def checkout_state() -> str:
    """A digest of every file a build reads (tracked and untracked, not ignored): path, size, mtime."""
    listed = run("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=REPO).stdout
    digest = hashlib.sha256()
    for name in sorted(set(filter(None, listed.split("\0")))):
        try:
            stat = (REPO / name).lstat()
        except FileNotFoundError:  # deleted, not yet staged
            continue
        digest.update(f"{name}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def build(dest: Path) -> Path:
    """The tarball ``ansible-galaxy collection build`` makes of this checkout, copied into ``dest``; its path.

    Built once per state of the checkout: later calls (other test files, other workers) copy it.
    """
    dest.mkdir(parents=True, exist_ok=True)
    shared = BUILDS / checkout_state()
    if not shared.is_dir():
        BUILDS.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkdtemp(prefix=".partial-", dir=BUILDS))
        try:
            run("ansible-galaxy", "collection", "build", "--force", "--output-path", str(partial), str(REPO))
            partial.rename(shared)  # atomic: another worker's build may have landed first
        except OSError:
            pass
        finally:
            shutil.rmtree(partial, ignore_errors=True)
    (built,) = shared.glob("aligned-dra-*.tar.gz")
    artifact = dest / built.name
    shutil.copyfile(built, artifact)
    return artifact


def kubernetes_core_tarball(dest: Path) -> Path:
    """kubernetes.core as a tarball, rebuilt from the installed copy (what ``collection download`` gives)."""
    dest.mkdir(parents=True, exist_ok=True)
    source = BUNDLED / "kubernetes" / "core"
    if not (source / "MANIFEST.json").is_file():
        raise AssertionError(f"{source} is missing: run scripts/bootstrap.sh")
    # An installed collection has MANIFEST.json instead of galaxy.yml: build from a copy with one.
    import json

    import yaml

    info = json.loads((source / "MANIFEST.json").read_text())["collection_info"]
    work = dest / "kubernetes-core-src"
    if not work.exists():
        run("cp", "-a", str(source), str(work))
        (work / "MANIFEST.json").unlink()
        (work / "FILES.json").unlink(missing_ok=True)
        galaxy = {
            key: info[key]
            for key in ("namespace", "name", "version", "authors", "description", "license", "dependencies")
            if info.get(key) is not None
        }
        galaxy["readme"] = "README.md"
        (work / "galaxy.yml").write_text(yaml.safe_dump(galaxy))
    run("ansible-galaxy", "collection", "build", "--force", "--output-path", str(dest), str(work))
    (artifact,) = dest.glob("kubernetes-core-*.tar.gz")
    return artifact


def install(tarballs: list[Path], collections_path: Path) -> Path:
    """Install tarballs offline (no dependency resolution against Galaxy) into ``collections_path``."""
    run(
        "ansible-galaxy",
        "collection",
        "install",
        "--offline",
        "--force",
        "-p",
        str(collections_path),
        *map(str, tarballs),
    )
    return collections_path


def project_env(collections_path: Path, project: Path) -> dict[str, str]:
    """Environment of a user's project: only the installed collections, the project's ansible.cfg."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(ANSIBLE_COLLECTIONS_PATH=str(collections_path), ANSIBLE_CONFIG=str(project / "ansible.cfg"))
    return env
