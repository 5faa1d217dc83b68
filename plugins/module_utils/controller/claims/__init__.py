# SPDX-License-Identifier: Apache-2.0
"""DeviceClasses and ResourceClaimTemplates for a site, rendered and checked per Kubernetes minor."""
