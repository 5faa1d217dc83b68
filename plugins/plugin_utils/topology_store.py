# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Where this run keeps each probed node's whole topology, on the controller.

The store is a directory in ansible-playbook's own local temporary directory
(``DEFAULT_LOCAL_TMP``): made by the main process before it forks its
workers, so every worker writes and reads the same one, and removed by
Ansible when the run ends, however it ends. Nothing of it outlives the run;
the node files (``<output>/<site>/nodes/<node>.json``) are what stays.
"""

from __future__ import annotations

import hashlib
import os
from urllib.parse import quote

from ansible import constants as C

STORE_NAME = "aligned-dra-topologies"


def store_dir() -> str:
    return os.path.join(C.DEFAULT_LOCAL_TMP, STORE_NAME)


def _name(host: str) -> str:
    """``host`` as a file name: quoted, or hashed where that would be too long."""
    name = quote(host, safe="")
    if len(name) > 200 or name.startswith("."):
        name = "sha256-" + hashlib.sha256(host.encode("utf-8", "surrogateescape")).hexdigest()
    return name


def path_for(host: str) -> str:
    """The file of ``host``'s topology."""
    return os.path.join(store_dir(), _name(host) + ".json")


def network_plan_path_for(host: str) -> str:
    """The file of the network plan the probe made for ``host`` in this run (read once, by ``network_plan``)."""
    return os.path.join(store_dir(), _name(host) + ".network-plan.json")
