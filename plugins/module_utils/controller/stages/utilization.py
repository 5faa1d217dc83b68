# SPDX-License-Identifier: Apache-2.0
"""The ``utilization`` stage: the devices in use per node, team and class, written to ``utilization.json``.

:func:`run` takes the module's parameters, in this order: the site's
ResourceSlices, claims and classes (from the cluster, read-only, or given or
in files), the plan and the topology files when given, each input's shape,
the teams' namespaces, the classes compiled on their own (so that their errors
name the option), the utilization (:func:`util.utilization`; its ``mig``
section where the site publishes MIG devices), with ``usage`` the GPU use
read over its window (``usage/``: used versus allocated, MIG claims weighed by
their memory slices, each MIG instance's used versus allocated, and the
advice, MIG layouts from the GPUs' profiles in the topologies or the slices'
device IDs; without ResourceSlices, the usage alone), ``pods_dest`` (the pods'
usage series as the replay reads them) and ``dest`` written (only when their
content changes; not in check mode).

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

import json
import os

from ansible_collections.aligned.dra.plugins.module_utils.controller.inputs import site as inputs
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import plan as planner
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import utilization as util
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import utilization_mig
from ansible_collections.aligned.dra.plugins.module_utils.controller.stages import StageError, write_dest
from ansible_collections.aligned.dra.plugins.module_utils.controller.teams import settings as teams_lib
from ansible_collections.aligned.dra.plugins.module_utils.controller.usage import UsageError, mig_advice
from ansible_collections.aligned.dra.plugins.module_utils.controller.usage import advice as usage_advice
from ansible_collections.aligned.dra.plugins.module_utils.controller.usage import pods as usage_pods
from ansible_collections.aligned.dra.plugins.module_utils.controller.usage import settings as usage_settings
from ansible_collections.aligned.dra.plugins.module_utils.controller.usage import source as usage_source
from ansible_collections.aligned.dra.plugins.module_utils.controller.usage import summary as usage_summary
from ansible_collections.aligned.dra.plugins.module_utils.dra.cel import CelError
from ansible_collections.aligned.dra.plugins.module_utils.dra.labels import TEMPLATE_LABEL
from ansible_collections.aligned.dra.plugins.module_utils.json_file import (
    read_json_dir,
)
from ansible_collections.aligned.dra.plugins.module_utils.output_files import OutputFileError, write_text_file

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from ansible_collections.aligned.dra.plugins.module_utils.controller.usage.series import UsageData

# The module's arguments: its AnsibleModule's, and its action's in the controller's process.
MODULE_SPEC: dict[str, Any] = {
    "argument_spec": {
        "site": {"type": "str", "required": True},
        "from_cluster": {"type": "bool", "default": False},
        "kubeconfig": {"type": "path"},
        "context": {"type": "str"},
        "slices": {"type": "list", "elements": "dict"},
        "claims": {"type": "list", "elements": "dict"},
        "slice_files": {"type": "list", "elements": "path"},
        "claim_files": {"type": "list", "elements": "path"},
        "classes": {"type": "list", "elements": "dict"},
        "teams": {"type": "dict", "default": {}},
        "topology_dir": {"type": "path"},
        "plan_file": {"type": "path"},
        "usage": {"type": "dict"},
        "pods_dest": {"type": "path"},
        "dest": {"type": "path"},
    },
    "mutually_exclusive": [("slices", "slice_files"), ("claims", "claim_files")],
}


def _from_files(params: Mapping[str, Any], key: str) -> list[dict[str, Any]]:
    found = []
    for path in params[key] or []:
        try:
            found.extend(inputs.load_documents(path, key))
        except inputs.InputError as exc:
            raise StageError(str(exc)) from None
    return found


def _from_cluster(params: Mapping[str, Any]) -> tuple[list[Any], list[Any], list[Any]]:
    try:
        import kubernetes
    except ImportError:
        raise StageError("from_cluster needs the Python package kubernetes on the controller") from None
    try:
        if params["kubeconfig"] or params["context"]:
            kubernetes.config.load_kube_config(config_file=params["kubeconfig"], context=params["context"])
        else:
            try:
                kubernetes.config.load_incluster_config()
            except kubernetes.config.ConfigException:
                kubernetes.config.load_kube_config()
        api = kubernetes.client.ResourceV1Api()
        raw = {}
        for key, call in (
            ("slices", api.list_resource_slice),
            ("claims", api.list_resource_claim_for_all_namespaces),
            ("classes", api.list_device_class),
        ):
            response = call(_preload_content=False)
            raw[key] = json.loads(response.data).get("items") or []
    except Exception as exc:  # the client raises ApiException, urllib3 and config errors
        raise StageError(f"from_cluster: cannot list the DRA objects: {exc}") from None
    return raw["slices"], raw["claims"], raw["classes"]


def _objects(params: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    """The site's ResourceSlices, claims and classes: from the cluster, or as given or in files."""
    classes = params["classes"]
    given = [k for k in ("slices", "claims", "slice_files", "claim_files") if params[k]]
    if params["from_cluster"] and given:
        raise StageError(f"from_cluster reads the cluster; {', '.join(given)} cannot be given with it")
    if params["from_cluster"]:
        slices, claims, cluster_classes = _from_cluster(params)
        classes = classes if classes is not None else cluster_classes
    else:
        slices = params["slices"] if params["slices"] is not None else _from_files(params, "slice_files")
        claims = params["claims"] if params["claims"] is not None else _from_files(params, "claim_files")
        if not params["slices"] and not params["slice_files"]:
            if params["usage"]:  # used versus allocated alone, from the driver's series
                return None, claims, classes
            raise StageError("from_cluster, slices or slice_files must give the site's ResourceSlices")
    return slices, claims, classes


