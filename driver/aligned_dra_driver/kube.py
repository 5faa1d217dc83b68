# SPDX-License-Identifier: Apache-2.0
"""The Kubernetes API, through the official ``kubernetes`` client.

Answers are read as plain JSON dicts (``_preload_content=False``): the driver
needs a few fields, and newer API fields survive untouched.

Every call has a timeout (``timeout``, cut to the caller's ``deadline``), the
client never retries on its own (``retries=False``: the caller decides, with
its own budget and backoff), and every way a call can fail ends as one
:class:`ApiError`: an HTTP error with its status (and ``Retry-After``), or
status 0 for the transport (refused, reset, timed out, DNS, TLS, an answer
that is not JSON). Nothing else leaves this module.
"""

from __future__ import annotations

import json
import math
import os
import time
from typing import Any

RESOURCE_API = "resource.k8s.io/v1"
CONFLICT_RETRIES = 3
CONNECT_TIMEOUT = 3.0  # seconds; a refused or unroutable API server must not eat a Prepare's budget
READ_TIMEOUT = 10.0
MAX_RETRY_AFTER = 300.0  # a larger Retry-After is taken as this


class ApiError(RuntimeError):
    """A failed API call: ``status`` is the HTTP status, 0 for a transport failure."""

    def __init__(
        self,
        status: int,
        message: str,
        retry_after: float | None = None,
        causes: list[dict[str, str]] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after
        # the Status's details.causes: what a refused write got wrong ({"field", "message", "reason"} each)
        self.causes = causes or []

    @property
    def transient(self) -> bool:
        """Worth retrying later: the server was unreachable, overloaded or failing (not a refusal)."""
        return self.status == 0 or self.status in (408, 429) or self.status >= 500


def _retry_after(headers: Any) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds only, as the API server sends it)."""
    try:
        value = headers.get("Retry-After") if headers is not None else None
    except AttributeError:
        return None
    if value is None:
        return None
    try:
        seconds = float(str(value).strip())
    except ValueError:
        return None
    if math.isnan(seconds) or seconds < 0:  # ignored
        return None
    return min(seconds, MAX_RETRY_AFTER)


MAX_CAUSES = 64  # causes kept of one refusal (the API server lists one per wrong field)


def _causes(details: Any) -> list[dict[str, str]]:
    """A Status's ``details.causes`` as ``{"field", "message", "reason"}`` strings, bounded; [] if none."""
    causes = details.get("causes") if isinstance(details, dict) else None
    if not isinstance(causes, list):
        return []
    out = []
    for cause in causes[:MAX_CAUSES]:
        if isinstance(cause, dict):
            out.append(
                {key: " ".join(str(cause.get(key) or "").split())[:300] for key in ("field", "message", "reason")}
            )
    return out


def load_client(kubeconfig: str | None) -> Any:
    """An ApiClient from ``kubeconfig``, else the in-cluster config, else ``$KUBECONFIG``/~/.kube/config."""
    from kubernetes import client, config

    if kubeconfig:
        configuration = client.Configuration()
        config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
        return client.ApiClient(_no_client_retries(configuration))
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        configuration = client.Configuration()
        config.load_incluster_config(client_configuration=configuration)
        return client.ApiClient(_no_client_retries(configuration))
    configuration = client.Configuration()
    config.load_kube_config(client_configuration=configuration)
    return client.ApiClient(_no_client_retries(configuration))


def _no_client_retries(configuration: Any) -> Any:
    # urllib3 retries three times by default, each with the full timeout: the driver retries itself
    configuration.retries = False
    return configuration


def _transport_reason(exc: BaseException) -> str:
    """The innermost cause of a transport failure, in one line."""
    reason: BaseException = exc
    for _depth in range(5):
        inner = getattr(reason, "reason", None) or reason.__cause__ or reason.__context__
        if not isinstance(inner, BaseException):
            break
        reason = inner
    text = " ".join(str(reason).split()) or type(reason).__name__
    return f"{type(reason).__name__}: {text}"[:300]


