# SPDX-License-Identifier: Apache-2.0
"""The benchmarks' smoke tests run each script as people do: a process of its own, from the repository root."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


def run_script(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``benchmarks/<name>.py`` with ``args`` as a process of its own, from the repository root, whatever it exits with."""
    return subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / f"{name}.py"), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture
def run_benchmark_process() -> Callable[..., subprocess.CompletedProcess[str]]:
    """:func:`run_script`, for a test that checks how a benchmark refuses its input."""
    return run_script


@pytest.fixture
def run_benchmark() -> Callable[..., str]:
    """Run ``benchmarks/<name>.py`` with ``args``; its standard output, once it has exited 0."""

    def run(name: str, *args: str) -> str:
        done = run_script(name, *args)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    return run
