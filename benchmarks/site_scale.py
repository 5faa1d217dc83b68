#!/usr/bin/env python
# SPDX-License-Identifier: Apache-2.0
"""How does site.yml scale with the number of nodes?

A synthetic fleet of N nodes is generated from the demo: every node is one of
the demo's sysfs trees (cycled), probed through ``ansible_connection: local``,
with the demo's settings (network stage check-only, driver in DaemonSet mode,
claims, teams, report). ``--sites K`` spreads the nodes over K sites that share
the ``ai-west`` settings. ``--network settled`` leaves out the RDMA and SR-IOV
settings: the check-only plans of the demo always have something to change, so
a re-run never finds a node converged; without them every node's plan changes
nothing, as in a fleet whose network rolled, and a re-run skips its network
and driver steps.

Baseline, measured in the same run on the same inventory and forks: Ansible's
own floor, a play of ``ping`` + ``stat`` per node (what any playbook that
touches every node at least costs).

Printed per N: seconds of the floor, of a first ``site.yml`` run on an empty
output directory and of a re-run on the converged site, each run's ratio to the
floor, the growth from the smallest N to each N against the floor's growth
(1.0 = as linear as Ansible itself), each run's CPU seconds (user + system of
ansible-playbook and every fork it waited for; the generated nodes are local,
so their modules count too) and its ratio to the floor's, the peak
proportional set size (PSS) of the controller's process tree (ansible-playbook
and its forks, sampled every 0.2 s), and per play its seconds and worker rounds per node (host results:
ok, changed, skipped or failed; a skipped task still costs a round).

Targets (from the project's issue, on 2 controller cores, forks 10):
site.yml at 200 nodes <= 1.5x the floor; a converged re-run at 200 nodes
<= 1.3x; at 1,000 nodes <= 2x and linear from 200; controller memory at
1,000 nodes under 1 GB. The measured figures are in docs/development.md (Figures).

The generated nodes get the demo's host settings of their sysfs tree (its
rails rule; a tree of another demo site none) and a rack of ten in a block
of 100, and the demo's files (the replay's trace) next to the inventory:
the validation refuses a site otherwise.

Run: ``.venv/bin/python benchmarks/site_scale.py`` (N = 50 and 200),
``--nodes 1000`` on request, ``--sites 4``, ``--forks 20``, ``--json FILE``,
``--runs site`` (one site.yml run only: the memory figure at 1,000 nodes),
``--tasks 30`` (the slowest tasks of each run, with their worker rounds).
Needs the bootstrap (``scripts/bootstrap.sh``): the virtual environment and
the collections under ``.cache/collections``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "inventories" / "demo"
CALLBACKS = Path(__file__).resolve().parent / "callbacks"
FIXTURES = (
    "dgx-h100",
    "mi300x",
    "sriov-8x64",
    "hyperv-ndv4",
    "vm-flat",
    "pci-domain-5digit",
    "hwloc-32intel64-8ve",
    "hwloc-32em64t-mic",
    "hwloc-fakepcilocalities",
    "ghw-nvidia-p100",
)

FLOOR_PLAYBOOK = """---
# Ansible's floor: one module round trip and one file check per node.
- name: Floor - ping and stat every node
  hosts: aligned_dra_nodes
  gather_facts: false
  tasks:
    - name: Ping
      ansible.builtin.ping:
    - name: Stat the node's sysfs root
      ansible.builtin.stat:
        path: "{{ aligned_dra_sysfs_root }}"
