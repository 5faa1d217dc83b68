# SPDX-License-Identifier: Apache-2.0
"""``aligned-dra-driver``: the command line and the main loop."""

from __future__ import annotations

import argparse
import logging
import os
import re
import shutil
import signal
import sys
import threading
import time
from typing import Any, NoReturn

from . import DEFAULT_DRIVER_NAME, __version__
from .collection import dra
from .validation import is_dns_subdomain, show

LOG = logging.getLogger("aligned_dra_driver")
UEVENT_SETTLE = 0.2  # seconds to let a burst of kernel events finish before scanning
PUBLISH_BACKOFF_BASE = 1.0  # seconds before the first retry of a failed publication
PUBLISH_BACKOFF_CAP = 30.0
STOP_GRACE = 5.0  # seconds calls in flight get after SIGTERM
# SIGTERM to exit, whatever the API server does: the grace, a checkpoint write, the rest of the
# shutdown; below the systemd unit's TimeoutStopSec and the DaemonSet's terminationGracePeriodSeconds
STOP_BOUND = 10.0
# --kinds: each kind and the device model's option that publishes it (plain NICs: --plain-nics, with nic)
PCI_ADDRESS = re.compile(r"[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")
KIND_OPTIONS = {"gpu": "gpus", "accelerator": "accelerators", "nic": "rdma_nics", "vf": "vfs"}


def _match_rule(text: str) -> tuple[str, bool, str]:
    if "!=" in text:
        attribute, pattern = text.split("!=", 1)
        equal = False
    elif "=" in text:
        attribute, pattern = text.split("=", 1)
        equal = True
    else:
        raise argparse.ArgumentTypeError(f"{text!r}: expected ATTRIBUTE=GLOB or ATTRIBUTE!=GLOB")
    if not dra.is_qualified_name(attribute):
        raise argparse.ArgumentTypeError(f"{attribute!r} is not an attribute name")
    return attribute, equal, pattern


