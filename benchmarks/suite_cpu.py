#!/usr/bin/env python
# SPDX-License-Identifier: Apache-2.0
"""Do the tests cost more CPU than they did at an earlier commit?

A machine's speed drifts by a fifth over hours, so two runs of the suite made
at different times cannot say whether a change made it dearer. This runs the
same test files at a baseline commit and in this checkout side by side: one
pytest process per tree (``-n 0``), both started together, so both see the same
machine. Each process's CPU is its own and that of the children it reaped
(ansible-playbook, the driver; not podman's containers), from ``wait4``.

The baseline is a git worktree of ``--baseline`` in a temporary folder (with
``shared/`` beside it where the checkout has one), using this checkout's
``.venv`` and bundled collections. Both trees run under the environment
``scripts/test.sh`` gives its pytest stage, each with its own collection and
``ansible.cfg`` (an inherited ``ANSIBLE_COLLECTIONS_PATH`` would run this
checkout's roles in the baseline too): bytecode cached in each tree's
``.cache/pycache`` (``PYTHONDONTWRITEBYTECODE`` dropped), the ``full`` fuzzing
profile. Run at least two rounds: the first also compiles each tree's bytecode.
A file that fails in either tree stops the run with the end of its log.

It prints, per round and file, the CPU seconds of the baseline and of this
tree and their ratio, then the ratio of the sums. Target: this tree at most
1.0x the baseline (no more CPU than before).

Run: ``.venv/bin/python benchmarks/suite_cpu.py --baseline REV [--rounds 2] FILE...``
(after ``scripts/bootstrap.sh``; test files or folders, relative to the repository root).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
COLLECTIONS = Path(".cache") / "collections" / "ansible_collections"


def git(*args: str, cwd: Path = REPO) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def add_baseline(revision: str, parent: Path) -> Path:
    """A worktree of ``revision`` at ``parent/main``, wired to this checkout's venv and bundled collections;
    removed again if wiring it fails."""
    tree = parent / "main"
    git("worktree", "add", "--detach", "--quiet", str(tree), revision)
    try:
        shared = REPO.parent / "shared"
        if shared.is_dir():
            (parent / "shared").symlink_to(shared)
        (tree / ".venv").symlink_to(REPO / ".venv")
        collections = tree / COLLECTIONS
        (collections / "aligned").mkdir(parents=True)
        # the collection under the name ansible wants, relative as scripts/bootstrap.sh makes it
        (collections / "aligned" / "dra").symlink_to(Path("..") / ".." / ".." / "..")
        for bundled in sorted((REPO / COLLECTIONS).iterdir()):
            if bundled.name != "aligned":
                (collections / bundled.name).symlink_to(bundled)
    except OSError:
        git("worktree", "remove", "--force", str(tree))
        raise
    return tree


def pytest_environment(tree: Path, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """What scripts/test.sh gives its pytest stage, for ``tree``: its own collection and ansible.cfg (an
    inherited ANSIBLE_COLLECTIONS_PATH would load the checkout's roles in the baseline too), podman's
    configuration of this checkout, bytecode cached in the tree's .cache, the full profile; no timings file
    (the run's figures are not a suite run's). ``environ``: the caller's, ``os.environ`` unless given."""
    dropped = {"PYTHONDONTWRITEBYTECODE", "ALIGNED_DRA_TIMINGS"}
    environment = {k: v for k, v in (os.environ if environ is None else environ).items() if k not in dropped}
    environment["ANSIBLE_COLLECTIONS_PATH"] = str(tree / ".cache" / "collections")
    environment["ANSIBLE_CONFIG"] = str(tree / "ansible.cfg")
    environment["CONTAINERS_CONF"] = str(REPO / ".cache" / "containers" / "containers.conf")
    environment["PYTHONPYCACHEPREFIX"] = str(tree / ".cache" / "pycache")
    environment["ALIGNED_DRA_FUZZ_PROFILE"] = "full"
    return environment


def tail(path: Path, lines: int = 15) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def run_side_by_side(trees: dict[str, Path], test_file: str, logs: Path) -> dict[str, float]:
    """CPU seconds of one pytest process per tree on ``test_file``, all started at once; RuntimeError with
    the end of each failed tree's log when any fails."""
    command = [str(REPO / ".venv" / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0"]
    running: dict[int, tuple[str, subprocess.Popen[bytes], Path]] = {}
    cpu: dict[str, float] = {}
    failed = []
    try:
        for name, tree in trees.items():
            log = logs / f"{name.replace(' ', '-')}-{test_file.replace('/', '_')}.log"
            with log.open("w") as out:
                process = subprocess.Popen(
                    [*command, test_file], cwd=tree, env=pytest_environment(tree), stdout=out, stderr=subprocess.STDOUT
                )
            running[process.pid] = (name, process, log)
        while running:
            pid, status, usage = os.wait4(-1, 0)
            if pid not in running:
                continue
            name, process, log = running.pop(pid)
            process.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait for it
            if process.returncode != 0:
                failed.append(f"{name} (exit {process.returncode}), the end of its log:\n{tail(log)}")
            cpu[name] = usage.ru_utime + usage.ru_stime
    finally:
        for _name, process, _log in running.values():
            process.kill()
            process.wait()
    if failed:
        raise RuntimeError(f"{test_file} failed in {'; '.join(failed)}\nCPU of a failed run is not comparable")
    return cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="the commit to compare with (any git revision)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("files", nargs="+", help="test files or folders, relative to the repository root")
    args = parser.parse_args(argv)
    missing = [name for name in args.files if not (REPO / name).exists()]
    if missing or args.rounds < 1:
        parser.error(
            f"no such test file or folder in this checkout: {', '.join(missing)}"
            if missing
            else f"--rounds must be at least 1 (got {args.rounds})"
        )
    try:
        baseline = git("rev-parse", "--verify", f"{args.baseline}^{{commit}}")
    except subprocess.CalledProcessError:
        parser.error(f"--baseline {args.baseline!r} is not a commit of this repository")
    with tempfile.TemporaryDirectory(prefix="suite-cpu-") as scratch:
        tree = add_baseline(baseline, Path(scratch))
        try:
            absent = [name for name in args.files if not (tree / name).exists()]
            if absent:
                print(f"not at the baseline {baseline[:12]}: {', '.join(absent)}", file=sys.stderr)
                return 2
            return report(args.files, args.rounds, {"baseline": tree, "this tree": REPO}, baseline, Path(scratch))
        finally:
            git("worktree", "remove", "--force", str(tree))


def report(files: list[str], rounds: int, trees: dict[str, Path], baseline: str, scratch: Path) -> int:
    print(f"baseline {baseline[:12]} against this tree ({git('rev-parse', '--short', 'HEAD')}, working tree)")
    print(f"load at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; CPU seconds, user + system")
    print(f"{'round':>5}  {'file':<60} {'baseline':>9} {'this tree':>10} {'ratio':>6}")
    sums = {"baseline": 0.0, "this tree": 0.0}
    for number in range(1, rounds + 1):
        for test_file in files:
            try:
                cpu = run_side_by_side(trees, test_file, scratch)
            except RuntimeError as error:
                print(error, file=sys.stderr)
                return 1
            for name, seconds in cpu.items():
                sums[name] += seconds if number > 1 or rounds == 1 else 0.0
            ratio = cpu["this tree"] / cpu["baseline"]
            print(f"{number:>5}  {test_file:<60} {cpu['baseline']:>9.1f} {cpu['this tree']:>10.1f} {ratio:>5.2f}x")
    later = "round 2" if rounds == 2 else f"rounds 2-{rounds}"
    counted = "every round" if rounds == 1 else f"{later} (round 1 also compiles bytecode)"
    print(f"sum of {counted}: baseline {sums['baseline']:.1f} s, this tree {sums['this tree']:.1f} s")
    print(f"this tree / baseline: {sums['this tree'] / sums['baseline']:.2f}x (target: at most 1.00x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
