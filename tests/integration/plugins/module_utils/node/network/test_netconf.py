# SPDX-License-Identifier: Apache-2.0
"""netconf as the boot-time unit runs it: ``python -m`` with the library path the role installs.

Its work and its command line, in-process, are tests/unit/plugins/module_utils/node/network/test_netconf.py's.
"""

from __future__ import annotations

import json
import subprocess
import sys


def test_runs_as_python_m(tmp_path, repo_root):
    """What the systemd unit runs, with the library path the role installs."""
    path = tmp_path / "rdma.json"
    path.write_text(json.dumps({"sysfs_root": str(tmp_path)}))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ansible_collections.aligned.dra.plugins.module_utils.node.network.netconf",
            "rdma",
            str(path),
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=str(repo_root / ".cache" / "collections"),
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["changed"] is False