def claim_templates(claims: list[Any] | None) -> dict[tuple[str, str], str]:
    """``{(namespace, claim): template}`` from the claims' ``aligned.dev/template`` label (the rendered
    ResourceClaimTemplates put it on every claim made from them)."""
    found = {}
    for claim in claims or []:
        meta = claim.get("metadata") or {} if isinstance(claim, dict) else {}
        template = (meta.get("labels") or {}).get(TEMPLATE_LABEL)
        if template:
            found[(meta.get("namespace") or "", meta.get("name") or "")] = template
    return found


def usage_result(
    conf: Mapping[str, Any],
    namespaces: Mapping[str, str],
    claims: list[Any] | None,
    mig: dict[str, Any] | None = None,
    gpus: dict[tuple[str, str], Any] | None = None,
) -> tuple[dict[str, Any], UsageData]:
    """The ``usage`` of ``utilization.json`` (used versus allocated over the window, and the advice), and
    what was read. ``mig``: the utilization's MIG section (its devices' GPU-equivalents weigh MIG claims);
    ``gpus``: the site's GPUs and their MIG profiles (``mig_advice.site_gpus``), for the MIG advice."""
    try:
        usage_settings.check(conf, "usage")
        threshold = usage_settings.summary_setting(conf, "idle_threshold", "usage")
        rank = usage_settings.summary_setting(conf, "request_percentile", "usage")
        headroom = usage_settings.mig_headroom(conf, "usage")
        data = usage_source.read_usage(conf, option="usage", others=usage_settings.OTHERS)
    except UsageError as exc:
        raise StageError(str(exc)) from None
    fractions = utilization_mig.device_fractions(mig)
    summary = usage_summary.summarise(data, namespaces, claim_templates(claims), threshold, fractions)
    summary["advice"] = usage_advice.advise(summary, rank)
    summary["advice"]["mig"] = mig_advice.advise(summary, gpus or {}, headroom)
    summary["claims_not_measured"] = usage_summary.not_measured(claims, summary)
    return summary, data


def _plan(params: Mapping[str, Any]) -> Any:
    if not (params["plan_file"] and os.path.exists(params["plan_file"])):
        return None
    try:
        with open(params["plan_file"], encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError) as exc:
        raise StageError(f"plan_file: cannot read {params['plan_file']}: {exc}") from None


