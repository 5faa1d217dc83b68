# SPDX-License-Identifier: Apache-2.0
"""The gRPC services on Unix sockets: registration, DRA v1 and v1beta1, device health.

Sockets (``--kubelet-dir``, default ``/var/lib/kubelet``):

- ``<kubelet-dir>/plugins_registry/<driver>-reg.sock``: ``pluginregistration.Registration``;
- ``<kubelet-dir>/plugins/<driver>/dra.sock``: ``k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin``,
  ``...v1beta1.DRAPlugin`` and, when enabled, ``v1alpha1.DRAResourceHealth``.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import stat
import threading
from collections.abc import Callable, Iterator
from concurrent import futures
from typing import Any

import grpc

from .proto import (
    dra_v1_pb2,
    dra_v1_pb2_grpc,
    dra_v1beta1_pb2,
    dra_v1beta1_pb2_grpc,
    health_v1alpha1_pb2,
    health_v1alpha1_pb2_grpc,
    registration_pb2,
    registration_pb2_grpc,
)

LOG = logging.getLogger(__name__)
SUPPORTED_VERSIONS = ["v1.DRAPlugin", "v1beta1.DRAPlugin"]
HEALTH_VERSION = "v1alpha1.DRAResourceHealth"
MAX_LOGGED_ERROR = 1024  # the kubelet's registration error is logged; a request may carry megabytes
LOCK_NAME = "driver.lock"
DEADLINE_MARGIN = 2.0  # seconds kept back from the kubelet's gRPC deadline to send the answer


class InstanceLockError(RuntimeError):
    """Another process of the same driver holds the node's instance lock."""


def socket_paths(kubelet_dir: str, driver: str) -> tuple[str, str]:
    """(registration socket, DRA socket)."""
    return (
        os.path.join(kubelet_dir, "plugins_registry", f"{driver}-reg.sock"),
        os.path.join(kubelet_dir, "plugins", driver, "dra.sock"),
    )


def _claims(request: Any) -> list[tuple[str, str, str]]:
    return [(c.namespace, c.uid, c.name) for c in request.claims]


@contextlib.contextmanager
def _internal_errors(context: Any, method: str) -> Iterator[None]:
    """A failure outside the per-claim answers becomes INTERNAL with a message, not gRPC's bare UNKNOWN."""
    try:
        yield
    except Exception as exc:
        LOG.exception("%s failed", method)
        if context is None:
            raise
        context.abort(grpc.StatusCode.INTERNAL, f"{method}: {type(exc).__name__}: {str(exc)[:500]}")


def _budget(context: Any) -> float | None:
    """Seconds left before the caller's gRPC deadline, less a margin for the answer; None without a deadline."""
    remaining = getattr(context, "time_remaining", None)
    left = remaining() if callable(remaining) else None
    return None if left is None else max(left - DEADLINE_MARGIN, 0.0)


def _dra_servicer(pb2: Any, grpc_module: Any, driver: Any, with_share_id: bool) -> Any:
    class Servicer(grpc_module.DRAPluginServicer):
        def NodePrepareResources(self, request: Any, context: Any) -> Any:
            with _internal_errors(context, "NodePrepareResources"):
                return self._prepare(request, _budget(context))

        def NodeUnprepareResources(self, request: Any, context: Any) -> Any:
            with _internal_errors(context, "NodeUnprepareResources"):
                return self._unprepare(request, _budget(context))

        def _prepare(self, request: Any, budget: float | None = None) -> Any:
            answers = driver.prepare(_claims(request), budget=budget)
            response = pb2.NodePrepareResourcesResponse()
            for uid, answer in answers.items():
                claim = response.claims[uid]
                if "error" in answer:
                    claim.error = answer["error"]
                    continue
                for device in answer["devices"]:
                    item = claim.devices.add(
                        request_names=device["request_names"],
                        pool_name=device["pool"],
                        device_name=device["device"],
                        cdi_device_ids=device["cdi_device_ids"],
                    )
                    if with_share_id and device.get("share_id"):
                        item.share_id = device["share_id"]
            return response

        def _unprepare(self, request: Any, budget: float | None = None) -> Any:
            answers = driver.unprepare(_claims(request), budget=budget)
            response = pb2.NodeUnprepareResourcesResponse()
            for uid, error in answers.items():
                response.claims[uid].error = error
            return response

    return Servicer()


class RegistrationServicer(registration_pb2_grpc.RegistrationServicer):
    def __init__(
        self, driver_name: str, endpoint: str, versions: list[str], on_status: Callable[[bool, str], None]
    ) -> None:
        self.driver_name = driver_name
        self.endpoint = endpoint
        self.versions = versions
        self.on_status = on_status

    def GetInfo(self, request: Any, context: Any) -> Any:
        return registration_pb2.PluginInfo(
            type="DRAPlugin", name=self.driver_name, endpoint=self.endpoint, supported_versions=self.versions
        )

    def NotifyRegistrationStatus(self, request: Any, context: Any) -> Any:
        error = request.error if len(request.error) <= MAX_LOGGED_ERROR else request.error[:MAX_LOGGED_ERROR] + "..."
        self.on_status(request.plugin_registered, error)
        return registration_pb2.RegistrationStatusResponse()


