# SPDX-License-Identifier: Apache-2.0
"""aligned-dra-driver: the DRA kubelet plugin bundled with the aligned.dra collection.

- the process: ``cli`` (the command line and the main loop), ``server`` (the gRPC services on Unix
  sockets: registration, DRA v1 and v1beta1, device health), ``kube`` (the Kubernetes API),
  ``collection`` (the collection's topology probe and DRA device model, from the checkout or as the
  wheel vendors them), ``validation`` (checks of the values taken from outside);
- publishing: ``inventory`` (the options and the node's devices: the scan and its filters),
  ``publisher`` (the node's ResourceSlices), ``rails`` (each NIC's rail, ``--rails-file``),
  ``uevents`` (kernel uevents that wake the rescan early);
- Prepare and Unprepare: ``driver`` (the driver's state: Prepare, Unprepare, the start-up restore),
  ``claim_locks`` (calls on one claim take turns), ``config`` (opaque device configuration),
  ``checkpoint`` (what it prepared, kept across restarts), ``cdi`` (CDI specs),
  ``container_edits`` (what a prepared device gives its container), ``status`` (claim status
  written in the background), ``fsutil`` (atomic file replacement), ``mig`` (a package: the MIG
  devices each scan publishes in the MIG GPUs' place, instances made and destroyed with crash safety at
  start, the NVML calls MIG needs);
- fractional GPUs: ``sharing`` (shareable devices, enforced limits), ``share_limits`` (a share's
  request and its limit), ``reclaim`` (``--reclaim=evict``: memory above a request taken back),
  ``usage`` (GPU use per claim through NVML), ``usage_gpm`` (the share of SMs busy from NVML's GPM),
  ``usage_metrics`` (its series at scrape time),
  ``claim_pods`` (the pods of each prepared claim), ``polling`` (the thread both NVML watchers poll
  in);
- NICs: ``netdev`` (a PCI function's interfaces over netlink), ``netdev_addresses`` (a NIC's IPv4
  addresses and routes), ``netdev_hook`` (the CDI ``createRuntime`` hook that hands a NIC to a pod);
- health and metrics: ``health`` (device health from every scan: the health stream, the metrics,
  the taints), ``pcihealth`` (a PCI function's signals the probe does not carry), ``metrics``
  (Prometheus metrics and the health endpoint).

``proto`` holds the generated gRPC code of the kubelet's APIs.
"""

__version__ = "0.1.0"
DEFAULT_DRIVER_NAME = "dra.aligned.dev"
CDI_VENDOR = "aligned.dev"
CDI_CLASS = "claim"
CDI_KIND = f"{CDI_VENDOR}/{CDI_CLASS}"
