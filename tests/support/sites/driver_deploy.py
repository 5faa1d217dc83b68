# SPDX-License-Identifier: Apache-2.0
"""TEST FIXTURE: the driver's settings the deploy tests render, and the minors they render them for.
Never shipped.

- ``DS``: DaemonSet mode with an image and an excluded NIC pattern; ``MINORS``: the Kubernetes releases;
- ``by_kind``: the rendered objects of one kind.
"""

from __future__ import annotations

MINORS = ("1.34.0", "1.35.0", "1.36.0", "1.37.0")


DS = {"mode": "daemonset", "image": "registry.example/aligned-dra-driver:0.1.0", "exclude": ["eno*"]}


def by_kind(objects, kind):
    return [o for o in objects if o["kind"] == kind]
