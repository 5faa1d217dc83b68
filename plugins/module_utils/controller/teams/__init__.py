# SPDX-License-Identifier: Apache-2.0
"""Teams of a site: namespaces, device quotas, priority tiers, admin access, and Kueue as a
quota engine (its objects, their checks against the planner's capacity, and the what-if model).
"""
