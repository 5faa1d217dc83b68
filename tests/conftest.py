"""Shared pytest set-up for tests/unit and tests/integration.

The paths below are the ones scripts/bootstrap.sh prepares; its environment
(ANSIBLE_COLLECTIONS_PATH, ANSIBLE_CONFIG, CONTAINERS_CONF, PATH with .venv/bin)
is exported by scripts/test.sh, and filled in here when pytest is run directly.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
CACHE = REPO_ROOT / ".cache"
COLLECTIONS_PATH = CACHE / "collections"
COLLECTION_LINK = COLLECTIONS_PATH / "ansible_collections" / "aligned" / "dra"
CONTAINERS_CONF = CACHE / "containers" / "containers.conf"
NODE_IMAGE = "localhost/aligned-dra-node:bookworm"
VENV_BIN = Path(sys.executable).parent

if not COLLECTION_LINK.is_dir():
    raise pytest.UsageError(f"{COLLECTION_LINK} is missing: run scripts/bootstrap.sh (or scripts/test.sh) first")

# Same environment as scripts/bootstrap.sh exports, for `pytest` run by hand.
os.environ.setdefault("ANSIBLE_COLLECTIONS_PATH", str(COLLECTIONS_PATH))
os.environ.setdefault("ANSIBLE_CONFIG", str(REPO_ROOT / "ansible.cfg"))
os.environ.setdefault("CONTAINERS_CONF", str(CONTAINERS_CONF))
if str(VENV_BIN) not in os.environ.get("PATH", "").split(os.pathsep):
    os.environ["PATH"] = f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"


def _podman_ready() -> bool:
    if shutil.which("podman") is None:
        return False
    probe = subprocess.run(["podman", "image", "exists", NODE_IMAGE], capture_output=True, check=False)
    return probe.returncode == 0


def _chromium() -> str | None:
    from ansible_collections.aligned.dra.tests.support.harnesses.browser import find_chromium

    return find_chromium()


def _suite_timing():
    # Imported on first use: the collection link checked above makes it importable.
    from ansible_collections.aligned.dra.tests.support import suite_timing

    return suite_timing


def _fuzz_profiles():
    # Imported on first use, as above.
    from ansible_collections.aligned.dra.tests.support.fuzzing import profiles

    return profiles


def pytest_configure(config: pytest.Config) -> None:
    """The suite's clock (tests/support/suite_timing.py): each test phase's CPU (this process and the
    children it reaped: ansible-playbook, the driver) on its report, the seconds and CPU added up by file
    where the reports arrive (xdist's controller), written where scripts/test.sh asks. The fuzzing
    profile (tests/support/fuzzing/profiles.py), loaded in every process, xdist's workers included:
    a wrong ALIGNED_DRA_FUZZ_PROFILE or ALIGNED_DRA_FUZZ_SCALE stops the run before collection."""
    try:
        _fuzz_profiles().load_profile()
    except ValueError as error:
        raise pytest.UsageError(str(error)) from None
    _cache_kubernetes_schemas()
    config.pluginmanager.register(_suite_timing().FileClock(), "aligned_dra_suite_timing")


def _cache_kubernetes_schemas() -> None:
    """kubernetes_validate reads and parses a kind's JSON schema and the version's 1.5 MB of definitions on
    every validate() call (about three quarters of its time); the tests validate thousands of objects of a
    few kinds, so each file is parsed once per process here. Read only: the schemas are never changed."""
    from kubernetes_validate import utils

    if not hasattr(utils.schema_contents, "cache_info"):
        utils.schema_contents = functools.cache(utils.schema_contents)


def pytest_report_header(config: pytest.Config) -> str:
    """``fuzzing profile: quick (5 % of each property's examples)`` under pytest's own header."""
    return _fuzz_profiles().describe()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Slowest files first (tests/support/suite_timing.py); skip, with the reason, tests whose real component is unavailable."""
    timing = _suite_timing()
    timing.slowest_files_first(items, timing.read_durations(timing.COMMITTED, timing.LAST_RUN))
    needs_podman = [item for item in items if item.get_closest_marker("podman")]
    if needs_podman and not _podman_ready():
        skip = pytest.mark.skip(reason=f"podman or {NODE_IMAGE} missing: run scripts/bootstrap.sh")
        for item in needs_podman:
            item.add_marker(skip)
    needs_browser = [item for item in items if item.get_closest_marker("browser")]
    if needs_browser and _chromium() is None:
        skip = pytest.mark.skip(
            reason="no Chromium: install the Debian package chromium (scripts/bootstrap.sh does) "
            "or point ALIGNED_DRA_CHROMIUM at one"
        )
        for item in needs_browser:
            item.add_marker(skip)
    if os.geteuid() != 0:
        skip = pytest.mark.skip(reason="network namespaces need root")
        for item in items:
            if item.get_closest_marker("netns"):
                item.add_marker(skip)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The checkout (also importable as ansible_collections.aligned.dra)."""
    return REPO_ROOT


@pytest.fixture(scope="session")
def ansible_env() -> dict[str, str]:
    """Environment for running ansible-playbook & co. in a subprocess."""
    return dict(os.environ)


@pytest.fixture(scope="session")
def node_image() -> str:
    """The offline podman node image (systemd as PID 1, python3)."""
    return NODE_IMAGE


@pytest.fixture(scope="module")
def layouts():
    """``layouts(name)``: the probe's topology of a fixture tree (real snapshot or layout), probed once per
    module, of the tree in .cache/sysfs (scripts/test.sh materializes them all before the tests start;
    materialize() only checks the tree's stamp then, and builds it when the sources changed)."""
    from ansible_collections.aligned.dra.plugins.module_utils.node.topology import probe
    from ansible_collections.aligned.dra.tests.fixtures.materialize import materialize

    cache: dict[str, dict] = {}

    def get(name: str) -> dict:
        if name not in cache:
            root = materialize(name, CACHE / "sysfs")
            cache[name] = probe(str(root / "sys"), str(root / "proc"))
        return cache[name]

    return get