def _mig_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--mig",
        choices=("off", "static", "dynamic"),
        default="off",
        help="MIG (needs nvidia-ml-py; docs/mig.md): static publishes the instances that exist, dynamic each "
        "MIG-capable GPU as a partitionable device whose instances Prepare creates; off: GPUs whole",
    )
    p.add_argument("--mig-gpus", default="all", help="the GPUs run as MIG: PCI addresses, comma-separated, or all")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="aligned-dra-driver",
        description="DRA kubelet plugin publishing topology-aligned GPUs and RDMA NICs.",
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    p.add_argument("--node-name", default=os.environ.get("NODE_NAME"), help="this node (default: $NODE_NAME)")
    p.add_argument("--driver-name", default=DEFAULT_DRIVER_NAME)
    p.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster, else $KUBECONFIG)")
    p.add_argument("--sysfs-root", default="/sys")
    p.add_argument("--procfs-root", default="/proc")
    p.add_argument("--dev-root", default="/dev", help="where the host's device nodes are")
    p.add_argument("--kubelet-dir", default="/var/lib/kubelet")
    p.add_argument("--cdi-dir", default="/var/run/cdi")
    p.add_argument("--state-dir", default="/var/lib/aligned-dra")
    p.add_argument(
        "--vendor-cdi-dir",
        action="append",
        dest="vendor_cdi_dirs",
        help="directories with vendor CDI specs (repeatable; default /etc/cdi and /var/run/cdi)",
    )
    p.add_argument("--metrics-address", default="", help="HOST:PORT for /metrics and /healthz (empty: off)")
    p.add_argument(
        "--netdev-hook",
        default=None,
        help="path of aligned-dra-netdev-hook (default: next to this program, else on PATH)",
    )
    p.add_argument("--exclude", action="append", default=[], help="fnmatch on PCI address, netdev or RDMA name")
    p.add_argument(
        "--match",
        action="append",
        default=[],
        type=_match_rule,
        help="publish only devices whose attribute matches: ATTR=GLOB or ATTR!=GLOB (repeatable, all must hold)",
    )
    p.add_argument(
        "--selector",
        action="append",
        default=[],
        help="publish only devices for which this CEL expression is true, written as in a DeviceClass "
        '(e.g. device.attributes["dra.aligned.dev"].linkType == "infiniband"; repeatable; needs cel-expr-python)',
    )
    p.add_argument(
        "--kinds",
        default=",".join(KIND_OPTIONS),
        help="the device kinds to publish, comma-separated, from gpu,accelerator,nic,vf (default: all). Split by "
        "kind, two plugins per node: --kinds=gpu,accelerator under one --driver-name, --kinds=nic,vf under another. "
        "vf does not need nic: the VFs of every PF not left out by --exclude are published, whether or not the PF "
        "is; --plain-nics counts only with nic, --no-vfs drops vf",
    )
    p.add_argument("--plain-nics", action="store_true", help="also publish NICs without RDMA (with the kind nic)")
    p.add_argument("--no-vfs", action="store_true", help="do not publish SR-IOV VFs (whatever --kinds says)")
    p.add_argument(
        "--list-attributes",
        action="store_true",
        help="publish numaNode as a list where a device is local to several NUMA nodes "
        "(needs the DRAListTypeAttributes feature gate in the cluster)",
    )
    p.add_argument(
        "--fractional-gpus",
        choices=("auto", "on", "off"),
        default="auto",
        help="publish GPUs with allowMultipleAllocations and memory/compute capacities; auto: when the API "
        "server is Kubernetes >= 1.36 (say on for an older cluster with DRAConsumableCapacity enabled)",
    )
    p.add_argument("--mps-root", default="/run/aligned-dra/mps")
    p.add_argument("--health-service", action="store_true", help="serve v1alpha1.DRAResourceHealth")
    p.add_argument(
        "--device-taints",
        choices=("on", "off"),
        default="off",
        help="publish unhealthy devices with a taint <driver-name>/unhealthy (docs/driver.md); on only where the "
        "API server serves DRADeviceTaints (beta from 1.36): elsewhere it drops the field",
    )
    p.add_argument(
        "--aer-hold",
        type=float,
        default=600.0,
        help="seconds a device stays unhealthy (aer-fatal) after its aer_dev_fatal count grew",
    )
    p.add_argument(
        "--rails-file",
        help="the site's rails file (the driver role writes it): publish dra.aligned.dev/rail on RDMA NICs and VFs; "
        "read again at every scan when it changed (docs/driver.md)",
    )
    p.add_argument("--rescan-interval", type=float, default=10.0, help="seconds between topology scans")
    p.add_argument(
        "--api-timeout",
        type=float,
        default=10.0,
        help="seconds one API request may take (connecting: at most 3); Prepare cuts it to what its budget has left",
    )
    p.add_argument(
        "--reclaim",
        choices=("off", "evict"),
        default="off",
        help="evict: when a GPU runs short of memory, evict the pods of a fractional claim using more than its "
        "memory request (needs nvidia-ml-py; docs/thin-provisioning.md)",
    )
    p.add_argument(
        "--reclaim-margin",
        type=float,
        default=5.0,
        help="percent of a GPU's memory that must stay free before claims above their request are evicted",
    )
    p.add_argument("--reclaim-interval", type=float, default=2.0, help="seconds between two reclaim polls")
    p.add_argument(
        "--usage",
        choices=("on", "off"),
        default="on",
        help="measure GPU use per claim and per GPU with NVML and export it on /metrics (docs/monitoring.md); on "
        "where NVML loads (needs nvidia-ml-py), else aligned_dra_usage_available 0. A driver publishing no GPU "
        "measures nothing",
    )
    p.add_argument("--usage-interval", type=float, default=15.0, help="seconds between two usage polls")
    _mig_options(p)
    p.add_argument("--log-level", default="INFO")
    return p


def device_options(args: argparse.Namespace) -> dict[str, Any]:
    """The dra device model's options from ``--kinds``, ``--exclude``, ``--plain-nics``, ``--no-vfs`` and
    ``--list-attributes``; ValueError naming an empty or unknown kind."""
    kinds = args.kinds.split(",")
    for kind in kinds:
        if not kind:
            raise ValueError(f"--kinds {show(args.kinds)} has an empty kind (kinds: {','.join(KIND_OPTIONS)})")
        if kind not in KIND_OPTIONS:
            raise ValueError(f"--kinds: unknown kind {show(kind)} (kinds: {','.join(KIND_OPTIONS)})")
    options: dict[str, Any] = {option: kind in kinds for kind, option in KIND_OPTIONS.items()}
    options["vfs"] = options["vfs"] and not args.no_vfs
    options.update(
        exclude=args.exclude,
        plain_nics=args.plain_nics and "nic" in kinds,
        list_attributes=args.list_attributes,
    )
    return options


