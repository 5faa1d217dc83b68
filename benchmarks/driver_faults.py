#!/usr/bin/env python
# SPDX-License-Identifier: Apache-2.0
"""How does the driver answer the kubelet while the API server hangs, and how fast does it recover?

Starts ONE real driver process (tests/support/harnesses/driver.py) on a fixture node
against the strict fake API server, through the fault-injecting proxy
(tests/support/harnesses/fault_proxy.py), and prints, each against the no-fault run measured in
the same process (the named baseline):

- Prepare latency p50/p99 of one claim (1 GPU) over the real gRPC socket, the
  claim GET included, each followed by its Unprepare: first with no fault
  (baseline), then while another claim's GET hangs forever (a Prepare of that
  claim is in flight the whole time). Before per-claim serialization every call
  waited behind the hung one.
- Recovery: the API server refuses connections for ``--outage`` seconds while
  the node's slices are gone; the time from the moment it accepts again to the
  first successful publication (slices back), against the time the same
  republication takes with no outage (the registration wakes it at once).
  The retry backoff (1 s doubling to 30 s, jittered to half..full) bounds it.
- A slow control plane at start: a fresh driver process while every API
  request takes ``--slow-api`` seconds (a node rebooting into a loaded API
  server); the time from the process start to the registration answered, to an
  Unprepare answered and to the first publication, against the same start with
  no delay.

Targets: with one GET hung, p99 of the other Prepares at most 2x the baseline
p99 + 50 ms; the hung claim answered with an error before the kubelet's 45 s;
recovery after the outage within the backoff then reached (at most 30 s);
with a slow API server, registration and Unprepare answered before the first
API answer could have come back (before ``--slow-api`` seconds).
Exits 1 when a target is missed.
Run: ``.venv/bin/python benchmarks/driver_faults.py [--samples N] [--outage S] [--slow-api S]``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "driver"), str(REPO / ".cache" / "collections")]

from ansible_collections.aligned.dra.tests.support.fakes.apiserver import FakeApiServer  # noqa: E402
from ansible_collections.aligned.dra.tests.support.harnesses import driver as h  # noqa: E402
from ansible_collections.aligned.dra.tests.support.harnesses.fault_proxy import FaultProxy  # noqa: E402

KUBELET_TIMEOUT = 45.0
BACKOFF_CAP = 30.0


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(pct / 100 * (len(ordered) - 1))))]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def cycles(process: h.DriverProcess, api: FakeApiServer, tag: str, samples: int) -> list[float]:
    """Prepare latencies of ``samples`` fresh one-GPU claims (each unprepared and deleted after)."""
    latencies = []
    for index in range(samples):
        ref = h.claim_ref(api.create(h.claim_object(f"{tag}-{index}", [{"request": "gpu", "device": h.GPU}])))
        started = time.perf_counter()
        answer = process.prepare([ref], timeout=KUBELET_TIMEOUT)
        latencies.append(time.perf_counter() - started)
        if answer.claims[ref["uid"]].error:
            raise SystemExit(f"{tag}: Prepare failed: {answer.claims[ref['uid']].error}")
        process.unprepare([ref], timeout=KUBELET_TIMEOUT)
        api.delete("resourceclaims", ref["name"], "default")
    return latencies


def wait_for_slices(api: FakeApiServer, timeout: float) -> float | None:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if api.list("resourceslices"):
            return time.monotonic() - started
        time.sleep(0.01)
    return None


def start_times(node: h.NodeTree, api: FakeApiServer, proxy: FaultProxy, delay: float) -> dict[str, float]:
    """Seconds from a fresh process's start to the registration answered, an Unprepare answered, slices."""
    for item in api.list("resourceslices"):
        api.delete("resourceslices", item["metadata"]["name"])
    if delay:
        proxy.add("*", r".*", "delay", seconds=delay)
    unknown = {"namespace": "default", "name": "not-prepared", "uid": "0b5e7c1e-0000-4000-8000-000000000001"}
    process = h.DriverProcess(node, api, kubeconfig=proxy.write_kubeconfig(node.root / "proxy.kubeconfig"))
    started = time.monotonic()
    process.start(wait=False)
    try:
        process.wait_ready(timeout=120)
        process.register()
        times = {"register": time.monotonic() - started}
        assert process.unprepare([unknown], timeout=KUBELET_TIMEOUT).claims[unknown["uid"]].error == ""
        times["unprepare"] = time.monotonic() - started
        published = wait_for_slices(api, 120)
        times["publish"] = time.monotonic() - started if published is not None else float("inf")
    finally:
        process.stop()
        proxy.clear()
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--outage", type=float, default=12.0, help="seconds the API server refuses connections")
    parser.add_argument("--slow-api", type=float, default=5.0, help="seconds every API request takes at start")
    args = parser.parse_args()
    root = h.short_tmp()
    failed = []
    try:
        node = h.NodeTree.build(root)
        with FakeApiServer("1.35") as api, FaultProxy(api.url) as proxy:
            api.create(h.node_object())
            process = h.DriverProcess(node, api, kubeconfig=proxy.write_kubeconfig(root / "proxy.kubeconfig"))
            with process:
                process.register()
                cycles(process, api, "warm", 10)
                baseline = cycles(process, api, "base", args.samples)

                hung = h.claim_ref(api.create(h.claim_object("hung", [{"request": "gpu", "device": h.GPU}])))
                proxy.add("GET", r"/resourceclaims/hung$", "hang")
                box: dict[str, object] = {}

                def prepare_hung() -> None:
                    started = time.perf_counter()
                    box["answer"] = process.prepare([hung], timeout=KUBELET_TIMEOUT)
                    box["seconds"] = time.perf_counter() - started

                thread = threading.Thread(target=prepare_hung, daemon=True)
                thread.start()
                time.sleep(0.2)
                faulted = cycles(process, api, "during", args.samples)
                still_hanging = thread.is_alive()
                thread.join(KUBELET_TIMEOUT + 5)
                proxy.clear()
                hung_error = box["answer"].claims[hung["uid"]].error if "answer" in box else "(no answer)"

                # recovery: slices gone, a registration wakes a publication; with no fault first
                for item in api.list("resourceslices"):
                    api.delete("resourceslices", item["metadata"]["name"])
                process.register()
                republish = wait_for_slices(api, 30)
                for item in api.list("resourceslices"):
                    api.delete("resourceslices", item["metadata"]["name"])
                proxy.refuse()
                process.register()  # the wake-up meets a refused connection and backs off
                time.sleep(args.outage)
                proxy.accept()
                recovery = wait_for_slices(api, BACKOFF_CAP + 15)
            quick_start = start_times(node, api, proxy, 0.0)
            slow_start = start_times(node, api, proxy, args.slow_api)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    b50, b99 = statistics.median(baseline), percentile(baseline, 99)
    f50, f99 = statistics.median(faulted), percentile(faulted, 99)
    print(f"Prepare over gRPC, {args.samples} claims of 1 GPU each (API round trip included)")
    print(f"  no fault (baseline)            p50 {ms(b50):>10}  p99 {ms(b99):>10}")
    print(
        f"  another claim's GET hung       p50 {ms(f50):>10}  p99 {ms(f99):>10}  ({f50 / b50:.2f}x / {f99 / b99:.2f}x)"
    )
    print(
        f"  the hung claim                 answered after {box.get('seconds', float('nan')):.1f} s "
        f"(kubelet allows {KUBELET_TIMEOUT:.0f} s): {hung_error[:120]}"
    )
    print("Publication after the API server returns")
    print(f"  no outage (baseline)           {ms(republish) if republish is not None else 'never'}")
    text = f"{recovery:.2f} s" if recovery is not None else "never"
    ratio = f" ({recovery / republish:.0f}x)" if recovery and republish else ""
    print(f"  after a {args.outage:.0f} s refusal            {text}{ratio}")
    print(f"Start while every API request takes {args.slow_api:.0f} s (from the process start)")
    for key, what in (
        ("register", "registration answered"),
        ("unprepare", "an Unprepare answered"),
        ("publish", "first publication"),
    ):
        print(f"  {what:<30} {slow_start[key]:6.2f} s   no delay (baseline) {quick_start[key]:6.2f} s")
    if max(slow_start["register"], slow_start["unprepare"]) >= args.slow_api:
        failed.append(f"the kubelet waited for the API server (registration or Unprepare after {args.slow_api:.0f} s)")
    if f99 > 2 * b99 + 0.05:
        failed.append(f"p99 with a hung GET {ms(f99)} > 2x baseline + 50 ms")
    if not still_hanging:
        failed.append("the hung claim's call ended before the other Prepares did (nothing was measured under load)")
    if "answer" not in box or not hung_error or box["seconds"] >= KUBELET_TIMEOUT:
        failed.append("the hung claim was not answered with its own error before the kubelet's timeout")
    if recovery is None or recovery > BACKOFF_CAP:
        failed.append(f"recovery took longer than the backoff cap ({BACKOFF_CAP:.0f} s)")
    for line in failed:
        print(f"MISSED: {line}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