class HealthServicer(health_v1alpha1_pb2_grpc.DRAResourceHealthServicer):
    """Streams the device health table: everything once, then whenever it changes."""

    def __init__(self, monitor: Any, pool: str) -> None:
        self.monitor = monitor
        self.pool = pool

    def NodeWatchResources(self, request: Any, context: Any) -> Any:
        version = -1
        while context.is_active():
            version, table = self.monitor.wait_change(version, timeout=1.0)
            if table is None:
                continue
            response = health_v1alpha1_pb2.NodeWatchResourcesResponse()
            for name, entry in sorted(table.items()):
                response.devices.add(
                    device=health_v1alpha1_pb2.DeviceIdentifier(pool_name=self.pool, device_name=name),
                    health=health_v1alpha1_pb2.HEALTHY if entry.healthy else health_v1alpha1_pb2.UNHEALTHY,
                    last_updated_time=int(entry.since),
                    health_check_timeout_seconds=int(self.monitor.timeout),
                    # the cause leads, as in the metrics' cause label and the taint's value
                    message=f"{entry.cause}: {entry.message}" if entry.cause else entry.message,
                )
            yield response


def lock_instance(kubelet_dir: str, driver: str) -> int:
    """Take ``<kubelet-dir>/plugins/<driver>/driver.lock`` for the life of the process; return its descriptor.

    Only one process of a driver may serve a node: a second one (the systemd unit and
    the DaemonSet at once) would replace the first one's sockets and share its
    checkpoint and CDI specs. The lock (``flock``, released by the kernel when the
    process ends, however it ends) is taken before anything is written; the file
    holds the holder's pid (as its own PID namespace sees it).
    """
    directory = os.path.join(kubelet_dir, "plugins", driver)
    os.makedirs(directory, mode=0o750, exist_ok=True)
    path = os.path.join(directory, LOCK_NAME)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        os.close(fd)
        raise InstanceLockError(
            f"{path} is locked by process {holder if holder.isdigit() else '(unknown)'}: another instance of "
            f"{driver} serves this node (the systemd unit and the DaemonSet at once?); stop it first"
        ) from None
    except BaseException:
        os.close(fd)
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def _prepare_socket(path: str) -> None:
    os.makedirs(os.path.dirname(path), mode=0o750, exist_ok=True)
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise RuntimeError(f"{path} exists and is not a socket; refusing to replace it")
    os.unlink(path)


class Servers:
    """Both gRPC servers; ``start`` binds the DRA socket first, then registers."""

    def __init__(
        self,
        driver: Any,
        driver_name: str,
        kubelet_dir: str,
        on_registration: Callable[[bool, str], None],
        health_monitor: Any | None = None,
        pool: str = "",
        workers: int = 8,
    ) -> None:
        self.registration_socket, self.dra_socket = socket_paths(kubelet_dir, driver_name)
        self.dra = grpc.server(futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dra"))
        dra_v1_pb2_grpc.add_DRAPluginServicer_to_server(
            _dra_servicer(dra_v1_pb2, dra_v1_pb2_grpc, driver, True), self.dra
        )
        dra_v1beta1_pb2_grpc.add_DRAPluginServicer_to_server(
            _dra_servicer(dra_v1beta1_pb2, dra_v1beta1_pb2_grpc, driver, False), self.dra
        )
        versions = list(SUPPORTED_VERSIONS)
        if health_monitor is not None:
            health_v1alpha1_pb2_grpc.add_DRAResourceHealthServicer_to_server(
                HealthServicer(health_monitor, pool), self.dra
            )
            versions.append(HEALTH_VERSION)
        self.registration = grpc.server(futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="reg"))
        registration_pb2_grpc.add_RegistrationServicer_to_server(
            RegistrationServicer(driver_name, self.dra_socket, versions, on_registration), self.registration
        )
        self.running = threading.Event()

    def start(self) -> None:
        for server, path in ((self.dra, self.dra_socket), (self.registration, self.registration_socket)):
            _prepare_socket(path)
            # gRPC binds (the file appears) before it listens: a connect in between is refused. Listen under a
            # dot name, which the kubelet's plugin watcher skips, and rename: the socket at its path answers.
            listening = os.path.join(os.path.dirname(path), "." + os.path.basename(path))
            _prepare_socket(listening)
            if server.add_insecure_port("unix://" + listening) == 0:
                raise RuntimeError(f"cannot listen on {path}")
            server.start()
            os.chmod(listening, 0o660)
            os.rename(listening, path)
        self.running.set()
        LOG.info("serving %s and %s", self.dra_socket, self.registration_socket)

    def stop(self, grace: float = 5.0) -> None:
        """Stop serving; calls in flight get ``grace`` seconds (a call hung on the API is not waited for)."""
        self.running.clear()
        self.registration.stop(0).wait(1.0)
        for path in (self.registration_socket,):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
        self.dra.stop(grace).wait(grace + 1.0)
        try:
            os.unlink(self.dra_socket)
        except FileNotFoundError:
            pass
