# SPDX-License-Identifier: Apache-2.0
"""aligned-dra-driver: the DRA kubelet plugin bundled with the aligned.dra collection."""

__version__ = "0.1.0"
DEFAULT_DRIVER_NAME = "dra.aligned.dev"
CDI_VENDOR = "aligned.dev"
CDI_CLASS = "claim"
CDI_KIND = f"{CDI_VENDOR}/{CDI_CLASS}"
