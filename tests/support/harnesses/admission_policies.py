# SPDX-License-Identifier: Apache-2.0
"""TEST HELPER: a ValidatingAdmissionPolicy's CEL run as the API server runs it, for the policy tests.

The policies' expressions run here with cel-expr-python (the CEL project's
runtime) and its extended string library, which provides Kubernetes'
substring(); requests are shaped as the API server's admission request
(userInfo, operation, object, oldObject; object is null for DELETE, oldObject
null for CREATE) and ``namespaceObject`` is the namespace of a namespaced
object. The order is the API server's: match conditions (all must hold, else
the policy does not apply), then the variables in order (each may read the
ones before it), then the validations until the first that fails. Never shipped.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def evaluate_policy(
    policy: dict[str, Any], request: dict[str, Any], obj: Any, old: Any, namespace: dict[str, Any] | None = None
) -> str | None:
    """None when the policy admits the request, else the failing validation's message."""
    from cel_expr_python import cel
    from cel_expr_python.ext import ext_strings

    dyn = cel.Type.DYN
    env = cel.NewEnv(
        variables={"request": dyn, "object": dyn, "oldObject": dyn, "namespaceObject": dyn, "variables": dyn},
        extensions=[ext_strings.ExtStrings()],
    )
    values = {"request": request, "object": obj, "oldObject": old, "namespaceObject": namespace, "variables": {}}

    def run(expression: str) -> Any:
        result = env.compile(expression).eval(env.Activation(values))
        assert result.type() in (cel.Type.BOOL, cel.Type.STRING), (expression, result.value())
        return result.value()

    spec = policy["spec"]
    if not all(run(c["expression"]) for c in spec.get("matchConditions") or []):
        return None
    for variable in spec.get("variables") or []:
        values["variables"] = dict(values["variables"], **{variable["name"]: run(variable["expression"])})
    for check in spec["validations"]:
        if not run(check["expression"]):
            return run(check["messageExpression"]) if "messageExpression" in check else check["message"]
    return None
