# SPDX-License-Identifier: Apache-2.0
"""The allocation planner (claims placed on the site's devices as kube-scheduler would) and
utilization measured from published slices and claims, on the same device model.
"""