def _topologies(params: Mapping[str, Any]) -> dict[str, Any]:
    try:
        return read_json_dir(params["topology_dir"]) if params["topology_dir"] else {}
    except ValueError as exc:
        raise StageError(f"topology_dir: {exc}") from None


def run(params: Mapping[str, Any], check_mode: bool, diff: bool) -> dict[str, Any]:
    """The module's result: ``changed``, ``utilization``, and ``diff`` of ``dest`` when ``diff`` is asked and the
    file changes."""
    slices, claims, classes = _objects(params)
    if slices is None:  # no ResourceSlices: the usage alone
        try:
            if claims:
                inputs.check_claims(claims, "claims" if params["claims"] is not None else "claim_files")
            namespaces = teams_lib.teams_by_namespace(params["teams"])
            topologies = _topologies(params)
            inputs.check_topologies(topologies, "topology_dir")
        except (inputs.InputError, teams_lib.TeamsError) as exc:
            raise StageError(str(exc)) from None
        result = {"schema_version": util.SCHEMA_VERSION, "site": params["site"]}
        gpus = mig_advice.site_gpus(topologies)
        result["usage"], data = usage_result(params["usage"], namespaces, claims, gpus=gpus)
        return _written(params, result, check_mode, diff, data)
    plan = _plan(params)
    topologies = _topologies(params)
    files = {"slices": "slice_files", "claims": "claim_files"}
    try:
        for key, check in (("slices", inputs.check_slices), ("claims", inputs.check_claims)):
            field = key if params["from_cluster"] or params[key] is not None else files[key]
            check(slices if key == "slices" else claims, field)
        inputs.check_classes(classes, "classes")
        inputs.check_topologies(topologies, "topology_dir")
        if plan is not None:
            inputs.check_plan(plan, "plan_file")
        namespaces = teams_lib.teams_by_namespace(params["teams"])
    except (inputs.InputError, teams_lib.TeamsError) as exc:
        raise StageError(str(exc)) from None
    try:
        # The classes compile on their own first, so that their errors name the option.
        planner.Compiler(classes or [])
    except (planner.PlanError, CelError) as exc:
        raise StageError(f"classes: {exc}") from None
    try:
        result = util.utilization(slices, claims, classes, namespaces, topologies, site=params["site"], plan=plan)
    except (util.UtilizationError, planner.PlanError, CelError) as exc:
        raise StageError(str(exc)) from None
    data = None
    if params["usage"]:
        mig = result.get("mig")
        gpus = mig_advice.site_gpus(topologies, slices)
        result["usage"], data = usage_result(params["usage"], namespaces, claims, mig, gpus)
        utilization_mig.with_usage(mig, result["usage"])
    return _written(params, result, check_mode, diff, data)


def _rows(text: str | None) -> str:
    return f"{max(0, text.count(chr(10)) - 1)} rows\n" if text else "(no file)\n"


def _written(
    params: Mapping[str, Any], result: dict[str, Any], check_mode: bool, diff: bool, data: UsageData | None
) -> dict[str, Any]:
    pods_changed, diffs = False, []
    if params["pods_dest"]:
        if data is None:
            raise StageError("pods_dest: the pods' usage series come from usage, which is not given")
        try:
            pods_changed, pods_diff = write_text_file(
                params["pods_dest"], usage_pods.pods_csv(data), check_mode, "pods_dest"
            )
        except OutputFileError as exc:
            raise StageError(str(exc)) from None
        if pods_diff:  # a week of a site's pods is large: the diff names the file and counts its rows
            path = params["pods_dest"]
            before, after = _rows(pods_diff["before"]), _rows(pods_diff["after"])
            diffs.append({"before": before, "after": after, "before_header": path, "after_header": path})
    changed, file_diff = write_dest(params["dest"], result, check_mode)
    response = {"changed": changed or pods_changed, "utilization": result}
    if file_diff:
        diffs.insert(0, file_diff)
    if diff and diffs:
        response["diff"] = diffs if len(diffs) > 1 else diffs[0]
    return response
