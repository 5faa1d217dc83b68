# SPDX-License-Identifier: Apache-2.0
"""The run's inputs and their checks, before anything changes: the validation stage, the
controller preflight, and the shapes of free-form inputs.
"""