def mig_gpus(text: str) -> list[str] | None:
    """``--mig-gpus``: None for ``all``, else the PCI addresses (lowercase); ValueError naming a bad one."""
    if text.strip().lower() == "all":
        return None
    addresses = [part.strip().lower() for part in text.split(",")]
    for address in addresses:
        if not PCI_ADDRESS.fullmatch(address):
            raise ValueError(f"--mig-gpus: {show(address)} is no PCI address (0000:18:00.0) and not all")
    return addresses


def usage_error(message: str) -> NoReturn:
    """Refuse the command line: message on standard error, exit status 2 (as argparse does)."""
    print(message, file=sys.stderr)
    sys.exit(2)


def _hook_path(given: str | None) -> str:
    if given:
        return given
    beside = os.path.join(os.path.dirname(os.path.abspath(sys.argv[0])), "aligned-dra-netdev-hook")
    if os.access(beside, os.X_OK):
        return beside
    return shutil.which("aligned-dra-netdev-hook") or "/usr/local/bin/aligned-dra-netdev-hook"


def build(args: argparse.Namespace) -> dict[str, Any]:
    """Objects of a running driver, before anything is started."""
    from .claims.status import StatusQueue
    from .devices.health import HealthMonitor
    from .devices.inventory import Options
    from .devices.publisher import Publisher
    from .kube import Kube, load_client
    from .kubelet.driver import Driver
    from .usage.metrics import Metrics

    if not args.node_name:
        usage_error("aligned-dra-driver: --node-name (or $NODE_NAME) is required")
    if not is_dns_subdomain(args.node_name):
        usage_error(f"aligned-dra-driver: --node-name {show(args.node_name)} is not a DNS subdomain")
    if not is_dns_subdomain(args.driver_name) or len(args.driver_name) > 63:
        usage_error(f"aligned-dra-driver: --driver-name {show(args.driver_name)} is not a DNS subdomain <= 63")
    if not os.path.isdir(args.sysfs_root):
        usage_error(f"aligned-dra-driver: --sysfs-root {args.sysfs_root} is not a directory")
    if args.rescan_interval <= 0:
        usage_error("aligned-dra-driver: --rescan-interval must be positive")
    if args.aer_hold < 0:
        usage_error("aligned-dra-driver: --aer-hold must not be negative")
    if not 0.1 <= args.api_timeout <= 30:
        usage_error("aligned-dra-driver: --api-timeout must lie in 0.1..30 seconds (Prepare's budget is 25 s)")
    if not 0 < args.reclaim_margin < 100:  # NaN fails too
        usage_error("aligned-dra-driver: --reclaim-margin must lie between 0 and 100 percent (exclusive)")
    if not 0.1 <= args.reclaim_interval <= 3600:
        usage_error("aligned-dra-driver: --reclaim-interval must lie in 0.1..3600 seconds")
    if not 0.1 <= args.usage_interval <= 3600:
        usage_error("aligned-dra-driver: --usage-interval must lie in 0.1..3600 seconds")
    # A rails file that is missing or broken is not a usage error: it is read again at every scan (a
    # ConfigMap volume fills in later) and only the rail attribute waits for it, never the kubelet
    if args.rails_file is not None and not args.rails_file.strip():
        usage_error("aligned-dra-driver: --rails-file is empty (leave the option out for no rails)")
    try:
        options = device_options(args)
        selected_mig_gpus = mig_gpus(args.mig_gpus)
    except ValueError as exc:
        usage_error(f"aligned-dra-driver: {exc}")
    opts = Options(
        node_name=args.node_name,
        driver_name=args.driver_name,
        sysfs_root=os.path.abspath(args.sysfs_root),
        procfs_root=os.path.abspath(args.procfs_root),
        dev_root=os.path.abspath(args.dev_root),
        cdi_dir=args.cdi_dir,
        state_dir=args.state_dir,
        vendor_cdi_dirs=args.vendor_cdi_dirs or ["/etc/cdi", "/var/run/cdi"],
        netdev_hook=_hook_path(args.netdev_hook),
        device_options=options,
        match=args.match,
        selectors=args.selector,
        fractional_gpus=args.fractional_gpus == "on",
        mps_root=args.mps_root,
        mig=args.mig,
        mig_gpus=selected_mig_gpus,
    )
    try:  # refuse bad options before anything starts
        dra.devices_from_topology({"devices": []}, options)
    except dra.DeviceModelError as exc:
        usage_error(f"aligned-dra-driver: {exc}")
    if args.selector:
        from .devices.inventory import compile_selectors

        try:
            compile_selectors(args.selector)
        except (ImportError, ValueError) as exc:
            usage_error(f"aligned-dra-driver: {exc}")
    metrics = Metrics()
    if args.rails_file is not None:
        from .devices.rails import Rails

        opts.rails = Rails(os.path.abspath(args.rails_file), args.node_name, opts.state_dir, metrics)
    try:  # local files only (kubeconfig, in-cluster token and CA): no request is made here
        api_client = load_client(args.kubeconfig)
    except Exception as exc:
        usage_error(f"aligned-dra-driver: cannot load the API credentials: {' '.join(str(exc).split())[:300]}")
    kube = Kube(
        api_client,
        field_manager=f"{args.driver_name}/{args.node_name}",
        timeout=args.api_timeout,
        connect_timeout=min(3.0, args.api_timeout),
    )
    # --fractional-gpus=auto is decided at the first answer of the API server (Runner.publish): never block here
    status_queue = StatusQueue(kube, args.driver_name, args.node_name, metrics)
    driver = Driver(opts, kube, metrics, status_queue)
    if opts.rails is not None:
        from .devices.rails import held_addresses, returning_addresses

        opts.rails.held = lambda: held_addresses(driver.checkpoint)
        opts.rails.away = lambda: returning_addresses(driver.checkpoint)
    publisher = Publisher(kube, args.node_name, args.driver_name)
    monitor = HealthMonitor(
        timeout=max(60.0, 3 * args.rescan_interval), sysfs_root=opts.sysfs_root, aer_hold=args.aer_hold
    )
    metrics.watch_health(monitor, args.driver_name)
    reclaimer, watcher = gpu_watchers(args, opts, driver, kube, metrics)
    if watcher is not None:  # NVML's gpu-lost and critical XIDs taint the GPU and its MIG devices
        watcher.health = monitor
    return {
        "opts": opts,
        "metrics": metrics,
        "kube": kube,
        "driver": driver,
        "publisher": publisher,
        "monitor": monitor,
        "status_queue": status_queue,
        "reclaimer": reclaimer,
        "watcher": watcher,
    }