"""


def write_fleet(project: Path, nodes: int, sites: int, sysfs: Path, network: str = "demo") -> Path:
    """An inventory of ``nodes`` hosts in ``sites`` sites, with the demo's settings; ``network`` ``settled``
    leaves out its RDMA and SR-IOV settings (check-only on read-only trees, their plans always have
    something to change): every node's network plan changes nothing, as in a fleet whose network rolled."""
    inventory = project / "inventory"
    group_vars = inventory / "group_vars"
    group_vars.mkdir(parents=True)
    all_vars = (DEMO / "group_vars" / "all.yml").read_text(encoding="utf-8")
    all_vars = all_vars.replace('"{{ inventory_dir }}/../../.cache/sysfs"', json.dumps(str(sysfs)))
    all_vars = all_vars.replace('"{{ inventory_dir }}/../../output"', json.dumps(str(project / "output")))
    (group_vars / "all.yml").write_text(all_vars, encoding="utf-8")
    shutil.copytree(DEMO / "files", inventory / "files")  # the replay's trace, next to the inventory
    site_vars = (DEMO / "group_vars" / "ai_west.yml").read_text(encoding="utf-8")
    if network == "settled":
        kept = {
            k: v
            for k, v in yaml.safe_load(site_vars).items()
            if not k.startswith(("aligned_dra_rdma_", "aligned_dra_sriov_"))
        }
        site_vars = yaml.safe_dump(kept, sort_keys=False)
    lines = ["---", "aligned_dra_nodes:", "  children:"]
    for site in range(sites):
        group = f"site_{site:02d}"
        (group_vars / f"{group}.yml").write_text(
            site_vars.replace("aligned_dra_site: ai-west", f"aligned_dra_site: site-{site:02d}"), encoding="utf-8"
        )
        lines += [f"    {group}:", "      hosts:"]
        for index in range(site, nodes, sites):
            fixture = FIXTURES[index % len(FIXTURES)]
            # the demo's own settings of a node of that tree (its rails rule), and a rack of ten in a block of 100
            host = {"aligned_dra_fixture": fixture, **fixture_settings().get(fixture, {"aligned_dra_rails": {}})}
            host["aligned_dra_placement"] = {"block": f"b{index // 100}", "rack": f"r{index // 10}"}
            lines.append(f"        node-{index:04d}: {json.dumps(host, sort_keys=True)}")
    (inventory / "hosts.yml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return inventory


def fixture_settings() -> dict[str, dict]:
    """Per sysfs tree, the host settings the demo's ai-west gives the node built on it (its rails rule), but
    its placement; a tree of another demo site gets no rails (``{}``), as the ai-west rule does not fit it."""
    hosts = yaml.safe_load((DEMO / "hosts.yml").read_text(encoding="utf-8"))
    found = {}
    for settings in hosts["aligned_dra_nodes"]["children"]["ai_west"]["hosts"].values():
        kept = {k: v for k, v in settings.items() if k not in ("aligned_dra_fixture", "aligned_dra_placement")}
        found[settings["aligned_dra_fixture"]] = kept
    return found


def tree_pss_kib(root_pid: int) -> int:
    """PSS of a process and its descendants (forks share pages: PSS counts them once)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as handle:
                parent = int(handle.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry))
    total, todo = 0, [root_pid]
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, ()))
        try:
            with open(f"/proc/{pid}/smaps_rollup", encoding="utf-8") as handle:
                for line in handle:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1])
                        break
        except OSError:
            continue
    return total


def run_playbook(args: list[str], env: dict[str, str], log: Path) -> dict:
    """Run ansible-playbook; wall seconds, CPU seconds and peak PSS of its tree, play times."""
    times = log.with_suffix(".plays.json")
    env = dict(env, ALIGNED_DRA_PLAY_TIMES=str(times))
    peak = [0]
    # the children's CPU: ansible-playbook and every fork it waited for (the nodes are local: their modules too)
    used_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    with open(log, "w", encoding="utf-8") as out:
        process = subprocess.Popen(
            args, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=log.parent
        )
        done = threading.Event()

        def sample() -> None:
            while not done.wait(0.2):
                peak[0] = max(peak[0], tree_pss_kib(process.pid))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        returncode = process.wait()
        done.set()
        sampler.join()
    seconds = time.monotonic() - start
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = used.ru_utime - used_before.ru_utime + used.ru_stime - used_before.ru_stime
    if returncode != 0:
        tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-30:]
        raise SystemExit(f"{' '.join(args[:4])} ... failed ({returncode}); log {log}:\n" + "\n".join(tail))
    plays = json.loads(times.read_text(encoding="utf-8")) if times.exists() else []
    return {
        "seconds": round(seconds, 2),
        "cpu_seconds": round(cpu, 1),
        "peak_pss_mib": round(peak[0] / 1024, 1),
        "plays": plays,
    }


RUNS = ("floor", "site", "rerun")


def measure(
    nodes: int,
    sites: int,
    forks: int,
    workdir: Path,
    env: dict[str, str],
    sysfs: Path,
    runs: tuple[str, ...] = RUNS,
    network: str = "demo",
) -> dict:
    project = workdir / f"n{nodes}"
    inventory = write_fleet(project, nodes, sites, sysfs, network)
    (project / "floor.yml").write_text(FLOOR_PLAYBOOK, encoding="utf-8")
    playbook = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory), "--forks", str(forks)]
    result: dict = {"nodes": nodes, "sites": sites, "forks": forks}
    if "floor" in runs:
        result["floor"] = run_playbook(playbook + [str(project / "floor.yml")], env, project / "floor.log")
    if "site" in runs or "rerun" in runs:
        result["site"] = run_playbook(playbook + ["aligned.dra.site"], env, project / "site.log")
    if "rerun" in runs:
        result["rerun"] = run_playbook(playbook + ["aligned.dra.site"], env, project / "rerun.log")
    return result


def merged_plays(run: dict) -> list[dict]:
    """One entry per play: a serial play reports one play start per batch (``batches``)."""
    merged: dict[str, dict] = {}
    for play in run["plays"]:
        entry = merged.setdefault(play["play"], {"play": play["play"], "seconds": 0.0, "batches": 0, "results": {}})
        entry["seconds"] += play["seconds"]
        entry["batches"] += 1
        for outcome, count in play["results"].items():
            entry["results"][outcome] = entry["results"].get(outcome, 0) + count
    return list(merged.values())


def rounds_per_node(run: dict, nodes: int) -> float:
    return sum(sum(play["results"].values()) for play in run["plays"]) / nodes


def print_partial(results: list[dict]) -> None:
    """Runs left out with --runs: what was measured, without ratios."""
    for result in results:
        for run in RUNS:
            if run in result:
                rounds = rounds_per_node(result[run], result["nodes"])
                print(
                    f"{result['nodes']:>6} nodes  {run:<6} {result[run]['seconds']:>8.1f} s  "
                    f"CPU {result[run]['cpu_seconds']:>8.1f} s  "
                    f"peak {result[run]['peak_pss_mib']:>7.0f} MiB  {rounds:>5.1f} rounds/node"
                )


def slowest_tasks(run: dict, count: int) -> list[dict]:
    """The ``count`` slowest tasks of a run, over every play (a serial play's batches summed per task)."""
    merged: dict[tuple[str, str], dict] = {}
    for play in run["plays"]:
        for task in play.get("tasks_detail", ()):
            entry = merged.setdefault((play["play"], task["task"]), {"play": play["play"], "task": task["task"]})
            entry["seconds"] = entry.get("seconds", 0.0) + task.get("seconds", 0.0)
            entry["rounds"] = entry.get("rounds", 0) + task["rounds"]
    return sorted(merged.values(), key=lambda entry: -entry["seconds"])[:count]


def print_tasks(results: list[dict], count: int) -> None:
    for result in results:
        for run in ("site", "rerun"):
            if run not in result:
                continue
            print(f"\nThe {count} slowest tasks of {run} at {result['nodes']} nodes: seconds, worker rounds per node")
            for task in slowest_tasks(result[run], count):
                rounds = task["rounds"] / result["nodes"]
                print(f"  {task['seconds']:>7.1f} s  {rounds:>5.2f}  {task['play'][:40]} | {task['task'][:70]}")


def print_results(results: list[dict]) -> None:
    if any(run not in result for result in results for run in RUNS):
        print_partial(results)
        return
    base = results[0]
    print(
        f"{'nodes':>6} {'floor s':>8} {'site s':>8} {'ratio':>6} {'re-run s':>9} {'ratio':>6} "
        f"{'growth':>7} {'floor gr':>8} {'vs floor':>8} {'peak MiB':>9} {'rounds/node':>11}"
    )
    for result in results:
        floor, site, rerun = result["floor"]["seconds"], result["site"]["seconds"], result["rerun"]["seconds"]
        growth = site / base["site"]["seconds"]
        floor_growth = floor / base["floor"]["seconds"]
        peak = max(result[run]["peak_pss_mib"] for run in ("floor", "site", "rerun"))
        print(
            f"{result['nodes']:>6} {floor:>8.1f} {site:>8.1f} {site / floor:>6.2f} {rerun:>9.1f} "
            f"{rerun / floor:>6.2f} {growth:>7.2f} {floor_growth:>8.2f} {growth / floor_growth:>8.2f} "
            f"{peak:>9.0f} {rounds_per_node(result['site'], result['nodes']):>11.1f}"
        )
    print(
        "growth: site.yml seconds over those of the smallest N; vs floor: that growth over the floor's (1.0 = linear)"
    )
    for result in results:
        cpu = {run: result[run]["cpu_seconds"] for run in RUNS}
        print(
            f"CPU seconds at {result['nodes']} nodes (the controller's process tree, user + system): floor "
            f"{cpu['floor']:.1f}, site.yml {cpu['site']:.1f} ({cpu['site'] / cpu['floor']:.2f}x), "
            f"re-run {cpu['rerun']:.1f} ({cpu['rerun'] / cpu['floor']:.2f}x)"
        )
    for result in results:
        nodes = result["nodes"]
        print(
            f"\nPlays of site.yml at {nodes} nodes: seconds (first run / converged re-run), batches, "
            f"worker rounds per node (first run)"
        )
        reruns = {play["play"]: play for play in merged_plays(result["rerun"])}
        for play in merged_plays(result["site"]):
            again = reruns.get(play["play"], {"seconds": 0.0, "batches": 0})
            first_rounds = sum(play["results"].values()) / nodes
            print(
                f"  {play['seconds']:>7.1f} {again['seconds']:>7.1f} s  {play['batches']:>4d} {again['batches']:>4d}  "
                f"{first_rounds:>5.1f}  {play['play'][:80]}"
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[50, 200], help="fleet sizes (default 50 200)")
    parser.add_argument("--sites", type=int, default=1, help="sites the nodes are spread over (default 1)")
    parser.add_argument("--forks", type=int, default=10, help="ansible forks (default 10, the project's ansible.cfg)")
    parser.add_argument(
        "--runs",
        default=",".join(RUNS),
        help="which runs: floor, site, rerun (default all three; e.g. 'site' for memory at 1,000 nodes)",
    )
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--keep", action="store_true", help="keep the generated projects and logs")
    parser.add_argument("--tasks", type=int, default=0, help="also print the N slowest tasks of each run")
    parser.add_argument(
        "--network",
        choices=("demo", "settled"),
        default="demo",
        help="demo: the demo's RDMA and SR-IOV settings, check-only (every plan has something to change); "
        "settled: none, every node's network plan changes nothing (a fleet whose network rolled)",
    )
    options = parser.parse_args()

    cache = REPO / ".cache"
    sysfs = cache / "sysfs"
    subprocess.run(
        [sys.executable, str(REPO / "tests" / "fixtures" / "materialize.py"), str(sysfs), *FIXTURES],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    env = dict(os.environ)
    env.update(
        {
            "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
            "ANSIBLE_COLLECTIONS_PATH": str(cache / "collections"),
            "ANSIBLE_CALLBACK_PLUGINS": str(CALLBACKS),
            "ANSIBLE_CALLBACKS_ENABLED": "aligned_dra_play_times",
            "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
        }
    )
    workdir = Path(tempfile.mkdtemp(prefix="aligned-dra-scale-"))
    results = []
    try:
        for nodes in sorted(options.nodes):
            print(f"measuring {nodes} nodes ...", file=sys.stderr, flush=True)
            runs = tuple(run for run in options.runs.split(",") if run)
            unknown = set(runs) - set(RUNS)
            if unknown:
                parser.error(f"--runs: unknown {sorted(unknown)}; choose from {', '.join(RUNS)}")
            results.append(measure(nodes, options.sites, options.forks, workdir, env, sysfs, runs, options.network))
    finally:
        if options.keep:
            print(f"projects and logs kept in {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    print(
        f"site.yml on {options.sites} site(s), forks {options.forks}, {os.cpu_count()} CPUs, network {options.network}; "
        f"baseline: ping + stat per node on the same inventory"
    )
    print_results(results)
    if options.tasks:
        print_tasks(results, options.tasks)
    if options.json:
        options.json.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
