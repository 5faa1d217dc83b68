# SPDX-License-Identifier: Apache-2.0
"""TEST FIXTURES of the argument fuzzer (tests/unit/plugins/modules/test_argument_fuzzing.py), never shipped.

- ``values``: its vocabulary: paths into drawn arguments, what a mutation broke, bad values, generic mutations;
- ``node_arguments``: valid arguments and semantic garbage for the node-side modules;
- ``controller_arguments``: the same for the controller-side modules.
"""
