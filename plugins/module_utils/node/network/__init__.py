# SPDX-License-Identifier: Apache-2.0
"""The node's network configuration: RDMA netns mode, kernel modules, SR-IOV VFs and their links.

``netconf`` is the boot-time entry point (``python3 -m ...node.network.netconf``) and the check-mode
plan, which ``plan`` gives the ``network_plan`` module and the validation probe (``topology_info``); ``rdma_config`` and ``sriov`` are the one code path of the
``rdma`` and ``sriov`` modules; ``gpudirect`` makes GPUDirect RDMA ready (ACS redirect cleared on aligned
paths, IOMMU passthrough, peer memory) for the ``gpudirect`` module and the boot-time unit; ``rdma_netlink``, ``netlink_link`` and ``kmod`` talk to the kernel.
Python >= 3.9; pyroute2 only where links are changed.
"""