def gpu_watchers(args: argparse.Namespace, opts: Any, driver: Any, kube: Any, metrics: Any) -> tuple[Any, Any]:
    """The reclaimer (``--reclaim=evict``) and the GPU watcher (``--usage=on``) over one NVML reader.

    pynvml is imported by the first poll, never here. A driver publishing no GPU measures nothing. With
    usage on, the watcher's thread runs the reclaim steps too (one poll of NVML, not two); with usage off,
    the reclaimer runs its own thread.
    """
    from .usage.watcher import GpuWatcher, NvmlReader, nvidia_gpus

    usage = args.usage == "on" and bool(opts.device_options.get("gpus", True))
    operations = tuple(op for op, on in (("usage", usage), ("reclaim", args.reclaim == "evict")) if on)
    reader = NvmlReader(procfs_root=opts.procfs_root, metrics=metrics, operations=operations or ("usage",))

    def claims() -> Any:
        # replaced whole under the state lock: read without it
        return driver.checkpoint.claims

    reclaimer = None
    if args.reclaim == "evict":
        from .usage.reclaim import Reclaimer

        reclaimer = Reclaimer(
            claims,
            kube,
            metrics,
            driver_name=args.driver_name,
            node_name=args.node_name,
            procfs_root=opts.procfs_root,
            margin=args.reclaim_margin,
            interval=args.reclaim_interval,
            step_budget=args.api_timeout,
            reader=reader if usage else None,
            claim_pods=driver.claim_pods,
        )
    if not usage:
        return reclaimer, None
    from .usage.series import UsageCollector

    watcher = GpuWatcher(
        reader,
        claims,
        lambda: nvidia_gpus(driver.inventory),
        driver.claim_pods,
        kube,
        metrics,
        usage_interval=args.usage_interval,
        reclaimer=reclaimer,
        step_budget=args.api_timeout,
    )
    metrics.registry.register(UsageCollector(watcher, claims, driver.claim_pods))
    return reclaimer, watcher


