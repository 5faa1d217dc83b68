#!/usr/bin/env python
# SPDX-License-Identifier: Apache-2.0
"""How big and how fast is the site report of a large fleet of identical machines?

Builds the page of a site of N identical 8-GPU/10-NIC nodes (the dgx-h100
fixture, each node with its own hostname, MACs, GUIDs and GPU UUIDs), writes
it, and opens it repeatedly in headless Chromium (Debian's ``chromium``, over
the DevTools protocol, as the tests do). It prints:

- the page size in bytes (target: < 2 MB for 500 nodes);
- the median time Python takes to build the page from the node facts;
- the median browser time from navigation start to the second animation frame
  after the load event (the page is laid out and painted; target: < 2 s);
- the same browser figure for the baseline, a minimal one-line HTML page
  opened in the same browser in the same run, and the ratio page/baseline.

Run: ``.venv/bin/python benchmarks/report.py [--nodes 500] [--runs 7]``
(after ``scripts/bootstrap.sh``; it needs ``.cache/collections`` and chromium).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / ".cache" / "collections"))

from ansible_collections.aligned.dra.plugins.module_utils.controller.report import pages as report  # noqa: E402
from ansible_collections.aligned.dra.tests.support.harnesses.browser import Browser, find_chromium  # noqa: E402
from ansible_collections.aligned.dra.tests.support.sites.report_sites import identical_site  # noqa: E402

SIZE_TARGET = 2 * 1024 * 1024
RENDER_TARGET_MS = 2000.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    chromium = find_chromium()
    if chromium is None:
        print("chromium not found: install the Debian package chromium (scripts/bootstrap.sh does)")
        return 2
    nodes = identical_site("dgx-h100", args.nodes)
    builds = []
    for _run in range(args.runs):
        start = time.perf_counter()
        html = report.site_report("fleet", nodes)["html"]
        builds.append((time.perf_counter() - start) * 1000)
    with tempfile.TemporaryDirectory() as tmp:
        page_path = Path(tmp) / "fleet.html"
        page_path.write_text(html)
        baseline_path = Path(tmp) / "baseline.html"
        baseline_path.write_text(
            "<!DOCTYPE html><html><head><title>b</title></head><body><p>baseline</p></body></html>"
        )
        with Browser(chromium) as browser:
            page = browser.new_page()
            page.open(baseline_path.as_uri())  # warm the browser up once
            timings: dict[str, list[float]] = {"page": [], "baseline": []}
            for _run in range(args.runs):
                for name, path in (("baseline", baseline_path), ("page", page_path)):
                    page.send("Page.navigate", {"url": "about:blank"})
                    timings[name].append(page.open(path.as_uri()))
            errors = page.errors()
            version = browser.version()
    size = len(html.encode())
    rendered = statistics.median(timings["page"])
    baseline = statistics.median(timings["baseline"])
    print(f"browser: {version} (headless), {args.runs} runs, medians")
    print(f"site: {args.nodes} identical nodes (dgx-h100 layout), 1 layout drawn")
    print(f"page size:        {size:>10} bytes  ({size / SIZE_TARGET:.1%} of the 2 MB target)")
    print(f"python build:     {statistics.median(builds):>10.1f} ms")
    print(f"browser, page:    {rendered:>10.1f} ms to painted ({rendered / RENDER_TARGET_MS:.1%} of the 2 s target)")
    print(f"browser, baseline:{baseline:>10.1f} ms to painted (one-line page)")
    print(f"ratio page/baseline: {rendered / baseline:.2f}")
    if errors:
        print(f"console errors: {errors}")
    ok = size < SIZE_TARGET and rendered < RENDER_TARGET_MS and not errors
    print("targets met" if ok else "TARGETS MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
