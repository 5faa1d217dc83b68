# SPDX-License-Identifier: Apache-2.0
"""The checks team and scheduler settings share: each raises the error class its caller gives, naming the setting."""

from __future__ import annotations

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.inputs import settings_checks as checks


class OwnError(ValueError):
    """A caller's own error class."""


def test_known_keys_pass_and_the_first_unknown_one_is_named():
    checks.check_keys("s", {"a": 1}, ("a", "b"), OwnError)
    with pytest.raises(OwnError, match=r"^s: unknown key 'c' \(known: a, b\)$"):
        checks.check_keys("s", {"d": 1, "c": 2, "a": 3}, ("a", "b"), OwnError)
    with pytest.raises(OwnError, match="^s must be a mapping$"):
        checks.check_keys("s", ["a"], ("a",), OwnError)


def test_a_label_map_checks_each_name_and_value():
    assert checks.label_map("l", None, OwnError) == {}
    assert checks.label_map("l", {"example.com/a": "x"}, OwnError) == {"example.com/a": "x"}
    with pytest.raises(OwnError, match="^l must map label names to strings$"):
        checks.label_map("l", ["a"], OwnError)
    with pytest.raises(OwnError, match="^l: 'a b' is not a valid label name$"):
        checks.label_map("l", {"a b": "x"}, OwnError)
    with pytest.raises(OwnError, match=r"^l\.a: 5 is not a valid label value \(quote numbers\)$"):
        checks.label_map("l", {"a": 5}, OwnError)


def test_a_class_key_or_name_resolves_to_a_device_class():
    classes = {"aligned-gpu": {}, "aligned-nic": {}}
    assert checks.resolve_class("w", "gpu", classes, {"gpu": "aligned-gpu"}, OwnError) == "aligned-gpu"
    assert checks.resolve_class("w", "aligned-nic", classes, {}, OwnError) == "aligned-nic"
    with pytest.raises(
        OwnError, match=r"^w: 'tpu' is not a DeviceClass of this site \(classes: aligned-gpu, aligned-nic\)$"
    ):
        checks.resolve_class("w", "tpu", classes, {}, OwnError)
    with pytest.raises(OwnError, match=r"\(classes: none\)$"):
        checks.resolve_class("w", "tpu", {}, {}, OwnError)
