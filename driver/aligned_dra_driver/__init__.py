# SPDX-License-Identifier: Apache-2.0
"""aligned-dra-driver: the DRA kubelet plugin bundled with the aligned.dra collection.

Its top holds the command line and what every package shares:

- ``cli`` (the command line and the main loop; ``__main__`` runs it as ``python -m aligned_dra_driver``);
- ``collection`` (the collection's topology probe and DRA device model, from the checkout or as the
  wheel vendors them), ``config`` (opaque device configuration), ``validation`` (checks of the values
  taken from outside), ``fsutil`` (atomic file replacement), ``polling`` (the thread both NVML
  watchers poll in), ``kube`` (the Kubernetes API), and the constants below.

Its packages, one per concern, bottom first (docs/development.md, "Layers"; a package imports its own
layer and lower ones, never a higher one, and the helpers above import none of them):

- ``network`` (NICs handed to pods: interfaces, addresses and routes, the CDI hook) and ``sharing``
  (fractional GPUs: shareable devices, MPS, a share's request and limit);
- ``devices`` (the scan and its filters, the ResourceSlices, rails, health and taints, uevents);
- ``claims`` (what Prepare leaves on the node: checkpoint, CDI specs, container edits, status
  writes, per-claim locks, the claims' pods);
- ``usage`` (GPU use through NVML, GPM, the use series, the reclaim watcher, metrics and the health
  endpoint);
- ``mig`` (MIG devices published, instances made and destroyed with crash safety);
- ``kubelet`` (the gRPC services on their sockets, Prepare, Unprepare and the start-up restore, the
  generated gRPC code in ``kubelet/proto``).

``cli`` may import them all.
"""

__version__ = "0.1.0"
DEFAULT_DRIVER_NAME = "dra.aligned.dev"
CDI_VENDOR = "aligned.dev"
CDI_CLASS = "claim"
CDI_KIND = f"{CDI_VENDOR}/{CDI_CLASS}"
