# SPDX-License-Identifier: Apache-2.0
"""The driver wheel: built offline, carries the collection's topology, MIG and dra libraries, runs on its own."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def test_wheel_vendors_the_shared_libraries_and_runs(tmp_path):
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path),
            str(REPO / "driver"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = tmp_path.glob("aligned_dra_driver-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        shared = REPO / "plugins" / "module_utils"
        package = sorted(
            p.relative_to(shared).as_posix()
            for folder in ("node/topology", "node/mig", "dra")
            for p in (shared / folder).glob("*.py")
        )
        assert {"node/topology/__init__.py", "node/topology/prober.py", "dra/model.py", "dra/cel.py"} <= set(package)
        assert {"dra/device_model.py", "dra/slices.py", "dra/gates.py"} <= set(package)
        assert {"node/mig/nvml_state.py", "node/mig/packing.py"} <= set(package)
        vendored_package = sorted(
            name.removeprefix("aligned_dra_driver/_collection/")
            for name in names
            if name.startswith("aligned_dra_driver/_collection/") and name.endswith(".py")
        )
        # every file of both packages and the node package's __init__, nothing else (no controller side)
        assert vendored_package == sorted([*package, "__init__.py", "node/__init__.py"])
        for name in [*package, "node/__init__.py"]:
            vendored = archive.read(f"aligned_dra_driver/_collection/{name}")
            source = (shared / name).read_bytes()
            # the one change: collection imports become relative ones, one level up per package
            dots = b"." * name.count("/") + b"."
            assert vendored == source.replace(
                b"from ansible_collections.aligned.dra.plugins.module_utils import ", b"from " + dots + b" import "
            ).replace(b"from ansible_collections.aligned.dra.plugins.module_utils.", b"from " + dots)
            assert b"ansible_collections" not in vendored.replace(b'"ansible_collections', b"")
        assert "aligned_dra_driver/kubelet/proto/dra_v1_pb2.py" in names
        assert "aligned_dra_driver/kubelet/proto/dra_v1.proto" in names
        entry_points = archive.read("aligned_dra_driver-0.1.0.dist-info/entry_points.txt").decode()
        metadata = archive.read("aligned_dra_driver-0.1.0.dist-info/METADATA").decode()
    assert "aligned-dra-driver = aligned_dra_driver.cli:main" in entry_points
    assert "aligned-dra-netdev-hook = aligned_dra_driver.network.hook:main" in entry_points
    assert "Requires-Dist: grpcio" in metadata
    assert 'Requires-Dist: cel-expr-python>=0.1.3; extra == "cel"' in metadata
    target = tmp_path / "site"
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--target", str(target), str(wheel)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr
    # outside the checkout: only the wheel and the venv's dependencies are importable
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(target)}
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import aligned_dra_driver.collection as c, aligned_dra_driver.kubelet.services; "
            "print(c.topology.__name__, c.dra.DRIVER_NAME, c.dra_cel().__name__, "
            "c.topology.probe.__module__, c.topology.compute_links.__module__, c.dra_slices.__name__, "
            "c.mig_state.__name__, c.mig_packing.__name__)",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(tmp_path),
        check=False,
    )
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.split() == [
        "aligned_dra_driver._collection.node.topology",
        "dra.aligned.dev",
        "aligned_dra_driver._collection.dra.cel",
        "aligned_dra_driver._collection.node.topology.prober",
        "aligned_dra_driver._collection.node.topology.levels",
        "aligned_dra_driver._collection.dra.slices",
        "aligned_dra_driver._collection.node.mig.nvml_state",
        "aligned_dra_driver._collection.node.mig.packing",
    ]
    version = subprocess.run(
        [sys.executable, "-m", "aligned_dra_driver", "--version"], capture_output=True, text=True, env=env, check=False
    )
    assert version.returncode == 0 and "0.1.0" in version.stdout
