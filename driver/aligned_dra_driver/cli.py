# SPDX-License-Identifier: Apache-2.0
"""``aligned-dra-driver``: the command line and the main loop."""

from __future__ import annotations

import argparse
import logging
import os
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
    p.add_argument("--plain-nics", action="store_true", help="also publish NICs without RDMA")
    p.add_argument("--no-vfs", action="store_true", help="do not publish SR-IOV VFs")
    p.add_argument(
        "--fractional-gpus",
        choices=("auto", "on", "off"),
        default="auto",
        help="publish GPUs with allowMultipleAllocations and memory/compute capacities; auto: when the API "
        "server is Kubernetes >= 1.36 (say on for an older cluster with DRAConsumableCapacity enabled)",
    )
    p.add_argument("--mps-root", default="/run/aligned-dra/mps")
    p.add_argument("--health-service", action="store_true", help="serve v1alpha1.DRAResourceHealth")
    p.add_argument("--rescan-interval", type=float, default=10.0, help="seconds between topology scans")
    p.add_argument("--log-level", default="INFO")
    return p


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
    from .driver import Driver, Options
    from .health import HealthMonitor
    from .kube import Kube, load_client
    from .metrics import Metrics
    from .publisher import Publisher

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
    device_options = {"exclude": args.exclude, "plain_nics": args.plain_nics, "vfs": not args.no_vfs}
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
        device_options=device_options,
        match=args.match,
        selectors=args.selector,
        fractional_gpus=args.fractional_gpus == "on",
        mps_root=args.mps_root,
    )
    try:  # refuse bad options before anything starts
        dra.devices_from_topology({"devices": []}, device_options)
    except dra.DeviceModelError as exc:
        usage_error(f"aligned-dra-driver: {exc}")
    if args.selector:
        from .driver import compile_selectors

        try:
            compile_selectors(args.selector)
        except (ImportError, ValueError) as exc:
            usage_error(f"aligned-dra-driver: {exc}")
    metrics = Metrics()
    kube = Kube(load_client(args.kubeconfig), field_manager=f"{args.driver_name}/{args.node_name}")
    if args.fractional_gpus == "auto":
        opts.fractional_gpus = fractional_by_version(kube)
    driver = Driver(opts, kube, metrics)
    publisher = Publisher(kube, args.node_name, args.driver_name)
    monitor = HealthMonitor(timeout=max(60.0, 3 * args.rescan_interval))
    return {
        "opts": opts,
        "metrics": metrics,
        "kube": kube,
        "driver": driver,
        "publisher": publisher,
        "monitor": monitor,
    }


def fractional_by_version(kube: Any) -> bool:
    """Consumable capacity is on by default from Kubernetes 1.36."""
    from .kube import ApiError

    try:
        minor = kube.server_minor()
    except ApiError as exc:
        LOG.warning("API server version unknown (%s): GPUs are published without sharing", exc)
        return False
    major, _sep, rest = minor.partition(".")
    enabled = major.isdigit() and rest.isdigit() and (int(major), int(rest)) >= (1, 36)
    LOG.info("Kubernetes %s: fractional GPUs %s", minor, "on" if enabled else "off")
    return enabled


class Runner:
    """Start order: restore, scan, publish, serve; then rescan and republish until SIGTERM."""

    def __init__(self, args: argparse.Namespace) -> None:
        from .server import Servers, lock_instance

        self.args = args
        # before anything is read or written: a second instance must not touch the sockets, checkpoint or specs
        self.instance_lock = lock_instance(args.kubelet_dir, args.driver_name)
        parts = build(args)
        self.opts = parts["opts"]
        self.metrics = parts["metrics"]
        self.driver = parts["driver"]
        self.publisher = parts["publisher"]
        self.monitor = parts["monitor"]
        self.wake = threading.Event()
        self.stopping = threading.Event()
        self.registered = False
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
            from .metrics import MetricsServer

            try:
                self.metrics_server = MetricsServer(args.metrics_address, self.metrics, self.health)
            except (ValueError, OSError) as exc:
                usage_error(f"aligned-dra-driver: --metrics-address {args.metrics_address}: {exc}")

    def health(self) -> tuple[bool, str]:
        if not self.servers.running.is_set():
            return False, "gRPC services not running"
        if self.publisher.last_error:
            return False, f"publishing ResourceSlices failed: {self.publisher.last_error}"
        return True, "ok"

    def on_registration(self, registered: bool, error: str) -> None:
        self.registered = registered
        if registered:
            LOG.info("registered with the kubelet")
            self.wake.set()  # kubelet may have deleted the slices: publish again
        else:
            LOG.error("the kubelet refused the registration: %s", error)

    def sync(self, force: bool) -> None:
        from .kube import ApiError

        try:
            self.driver.rescan()
        except Exception as exc:  # a broken sysfs read must not stop the plugin
            LOG.error("topology scan failed: %s", exc)
            self.metrics.errors.labels(operation="scan").inc()
            return
        inventory = self.driver.inventory
        self.monitor.update(inventory)
        self.metrics.unhealthy_devices.set(self.monitor.unhealthy())
        try:
            self.publisher.publish(inventory.devices)
        except ApiError as exc:
            LOG.error("publishing ResourceSlices failed: %s", exc)
            self.metrics.errors.labels(operation="publish").inc()
            return
        self.metrics.published_devices.set(self.publisher.published)
        self.metrics.published_slices.set(self.publisher.slices)

    def run(self) -> int:
        self.driver.restore()
        if self.metrics_server is not None:
            self.metrics_server.start()
            LOG.info("metrics on port %d", self.metrics_server.port)
        self.sync(force=True)
        self.servers.start()
        from .uevents import UeventWatcher

        watcher = UeventWatcher(self.wake.set)
        watcher.start()
        # netlink is needed by the first Unprepare that restores a NIC: load it now, off the call path
        threading.Thread(target=_warm_up, name="warm-up", daemon=True).start()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._stop)
        while not self.stopping.is_set():
            if self.wake.wait(self.args.rescan_interval) and not self.stopping.is_set():
                time.sleep(UEVENT_SETTLE)  # a burst (VFs being created) ends in one scan
            if self.stopping.is_set():
                break
            self.wake.clear()
            self.sync(force=False)
        watcher.stop()
        self.servers.stop()
        if self.metrics_server is not None:
            self.metrics_server.stop()
        LOG.info("stopped")
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
        return Runner(args).run()
    except Exception as exc:
        from .checkpoint import CheckpointError
        from .server import InstanceLockError

        if isinstance(exc, CheckpointError):
            LOG.error("%s", exc)
            return 2
        if isinstance(exc, InstanceLockError):
            LOG.error("%s", exc)
            return 3
        raise


if __name__ == "__main__":
    sys.exit(main())
