# SPDX-License-Identifier: Apache-2.0
"""The Kubernetes API, through the official ``kubernetes`` client.

Answers are read as plain JSON dicts (``_preload_content=False``): the driver
needs a few fields, and newer API fields survive untouched.
"""

from __future__ import annotations

import json
import os
from typing import Any

RESOURCE_API = "resource.k8s.io/v1"
CONFLICT_RETRIES = 3


class ApiError(RuntimeError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def load_client(kubeconfig: str | None) -> Any:
    """An ApiClient from ``kubeconfig``, else the in-cluster config, else ``$KUBECONFIG``/~/.kube/config."""
    from kubernetes import client, config

    if kubeconfig:
        configuration = client.Configuration()
        config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
        return client.ApiClient(configuration)
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        configuration = client.Configuration()
        config.load_incluster_config(client_configuration=configuration)
        return client.ApiClient(configuration)
    configuration = client.Configuration()
    config.load_kube_config(client_configuration=configuration)
    return client.ApiClient(configuration)


class Kube:
    """The few calls the driver makes."""

    def __init__(self, api_client: Any, field_manager: str, timeout: float = 10.0) -> None:
        from kubernetes import client

        self.api_client = api_client
        self.resource = client.ResourceV1Api(api_client)
        self.core = client.CoreV1Api(api_client)
        self.field_manager = field_manager[:128]
        self.timeout = timeout

    def _call(self, method: Any, *args: Any, **kwargs: Any) -> Any:
        from kubernetes.client.exceptions import ApiException

        try:
            answer = method(*args, _preload_content=False, _request_timeout=self.timeout, **kwargs)
        except ApiException as exc:
            message = exc.reason or ""
            try:
                message = json.loads(exc.body).get("message") or message
            except (TypeError, ValueError, AttributeError):
                pass
            raise ApiError(exc.status or 0, f"{exc.status} {message}") from exc
        data = answer.data if hasattr(answer, "data") else answer.read()
        return json.loads(data) if data else None

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

    def get_claim(self, namespace: str, name: str) -> dict[str, Any]:
        return self._call(self.resource.read_namespaced_resource_claim, name, namespace)

    def apply_claim_status(self, namespace: str, name: str, devices: list[dict[str, Any]]) -> dict[str, Any]:
        """Server-side apply of this driver's ``status.devices`` entries."""
        body = {
            "apiVersion": RESOURCE_API,
            "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": namespace},
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
