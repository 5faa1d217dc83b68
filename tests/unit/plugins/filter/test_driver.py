# SPDX-License-Identifier: Apache-2.0
"""The driver role's filters: the image platform check says only the broken rules, as the validation stage does."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.aligned.dra.plugins.filter.driver import FilterModule, driver_image_problems
from ansible_collections.aligned.dra.plugins.module_utils.controller.validation import validate

IMAGE = {
    "aligned_dra_driver_mode": "daemonset",
    "aligned_dra_driver_state": "present",
    "aligned_dra_driver_image_context": True,
    "aligned_dra_driver_base_image": "docker.io/library/python:3.12-slim",
    "aligned_dra_driver_image_python": "3.12",
    "aligned_dra_driver_image_glibc": "2.36",
}


def test_driver_image_problems_is_registered():
    assert FilterModule().filters()["driver_image_problems"] is driver_image_problems


def test_driver_image_problems_say_what_the_validation_stage_says():
    assert driver_image_problems(IMAGE) == []
    settings = dict(IMAGE, aligned_dra_driver_image_python="3.11", aligned_dra_driver_image_glibc="2.5")
    lines = driver_image_problems(settings)
    # the image the DaemonSet runs is set: the validation's other driver rule holds
    host = {"n1": {k: v for k, v in settings.items() if k != "aligned_dra_driver_state"}}
    host["n1"]["aligned_dra_driver_image"] = "localhost/aligned-dra-driver:0.1.0"
    problems = validate.validate(["n1"], lambda h: list(host[h]), lambda h, n, d: host[h].get(n, d), ["driver"])[0]
    # the same rules, the same words: one code path
    assert sorted(lines) == sorted(p.line().split(": ", 1)[1] for p in problems)
    # the base image's Python and the glibc are wrong; the Python's minimum holds and is not said
    assert [line.split(" = ")[0] for line in sorted(lines)] == [
        "aligned_dra_driver_image_glibc",
        "aligned_dra_driver_image_python",
    ]
    assert not any("or newer written as a string" in line for line in lines)


def test_driver_image_problems_needs_every_setting():
    with pytest.raises(AnsibleFilterError, match="aligned_dra_driver_base_image"):
        driver_image_problems({k: v for k, v in IMAGE.items() if k != "aligned_dra_driver_base_image"})


def test_the_split_filters_are_registered_and_refuse_with_the_variable_named():
    from ansible_collections.aligned.dra.plugins.filter.driver import (
        driver_args,
        driver_instances_of,
        driver_split_problems,
    )

    filters = FilterModule().filters()
    assert filters["driver_instances"] is driver_instances_of
    assert filters["driver_split_problems"] is driver_split_problems
    settings = {"split_gpu_driver": "gpu.aligned.dev"}
    main, gpu = driver_instances_of(settings)
    assert driver_args(settings) == driver_args(settings, main) != driver_args(settings, gpu)
    assert "--kinds=gpu,accelerator" in driver_args(settings, gpu)
    assert driver_split_problems(settings) == []
    bad = {"split_gpu_driver": "nic.aligned.dev"}
    (line,) = driver_split_problems(bad)
    assert line.startswith('aligned_dra_device_options.split_gpu_driver = "nic.aligned.dev": ')
    with pytest.raises(AnsibleFilterError, match=r"driver_instances: aligned_dra_device_options\.split_gpu_driver"):
        driver_instances_of(bad)
