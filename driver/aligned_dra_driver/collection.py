# SPDX-License-Identifier: Apache-2.0
"""The collection's shared libraries: the topology probe and the DRA device model.

There is one source of each in the collection: the package
``plugins/module_utils/node/topology/`` (with ``rails``, the rail rule,
``rail_record``, the driver's record of the NICs it saw on the host, and ``addresses`` for
``--rails-file``) and ``plugins/module_utils/dra/`` (``model``, with
``slices`` for the ResourceSlices, ``cel`` for ``--selector`` and
``device_model``, ``dra_mig``: MIG in the device model), and ``plugins/module_utils/node/mig/`` (``mig_state``: a GPU's MIG
state read from NVML; ``mig_packing``: placements for wanted MIG instances; ``mig_holders``: the processes that
hold a GPU, named for a refused MIG change). The driver's wheel carries them as the subpackage
``aligned_dra_driver._collection``, copied there by the build backend
(``driver/build_backend.py``) when the wheel is built; in a checkout of
the collection the driver imports them through ``ansible_collections``
instead. Nothing else in the driver reads the sysfs
topology; ``pcihealth`` reads only the health signals of functions already
probed (config space, AER counters, carrier).
"""

from __future__ import annotations

from types import ModuleType

try:  # an installed wheel
    from aligned_dra_driver._collection.dra import mig as dra_mig
    from aligned_dra_driver._collection.dra import model as dra
    from aligned_dra_driver._collection.dra import slices as dra_slices
    from aligned_dra_driver._collection.node import topology
    from aligned_dra_driver._collection.node.mig import holders as mig_holders
    from aligned_dra_driver._collection.node.mig import nvml_state as mig_state
    from aligned_dra_driver._collection.node.mig import packing as mig_packing
    from aligned_dra_driver._collection.node.topology import addresses as topology_addresses
    from aligned_dra_driver._collection.node.topology import rail_record
    from aligned_dra_driver._collection.node.topology import rails as rail_rule
except ImportError:  # the collection checkout (tests, development)
    from ansible_collections.aligned.dra.plugins.module_utils.dra import mig as dra_mig
    from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra
    from ansible_collections.aligned.dra.plugins.module_utils.dra import slices as dra_slices
    from ansible_collections.aligned.dra.plugins.module_utils.node import topology
    from ansible_collections.aligned.dra.plugins.module_utils.node.mig import holders as mig_holders
    from ansible_collections.aligned.dra.plugins.module_utils.node.mig import nvml_state as mig_state
    from ansible_collections.aligned.dra.plugins.module_utils.node.mig import packing as mig_packing
    from ansible_collections.aligned.dra.plugins.module_utils.node.topology import addresses as topology_addresses
    from ansible_collections.aligned.dra.plugins.module_utils.node.topology import rail_record
    from ansible_collections.aligned.dra.plugins.module_utils.node.topology import rails as rail_rule

__all__ = [
    "dra",
    "dra_cel",
    "dra_slices",
    "dra_mig",
    "mig_holders",
    "mig_packing",
    "mig_state",
    "rail_record",
    "rail_rule",
    "topology",
    "topology_addresses",
]


def dra_cel() -> ModuleType:
    """The CEL library of the collection (needs cel-expr-python: ``pip install aligned-dra-driver[cel]``)."""
    try:
        from aligned_dra_driver._collection.dra import cel as module
    except ImportError:
        from ansible_collections.aligned.dra.plugins.module_utils.dra import cel as module
    if module.CEL_IMPORT_ERROR is not None:
        raise ImportError(f"--selector needs cel-expr-python: {module.CEL_IMPORT_ERROR}")
    return module
