# SPDX-License-Identifier: Apache-2.0
"""TEST FIXTURES of the argument fuzzer (tests/unit/plugins/modules/test_argument_fuzzing.py), and how hard
every property test searches. Never shipped.

- ``values``: its vocabulary: paths into drawn arguments, what a mutation broke, bad values, generic mutations;
- ``node_arguments``: valid arguments and semantic garbage for the node-side modules;
- ``controller_arguments``: the same for the controller-side modules;
- ``profiles``: the fuzzing profiles (full, quick): each property's example count in each test tier.
"""
