# SPDX-License-Identifier: Apache-2.0
"""TEST FAKE: the fake API server itself: ``FakeApiServer``, its HTTP handler, routing and discovery.

The class is composed of the mixins of the other modules (see the package docstring).
"""

from __future__ import annotations

import itertools
import json
import re
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml

from .apply import LabelOwnership, Patching, manager_of
from .daemonsets import DaemonSets
from .disruption import Disruption
from .resources import GATE_DEFAULTS, SUPPORTED_MINORS, ApiError, Resource, Storage, served_resources
from .selector import Listing
from .serving import Serving
from .validation import Admission


def write_kubeconfig(path: str | Path, server: str) -> Path:
    """A kubeconfig for ``server`` (a fake token: the fake does not authenticate); returns its path."""
    path = Path(path)
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "fake", "cluster": {"server": server}}],
        "users": [{"name": "fake", "user": {"token": "fake-token"}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
        "current-context": "fake",
    }
    path.write_text(yaml.safe_dump(config))
    return path


class FakeApiServer(Storage, Admission, Patching, Listing, Disruption, DaemonSets):
    """A strict fake API server for ``resource.k8s.io/v1``, Nodes and Pods (see the package docstring)."""

    def __init__(self, minor: str = "1.35", gates: dict[str, bool] | None = None) -> None:
        if minor not in SUPPORTED_MINORS:
            raise ValueError(f"minor {minor!r} not served; choose one of {SUPPORTED_MINORS}")
        self.minor = minor
        self.resources = served_resources(minor)
        self.gates = {name: per_minor[minor] for name, per_minor in GATE_DEFAULTS.items()}
        for name, value in (gates or {}).items():
            if name not in self.gates:
                raise ValueError(f"unknown feature gate {name!r}")
            self.gates[name] = value
        self.lock = threading.RLock()
        self.store: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.requests: list[tuple[str, str, str]] = []
        self.rejections: list[tuple[str, str, int, str]] = []
        self._faults: list[tuple[str, re.Pattern[str], int, int]] = []
        self._rv = itertools.count(1)
        # label keys per field manager (apply.LabelOwnership); the request's writer is set by handle()
        self.label_owners = LabelOwnership()
        self._writer: tuple[str, dict[Any, set[str]] | None] | None = None
        self._httpd: ThreadingHTTPServer | None = None
        self._serving: Serving | None = None

    # -- life cycle -----------------------------------------------------------

    def start(self) -> FakeApiServer:
        server = self

        class Handler(_Handler):
            api = server

        self._httpd = _Server(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        # stop() wakes the loop at once (no poll interval to wait out in every test's teardown)
        self._serving = Serving(self._httpd, "fake-apiserver")
        return self

    def stop(self) -> None:
        if self._httpd is not None and self._serving is not None:
            self._serving.stop()
            self._httpd = None
            self._serving = None

    def __enter__(self) -> FakeApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("server not started")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def write_kubeconfig(self, path: str | Path) -> Path:
        """Write a kubeconfig that points at this server and return its path."""
        return write_kubeconfig(path, self.url)

    def api_client(self) -> Any:
        """A ``kubernetes.client.ApiClient`` connected to this server."""
        import kubernetes.client

        configuration = kubernetes.client.Configuration()
        configuration.host = self.url
        return kubernetes.client.ApiClient(configuration)

    # -- direct access for tests ---------------------------------------------

    def fail_next(self, method: str, path_pattern: str, code: int = 500, times: int = 1) -> None:
        """Answer the next ``times`` requests matching method and path regex with ``code``."""
        with self.lock:
            self._faults.append((method.upper(), re.compile(path_pattern), code, times))

    def clear_faults(self) -> None:
        """Forget the failures :meth:`fail_next` still had to answer (a client that gave up before them)."""
        with self.lock:
            self._faults.clear()

    def upgrade(self, minor: str, gates: dict[str, bool] | None = None) -> None:
        """Serve ``minor`` from now on, as a control plane upgraded under running clients.

        Stored objects stay as they are (an upgrade does not rewrite them); every later request answers as
        ``minor`` does: ``/version``, the resources served, the schemas, the rules and the feature gates
        (the new minor's defaults, then ``gates``).
        """
        if minor not in SUPPORTED_MINORS:
            raise ValueError(f"minor {minor!r} not served; choose one of {SUPPORTED_MINORS}")
        defaults = {name: per_minor[minor] for name, per_minor in GATE_DEFAULTS.items()}
        for name in gates or {}:
            if name not in defaults:
                raise ValueError(f"unknown feature gate {name!r}")
        with self.lock:
            self.minor = minor
            self.resources = served_resources(minor)
            self.gates = {**defaults, **(gates or {})}

    # -- internals -------------------------------------------------------------

    def handle(self, method: str, path: str, query: dict[str, str], headers: Any, body: bytes) -> tuple[int, Any]:
        """Serve one request; returns (HTTP code, JSON-able answer)."""
        content_type = (headers.get("Content-Type") or "").split(";")[0].strip()
        with self.lock:
            self.requests.append((method, path, content_type))
            self._writer = (manager_of(query, headers), None)
            for index, (f_method, pattern, code, times) in enumerate(self._faults):
                if f_method == method and pattern.search(path):
                    if times <= 1:
                        del self._faults[index]
                    else:
                        self._faults[index] = (f_method, pattern, code, times - 1)
                    raise ApiError(code, f"injected failure for {method} {path}")
            discovery = self._discovery(path)
            if discovery is not None:
                if method != "GET":
                    raise ApiError(405, f"{method} is not allowed on {path}")
                return 200, discovery
            resource, namespace, name, subresource = self._route(path)
            if query.get("watch") in ("true", "1"):
                raise ApiError(400, "watch is not served by this fake API server")
            dry_run = query.get("dryRun") == "All"
            if "dryRun" in query and not dry_run:
                raise ApiError(400, f"invalid dryRun value {query['dryRun']!r}: only 'All' is valid")
            if method == "GET":
                if name:
                    obj = self.store.get((resource.key, namespace or "", name))
                    if obj is None:
                        raise ApiError(404, f'{resource.plural} "{name}" not found', "NotFound")
                    return 200, obj
                items = self._list(resource.key, namespace if resource.namespaced else None, query)
                return 200, {
                    "apiVersion": resource.api_version,
                    "kind": resource.kind + "List",
                    "metadata": {"resourceVersion": str(next(self._rv))},
                    "items": items,
                }
            if method in ("POST", "PUT", "PATCH") and not body:
                raise ApiError(400, "request body is required")
            ns = namespace or ""
            if subresource in resource.subresources:
                if method != "POST":
                    raise ApiError(405, f"{method} is not allowed on {path}")
                return self._evict(ns, name, self._decode(body, content_type), dry_run)
            if method == "POST":
                if name:
                    raise ApiError(405, "POST to a named object is not allowed")
                obj = self._decode(body, content_type)
                return 201, self._create(resource, ns, obj, keep_status=False, dry_run=dry_run)
            if method == "PUT":
                if not name:
                    raise ApiError(405, "PUT needs an object name")
                obj = self._decode(body, content_type)
                return 200, self._update(resource, ns, name, obj, subresource, dry_run)
            if method == "PATCH":
                if not name:
                    raise ApiError(405, "PATCH needs an object name")
                return self._patch(resource, ns, name, subresource, query, content_type, body, dry_run)
            if method == "DELETE":
                if name:
                    if dry_run:
                        obj = self.store.get((resource.key, ns, name))
                        if obj is None:
                            raise ApiError(404, f'{resource.plural} "{name}" not found', "NotFound")
                        return 200, obj
                    return 200, self._delete(resource, ns, name)
                items = self._list(resource.key, namespace if resource.namespaced else None, query)
                if not dry_run:
                    for obj in list(items):
                        self._delete(resource, obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
                return 200, {"apiVersion": resource.api_version, "kind": resource.kind + "List", "items": items}
            raise ApiError(405, f"method {method} not allowed")

    def _decode(self, body: bytes, content_type: str) -> dict[str, Any]:
        try:
            if content_type.endswith("yaml"):
                obj = yaml.safe_load(body)
            else:
                obj = json.loads(body)
        except (ValueError, yaml.YAMLError) as exc:
            raise ApiError(400, f"cannot decode body: {exc}") from exc
        if not isinstance(obj, (dict, list)):
            raise ApiError(400, "body must be a JSON object")
        return obj

    def _route(self, path: str) -> tuple[Resource, str | None, str, str]:
        parts = [p for p in path.split("/") if p]
        if parts[:2] == ["api", "v1"]:
            group, api_version, rest = "", "v1", parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            group, api_version, rest = parts[1], f"{parts[1]}/{parts[2]}", parts[3:]
        else:
            raise ApiError(404, f"the server could not find the requested resource ({path})", "NotFound")
        namespace = None
        # /api/v1/namespaces[/NAME[/status]] is the Namespace resource itself; longer paths are inside one
        is_namespace_object = group == "" and (len(rest) <= 2 or (len(rest) == 3 and rest[2] == "status"))
        if len(rest) >= 2 and rest[0] == "namespaces" and not is_namespace_object:
            namespace, rest = rest[1], rest[2:]
        served = [r for r in self.resources.values() if rest and r.plural == rest[0] and r.api_version == api_version]
        if not served:
            raise ApiError(404, f"the server could not find the requested resource ({path})", "NotFound")
        resource = served[0]
        if namespace is not None and not resource.namespaced:
            raise ApiError(404, f"{resource.plural} is not namespaced", "NotFound")
        name = rest[1] if len(rest) > 1 else ""
        subresource = rest[2] if len(rest) > 2 else ""
        known = (("status",) if resource.status else ()) + resource.subresources
        if subresource and subresource not in known or len(rest) > 3:
            raise ApiError(404, f"the server could not find the requested resource ({path})", "NotFound")
        if resource.namespaced and name and namespace is None:
            raise ApiError(404, f"{resource.plural} is namespaced: the URL needs a namespace", "NotFound")
        return resource, namespace, name, subresource

    def _discovery(self, path: str) -> dict[str, Any] | None:
        path = path.rstrip("/")
        if path == "/version":
            major, minor = self.minor.split(".")
            return {
                "major": major,
                "minor": minor,
                "gitVersion": f"v{self.minor}.0",
                "gitCommit": "0" * 40,
                "gitTreeState": "clean",
                "buildDate": "2026-01-01T00:00:00Z",
                "goVersion": "go1.25.0",
                "compiler": "gc",
                "platform": "linux/amd64",
            }
        if path == "/api":
            return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
        groups = list(dict.fromkeys(r.group for r in self.resources.values() if r.group))
        if path == "/apis":
            return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [self._group(g) for g in groups]}
        for group in groups:
            if path == f"/apis/{group}":
                return {"kind": "APIGroup", "apiVersion": "v1", **self._group(group)}
        for group_version in ["v1"] + [f"{g}/{v}" for g in groups for v in self._versions(g)]:
            prefix = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
            if path == prefix:
                return {
                    "kind": "APIResourceList",
                    "apiVersion": "v1",
                    "groupVersion": group_version,
                    "resources": self._resource_list(group_version),
                }
        return None

    def _versions(self, group: str) -> list[str]:
        """The versions the fake serves of an API group, the preferred one first (v1, Kueue's v1beta2)."""
        return list(dict.fromkeys(r.version for r in self.resources.values() if r.group == group))

    def _group(self, group: str) -> dict[str, Any]:
        versions = [{"groupVersion": f"{group}/{v}", "version": v} for v in self._versions(group)]
        return {"name": group, "versions": versions, "preferredVersion": versions[0]}

    def _resource_list(self, group_version: str) -> list[dict[str, Any]]:
        resources: list[dict[str, Any]] = []
        for resource in self.resources.values():
            if resource.api_version != group_version:
                continue
            verbs = ["create", "delete", "deletecollection", "get", "list", "patch", "update"]
            resources.append(
                {
                    "name": resource.plural,
                    "singularName": resource.kind.lower(),
                    "namespaced": resource.namespaced,
                    "kind": resource.kind,
                    "verbs": verbs,
                }
            )
            if resource.status:
                resources.append(
                    {
                        "name": resource.plural + "/status",
                        "singularName": "",
                        "namespaced": resource.namespaced,
                        "kind": resource.kind,
                        "verbs": ["get", "patch", "update"],
                    }
                )
            if "eviction" in resource.subresources:
                resources.append(
                    {
                        "name": resource.plural + "/eviction",
                        "singularName": "",
                        "namespaced": resource.namespaced,
                        "group": "policy",
                        "version": "v1",
                        "kind": "Eviction",
                        "verbs": ["create"],
                    }
                )
        return resources


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client killed mid-request (the driver under kill -9) is not an error of the server."""
        import sys

        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    api: FakeApiServer
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        # headers and body go out in two writes: without this, Nagle and delayed ACKs add ~40 ms per request
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _serve(self) -> None:
        split = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        try:
            code, answer = self.api.handle(self.command, split.path, query, self.headers, body)
        except ApiError as exc:
            if self.command != "GET":
                with self.api.lock:
                    self.api.rejections.append((self.command, split.path, exc.code, exc.message))
            code, answer = exc.code, exc.status()
        except Exception as exc:  # an unexpected bug in the fake: answer 500, keep serving
            code, answer = 500, ApiError(500, f"fake API server error: {exc!r}").status()
        data = json.dumps(answer).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve
