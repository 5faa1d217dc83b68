# SPDX-License-Identifier: Apache-2.0
"""The site report: self-contained HTML pages built from the same device model as the plan."""