def fractional_by_version(kube: Any) -> bool:
    """Consumable capacity is on by default from Kubernetes 1.36.

    An unreachable or failing server raises ApiError (asked again later); one that
    refuses the question (403, 404) leaves GPUs unshared. Decided once, at the first
    publication: a control-plane upgrade under a running driver leaves GPUs as they
    were (whole GPUs stay valid on a newer server) until the driver's next start,
    since turning sharing on or off changes the devices under prepared claims. The
    slices' shape, which a newer minor can refuse, follows the minor
    (``publisher.MINOR_INTERVAL`` and a refused write).
    """
    from .kube import ApiError

    try:
        minor = kube.server_minor()
    except ApiError as exc:
        if exc.transient:
            raise
        LOG.warning("API server version unknown (%s): GPUs are published without sharing", exc)
        return False
    major, _sep, rest = minor.partition(".")
    enabled = major.isdigit() and rest.isdigit() and (int(major), int(rest)) >= (1, 36)
    LOG.info("Kubernetes %s: fractional GPUs %s", minor, "on" if enabled else "off")
    return enabled


class Runner:
    """Start order: restore, scan, serve, then publish in a thread of its own: rescan and republish until SIGTERM.

    API trouble never ends the process: a failed publication is retried with capped
    exponential backoff plus jitter (at least ``Retry-After``), while the gRPC services
    go on serving Prepare of checkpointed claims and every Unprepare.
    """

    def __init__(self, args: argparse.Namespace) -> None:
        from .kubelet.services import Servers, lock_instance

        self.args = args
        # before anything is read or written: a second instance must not touch the sockets, checkpoint or specs
        self.instance_lock = lock_instance(args.kubelet_dir, args.driver_name)
        parts = build(args)
        self.opts = parts["opts"]
        self.metrics = parts["metrics"]
        self.kube = parts["kube"]
        self.driver = parts["driver"]
        self.publisher = parts["publisher"]
        self.monitor = parts["monitor"]
        self.status_queue = parts["status_queue"]
        self.reclaimer = parts["reclaimer"]
        self.watcher = parts["watcher"]
        self.fractional_pending = args.fractional_gpus == "auto"
        # what the configuration says about DRADeviceTaints; off for good once the API server drops the field
        self.device_taints = args.device_taints == "on"
        self.wake = threading.Event()
        self.stopping = threading.Event()
        self.registered = False
        self.api_errors = 0  # publication-loop API failures in a row
        self.last_api_error = ""
        self.last_publish: float | None = None  # time.monotonic() of the last successful publication
        self.retry_at = 0.0  # no publication before this (time.monotonic()): backing off
        self.servers = Servers(
            self.driver,
            args.driver_name,
            args.kubelet_dir,
            self.on_registration,
            self.monitor if args.health_service else None,
            pool=args.node_name,
        )
        self.metrics_server = None
        if args.metrics_address:
            from .usage.metrics import MetricsServer

            try:
                self.metrics_server = MetricsServer(args.metrics_address, self.metrics, self.health, self.live)
            except (ValueError, OSError) as exc:
                usage_error(f"aligned-dra-driver: --metrics-address {args.metrics_address}: {exc}")

    def live(self) -> tuple[bool, str]:
        if not self.servers.running.is_set():
            return False, "gRPC services not running"
        return True, "ok"

    def health(self) -> tuple[bool, str]:
        alive, reason = self.live()
        if not alive:
            return False, reason
        reasons = []
        if self.api_errors:
            reasons.append(f"{self.api_errors} API error(s) in a row, the last: {self.last_api_error}")
        if self.last_publish is None:
            reasons.append("no successful ResourceSlice publication yet")
        elif self.api_errors:
            reasons.append(f"last successful publication {time.monotonic() - self.last_publish:.0f} s ago")
        pending = dict(self.driver.restore_pending)
        if pending:
            shown = ", ".join(f"{uid}: {why}" for uid, why in sorted(pending.items())[:3])
            reasons.append(f"CDI specs of {len(pending)} claim(s) not restored ({shown})")
        self.metrics.degraded.set(1 if reasons else 0)
        if reasons:
            return False, "degraded: " + "; ".join(reasons)
        return True, "ok"

    def on_registration(self, registered: bool, error: str) -> None:
        self.registered = registered
        if registered:
            LOG.info("registered with the kubelet")
            self.wake.set()  # kubelet may have deleted the slices: publish again
        else:
            LOG.error("the kubelet refused the registration: %s", error)

    def sync(self) -> None:
        """Scan, then publish unless the scan failed or the loop is backing off from API errors."""
        if self.scan():
            self.publish()

    def scan(self) -> bool:
        """Retry a pending CDI restore and rescan the node: local reads only, no API request."""
        if self.driver.restore_pending:
            try:
                self.driver.retry_restore()
            except Exception as exc:  # never ends the loop
                LOG.error("retrying the CDI restore failed: %s", exc)
        try:
            self.driver.rescan()
        except Exception as exc:  # a broken sysfs read must not stop the plugin
            LOG.error("topology scan failed: %s", exc)
            self.metrics.errors.labels(operation="scan").inc()
            return False
        self.monitor.update(self.driver.inventory)
        return True

    def publish(self) -> None:
        """Publish the last scan's devices unless backing off from API errors."""
        from .kube import ApiError

        inventory = self.driver.inventory
        if time.monotonic() < self.retry_at:
            return
        try:
            if self.fractional_pending:
                self.opts.fractional_gpus = fractional_by_version(self.kube)
                self.fractional_pending = False
                if self.opts.fractional_gpus:
                    self.driver.rescan()
                    inventory = self.driver.inventory
                    self.monitor.update(inventory)  # the shareable form is the one to keep for a gone GPU
            devices = self._devices(inventory)
            self.publisher.publish(devices, inventory.counter_sets)
            if self.device_taints and self.publisher.taints_dropped:
                LOG.error(
                    "the API server dropped the device taints (feature gate DRADeviceTaints is off): "
                    "publishing without taints; set --device-taints=off for this cluster"
                )
                self.device_taints = False
                devices = self._devices(inventory)
                self.publisher.publish(devices, inventory.counter_sets)
        except ApiError as exc:
            self._api_failed(exc)
            return
        except Exception as exc:  # an answer of an unexpected shape: the same backoff, never the end
            LOG.exception("publishing ResourceSlices failed unexpectedly")
            self._api_failed(exc)
            return
        if self.api_errors:
            LOG.info("the API server answers again: published after %d failed attempt(s)", self.api_errors)
        self.api_errors = 0
        self.last_api_error = ""
        self.last_publish = time.monotonic()
        self.metrics.api_errors.set(0)
        self.metrics.published_now()
        self.metrics.published_devices.set(self.publisher.published)
        self.metrics.published_slices.set(self.publisher.slices)
        self.metrics.taints_published(devices)

    def _devices(self, inventory: Any) -> list[dict[str, Any]]:
        """What to publish: with taints on, every device with the taint of its health (gone ones too)."""
        if self.device_taints:
            in_use = {d["device"] for c in list(self.driver.checkpoint.claims.values()) for d in c["devices"]}
            return self.monitor.tainted_devices(inventory, self.opts.driver_name, in_use)
        return inventory.devices

    def _api_failed(self, exc: Exception) -> None:
        from .claims.status import backoff_delay

        self.api_errors += 1
        self.last_api_error = str(exc)
        delay = backoff_delay(self.api_errors - 1, PUBLISH_BACKOFF_BASE, PUBLISH_BACKOFF_CAP)
        retry_after = getattr(exc, "retry_after", None)
        if retry_after is not None:
            delay = max(delay, retry_after)
        self.retry_at = time.monotonic() + delay
        LOG.error("publishing ResourceSlices failed (%d in a row; next try in %.1f s): %s", self.api_errors, delay, exc)
        self.metrics.errors.labels(operation="publish").inc()
        self.metrics.api_errors.set(self.api_errors)

    def _wait_time(self) -> float:
        """Seconds until the next scan, or the next publication try when that comes first."""
        wait = self.args.rescan_interval
        if self.retry_at:
            wait = min(wait, max(self.retry_at - time.monotonic(), 0.0))
        return wait

    def run(self) -> int:
        self.driver.restore()
        if self.metrics_server is not None:
            self.metrics_server.start()
            LOG.info("metrics on port %d", self.metrics_server.port)
        self.status_queue.start()
        if self.watcher is not None:  # runs the reclaim steps too
            self.watcher.start()
        elif self.reclaimer is not None:
            self.reclaimer.start()
        # The kubelet is served from the scan on, before any API request: a node that boots into a slow or
        # unreachable control plane still registers and unprepares; the publications run in their own thread.
        scanned = self.scan()
        self.servers.start()
        from .devices.uevents import UeventWatcher

        watcher = UeventWatcher(self.wake.set)
        watcher.start()
        # netlink is needed by the first Unprepare that restores a NIC: load it now, off the call path
        threading.Thread(target=_warm_up, name="warm-up", daemon=True).start()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._stop)
        # A publication waiting on the API server never holds the stop: the main thread only waits for it.
        threading.Thread(target=self.publish_loop, args=(scanned,), name="publish", daemon=True).start()
        while not self.stopping.wait(1.0):
            pass
        return self.shutdown(watcher)

    def publish_loop(self, scanned: bool) -> None:
        """Publish the first scan (a failed one publishes nothing), then rescan and republish until stopped."""
        if scanned:
            self.publish()
        while not self.stopping.is_set():
            if self.wake.wait(self._wait_time()) and not self.stopping.is_set():
                time.sleep(UEVENT_SETTLE)  # a burst (VFs being created) ends in one scan
            if self.stopping.is_set():
                break
            self.wake.clear()
            self.sync()

    def shutdown(self, watcher: Any) -> int:
        """Stop within STOP_BOUND seconds, whatever the API server does.

        Calls in flight get ``STOP_GRACE`` seconds; one still waiting on the API after that
        is left (its claim is either checkpointed or not: the kubelet retries). A checkpoint
        write in progress is waited for, so the file is whole.
        """
        started = time.monotonic()
        watcher.stop()
        self.servers.stop(grace=STOP_GRACE)
        self.status_queue.stop()
        if self.watcher is not None:
            self.watcher.stop()
        elif self.reclaimer is not None:
            self.reclaimer.stop()
        if self.metrics_server is not None:
            self.metrics_server.stop()
        if self.driver.state_lock.acquire(timeout=1.0):
            self.driver.state_lock.release()
        LOG.info("stopped in %.1f s", time.monotonic() - started)
        return 0

    def _stop(self, signum: int, frame: Any) -> None:
        self.stopping.set()
        self.wake.set()


def _warm_up() -> None:
    try:
        import pyroute2  # noqa: F401
    except ImportError:
        LOG.warning("pyroute2 is missing: NICs cannot be renamed back on Unprepare")


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        code = Runner(args).run()
    except Exception as exc:
        from .claims.checkpoint import CheckpointError
        from .kubelet.services import InstanceLockError

        if isinstance(exc, CheckpointError):
            LOG.error("%s", exc)
            return 2
        if isinstance(exc, InstanceLockError):
            LOG.error("%s", exc)
            return 3
        raise
    # A gRPC worker still waiting on a hung API request would hold the interpreter's exit until its
    # timeout (concurrent.futures joins its threads at exit, daemon or not). Everything that must be on
    # disk is (checkpoint writes are waited for in shutdown): leave now.
    busy = [t.name for t in threading.enumerate() if t is not threading.main_thread() and t.is_alive()]
    LOG.debug("exiting with %d thread(s) left: %s", len(busy), ", ".join(busy))
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
