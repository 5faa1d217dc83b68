# SPDX-License-Identifier: Apache-2.0
"""How the bundled driver is installed: cluster objects, the DaemonSet, host-mode units."""
