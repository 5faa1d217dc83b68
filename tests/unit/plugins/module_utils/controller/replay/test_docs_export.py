# SPDX-License-Identifier: Apache-2.0
"""The export script of docs/replay.md, taken from the page and run on a ``kubectl get pods -o json`` list.

Its output must read back as a generic trace with each pod's requests as the scheduler counts them.
"""

from __future__ import annotations

import io
import json
import re
import sys
from pathlib import Path

from ansible_collections.aligned.dra.plugins.module_utils.controller.replay import trace

PAGE = Path(__file__).resolve().parents[6] / "docs" / "replay.md"


def script() -> str:
    section = PAGE.read_text().split("### Exporting a trace from a cluster", 1)[1]
    found = re.search(r"```python\n(.*?)```", section, re.S)
    assert found, "docs/replay.md: no python block under 'Exporting a trace from a cluster'"
    return found.group(1)


def pod(name: str, containers: list[dict], phase: str = "Succeeded", init: list[dict] | None = None) -> dict:
    status: dict = {"phase": phase}
    if phase != "Running":
        status["containerStatuses"] = [
            {"state": {"terminated": {"finishedAt": "2025-03-01T09:00:00Z"}}},
            {"state": {"terminated": {"finishedAt": "2025-03-01T09:30:00Z"}}},
        ]
    spec: dict = {"containers": containers}
    if init is not None:
        spec["initContainers"] = init
    return {
        "metadata": {"namespace": "vision", "name": name, "creationTimestamp": "2025-03-01T08:00:00Z"},
        "spec": spec,
        "status": status,
    }


def container(cpu: str = "0", memory: str = "0", gpus: str | None = None) -> dict:
    resources: dict = {"requests": {"cpu": cpu, "memory": memory}}
    if gpus is not None:
        resources["limits"] = {"nvidia.com/gpu": gpus}
    return {"resources": resources}


def test_the_pages_export_script_writes_a_trace_the_replay_reads(tmp_path, monkeypatch, capsys):
    pods = {
        "items": [
            # two containers summed; the pod ended when its last container did
            pod("train", [container("4", "16Gi", "2"), container("500m", "1Gi")]),
            # an init container that needs more CPU than the containers together: the scheduler counts it
            pod("prep", [container("1", "1Pi")], phase="Running", init=[container("8", "1Mi")]),
            pod("tiny", [container("100m", "1E")], phase="Running"),
        ]
    }
    # run as ``python3 export_trace.py`` runs it, in this process: the list on standard input, the CSV on standard output
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(pods)))
    exec(compile(script(), "export_trace.py", "exec"), {"__name__": "__main__"})
    path = tmp_path / "trace.csv"
    path.write_text(capsys.readouterr().out)
    train, prep, tiny = trace.read_trace(str(path), "csv")
    assert (train.name, train.num_gpu, train.gpu_milli, train.cpu_milli, train.memory_mib) == (
        "vision/train",
        2,
        1000,
        4500,
        17 * 1024,
    )
    assert train.deleted - train.created == 5400 and train.team == "vision"
    assert (prep.cpu_milli, prep.memory_mib, prep.num_gpu, prep.deleted) == (8000, 2**30, 0, None)
    assert tiny.memory_mib == round(10**18 / 2**20)  # 1E: every suffix of a quantity is read