class Kube:
    """The few calls the driver makes."""

    def __init__(
        self,
        api_client: Any,
        field_manager: str,
        timeout: float = READ_TIMEOUT,
        connect_timeout: float = CONNECT_TIMEOUT,
    ) -> None:
        from kubernetes import client

        self.api_client = api_client
        self.resource = client.ResourceV1Api(api_client)
        self.core = client.CoreV1Api(api_client)
        self.field_manager = field_manager[:128]
        self.timeout = timeout
        self.connect_timeout = connect_timeout

    def _timeouts(self, deadline: float | None) -> tuple[float, float]:
        """(connect, read) seconds for one request, cut to what is left before ``deadline`` (monotonic)."""
        read = self.timeout
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0.05:
                raise ApiError(0, "no time left for an API request")
            read = min(read, left)
        return min(self.connect_timeout, read), read

    def _call(self, method: Any, *args: Any, deadline: float | None = None, **kwargs: Any) -> Any:
        import urllib3
        from kubernetes.client.exceptions import ApiException

        connect, read = self._timeouts(deadline)
        try:
            answer = method(*args, _preload_content=False, _request_timeout=(connect, read), **kwargs)
            data = answer.data if hasattr(answer, "data") else answer.read()
        except ApiException as exc:
            status = exc.status or 0
            message = exc.reason or ""
            causes: list[dict[str, str]] = []
            try:
                body = json.loads(exc.body)
                message = body.get("message") or message
                causes = _causes(body.get("details"))
            except (TypeError, ValueError, AttributeError):
                pass
            message = " ".join(str(message).split())[:300]  # one line, bounded
            raise ApiError(status, f"{status} {message}", _retry_after(exc.headers), causes) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            # refused, reset, timed out, DNS, TLS: urllib3 (retries off) raises these directly
            raise ApiError(0, f"API server unreachable: {_transport_reason(exc)}") from exc
        except (TypeError, ValueError) as exc:  # the client's own check of a body (pydantic): never sent
            raise ApiError(400, f"400 the client refused the request: {' '.join(str(exc).split())[:300]}") from exc
        try:
            return json.loads(data) if data else None
        except ValueError as exc:
            raise ApiError(0, f"the API server's answer is not JSON: {exc}") from exc

    def server_minor(self) -> str:
        """``"1.36"``: the API server's Kubernetes minor version."""
        from kubernetes import client

        info = self._call(client.VersionApi(self.api_client).get_code)
        minor = "".join(ch for ch in str(info.get("minor", "")) if ch.isdigit())
        return f"{info.get('major')}.{minor}"

    # -- nodes and slices ----------------------------------------------------

    def get_node(self, name: str) -> dict[str, Any]:
        return self._call(self.core.read_node, name)

    def list_slices(self, node: str, driver: str) -> list[dict[str, Any]]:
        answer = self._call(
            self.resource.list_resource_slice, field_selector=f"spec.nodeName={node},spec.driver={driver}"
        )
        return answer.get("items") or []

    def create_slice(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._call(self.resource.create_resource_slice, body)

    def replace_slice(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._call(self.resource.replace_resource_slice, name, body)

    def delete_slice(self, name: str) -> None:
        self._call(self.resource.delete_resource_slice, name)

    # -- claims ----------------------------------------------------------------

    def get_claim(self, namespace: str, name: str, deadline: float | None = None) -> dict[str, Any]:
        return self._call(self.resource.read_namespaced_resource_claim, name, namespace, deadline=deadline)

    def apply_claim_status(
        self, namespace: str, name: str, devices: list[dict[str, Any]], uid: str | None = None
    ) -> dict[str, Any]:
        """Server-side apply of this driver's ``status.devices`` entries.

        With ``uid`` the claim's UID is a precondition: a claim deleted and created
        again under the same name answers 409 instead of getting another claim's status.
        """
        metadata = {"name": name, "namespace": namespace}
        if uid:
            metadata["uid"] = uid
        body = {
            "apiVersion": RESOURCE_API,
            "kind": "ResourceClaim",
            "metadata": metadata,
            "status": {"devices": devices},
        }
        return self._call(
            self.resource.patch_namespaced_resource_claim_status,
            name,
            namespace,
            body,
            field_manager=self.field_manager,
            force=True,
            _content_type="application/apply-patch+yaml",
        )

    def remove_claim_status(self, namespace: str, name: str, uid: str, driver: str, pool: str) -> str:
        """Remove the ``status.devices`` entries of ``driver`` in ``pool`` from the claim with this UID.

        Read, filter, then a merge patch of the status carrying the ``uid`` and the
        ``resourceVersion`` read as preconditions (the list is replaced whole, so a
        concurrent write must not be lost: a 409 reads again). Returns ``"gone"`` (no
        claim of that name), ``"replaced"`` (the name now belongs to another claim,
        left alone), ``"clean"`` (nothing of ours there) or ``"cleared"``.
        """
        for attempt in range(CONFLICT_RETRIES):
            try:
                claim = self.get_claim(namespace, name)
            except ApiError as exc:
                if exc.status == 404:
                    return "gone"
                raise
            metadata = claim.get("metadata") if isinstance(claim, dict) else None
            if not isinstance(metadata, dict) or metadata.get("uid") != uid:
                return "replaced"
            status = claim.get("status")
            devices = status.get("devices") if isinstance(status, dict) else None
            devices = devices if isinstance(devices, list) else []
            keep = [
                d for d in devices if not (isinstance(d, dict) and (d.get("driver"), d.get("pool")) == (driver, pool))
            ]
            if len(keep) == len(devices):
                return "clean"
            body = {
                "metadata": {"uid": uid, "resourceVersion": metadata.get("resourceVersion")},
                "status": {"devices": keep or None},
            }
            try:
                self._call(
                    self.resource.patch_namespaced_resource_claim_status,
                    name,
                    namespace,
                    body,
                    field_manager=self.field_manager,
                    _content_type="application/merge-patch+json",
                )
            except ApiError as exc:
                if exc.status == 404:
                    return "gone"
                if exc.status == 409 and attempt + 1 < CONFLICT_RETRIES:
                    continue
                raise
            return "cleared"
        raise ApiError(409, "conflict")  # not reached: the last attempt returns or raises

    # -- pods and events (reclaim) ------------------------------------------------

    def get_pod(self, namespace: str, name: str, deadline: float | None = None) -> dict[str, Any]:
        return self._call(self.core.read_namespaced_pod, name, namespace, deadline=deadline)

    def evict_pod(self, namespace: str, name: str, uid: str | None = None, deadline: float | None = None) -> str:
        """A policy/v1 Eviction of the pod: ``"evicted"``, ``"refused"`` (429: a PodDisruptionBudget forbids it
        now, or the server asks to wait) or ``"gone"`` (no such pod, or with ``uid`` another pod of that name).

        Any other failure raises ApiError.
        """
        body: dict[str, Any] = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }
        if uid:
            body["deleteOptions"] = {"preconditions": {"uid": uid}}
        try:
            self._call(self.core.create_namespaced_pod_eviction, name, namespace, body, deadline=deadline)
        except ApiError as exc:
            if exc.status == 429:
                return "refused"
            if exc.status in (404, 409):
                return "gone"
            raise
        return "evicted"

    def create_event(self, namespace: str, body: dict[str, Any], deadline: float | None = None) -> dict[str, Any]:
        """Create a core/v1 Event (``body`` whole, ``metadata.generateName`` for its name)."""
        return self._call(self.core.create_namespaced_event, namespace, body, deadline=deadline)
