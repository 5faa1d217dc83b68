# SPDX-License-Identifier: Apache-2.0
"""CEL for DRA selectors: Kubernetes functions, error semantics, static checks, memoisation."""

from __future__ import annotations

from fractions import Fraction

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.dra import cel as dra_cel

GPU = {
    "name": "gpu-0000-1a-00-0",
    "attributes": {
        "dra.aligned.dev/kind": {"string": "gpu"},
        "resource.kubernetes.io/numaNode": {"int": 1},
        "driverVersion": {"version": "550.54.15"},
    },
    "capacity": {"memory": {"value": "80Gi"}},
}


def run(expression: str, device: dict | None = None, domains=("gpu.nvidia.com",)) -> tuple[bool, str | None]:
    return dra_cel.Selector(expression).evaluate(dra_cel.cel_device(device or GPU, "dra.aligned.dev", domains))


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("80Gi", Fraction(80 * 2**30)),
        ("1k", Fraction(1000)),
        ("1500m", Fraction(3, 2)),
        ("1e3", Fraction(1000)),
        ("1E", Fraction(10**18)),
        ("0.5Ki", Fraction(512)),
        ("-2", Fraction(-2)),
        (".5", Fraction(1, 2)),
    ],
)
def test_parse_quantity(text, value):
    assert dra_cel.parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "Gi", "1GiB", "1 Gi", "1.2.3", "abc"])
def test_parse_quantity_refuses(text):
    with pytest.raises(ValueError):
        dra_cel.parse_quantity(text)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ('device.attributes["dra.aligned.dev"].kind == "gpu"', True),
        ('device.attributes["resource.kubernetes.io"].numaNode == 1', True),
        ('device.driver == "dra.aligned.dev"', True),
        ('device.capacity["dra.aligned.dev"].memory.compareTo(quantity("40Gi")) > 0', True),
        ('device.capacity["dra.aligned.dev"].memory.isLessThan(quantity("81Gi"))', True),
        ('device.capacity["dra.aligned.dev"].memory == quantity("80Gi")', True),
        ('quantity("1k") == quantity("1000")', True),
        ('quantity("1Gi").add(quantity("1Gi")) == quantity("2Gi")', True),
        ('quantity("1Gi").sub(1).asInteger() == 1073741823', True),
        ('quantity("1500m").isInteger()', False),
        ('quantity("-3").sign() == -1', True),
        ('quantity("1.5").asApproximateFloat() == 1.5', True),
        ('isQuantity("1Gi") && !isQuantity("1GiB")', True),
        ('device.attributes["dra.aligned.dev"].driverVersion.isGreaterThan(semver("550.0.0"))', True),
        ('semver("1.2.3").compareTo(semver("1.10.0")) < 0', True),
        ('semver("1.0.0-alpha").isLessThan(semver("1.0.0"))', True),
        ('semver("v1.2", true).major() == 1 && semver("v1.2", true).minor() == 2', True),
        ('isSemver("1.2.3") && !isSemver("1.2")', True),
        ("[1, 2, 3].isSorted() && [3, 1].sum() == 4 && [3, 1].min() == 1 && [3, 1].max() == 3", True),
        ('"mlx5_12".find("[0-9]+$") == "12" && "a1b2".findAll("[0-9]").size() == 2', True),
        ("sets.contains([1, 2, 3], [1, 2]) && sets.intersects([1], [1, 5]) && sets.equivalent([1, 2], [2, 1])", True),
        ('"MLX".lowerAscii() == "mlx"', True),
        # an unknown domain is an empty map: has() is false, no error
        ('has(device.attributes["gpu.nvidia.com"].uuid)', False),
        # false && error is false, as in Kubernetes
        ('device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].uuid == "x"', False),
    ],
)
def test_kubernetes_functions(expression, expected):
    assert run(expression) == (expected, None)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ('device.attributes["gpu.nvidia.com"].uuid == "x"', "kind"),  # unknown attribute of an empty domain
        ('device.attributes["dra.aligned.dev"].uuid == "x"', "uuid"),
        ('device.attributes["dra.aligned.dev"].kind', "must evaluate to bool"),
        ('quantity("bogus") == quantity("1")', "quantities must match"),
        ('semver("x").major() == 1', "semver"),
        ("[].min() == 1", "empty list"),
        ('quantity("1").compareTo(semver("1.0.0")) == 0', "cannot compare"),
    ],
)
def test_evaluation_errors(expression, message):
    matched, error = run(expression)
    assert matched is False
    assert error is not None
    if message != "kind":
        assert message in error


def test_unknown_domain_without_declaration_is_an_error():
    # a domain that no selector names is not added: reading it is an error
    matched, error = run('device.attributes["other.dev"].x == 1', domains=())
    assert matched is False and "other.dev" in error


def test_memo_is_keyed_on_what_the_expression_reads():
    selector = dra_cel.Selector('device.attributes["dra.aligned.dev"].kind == "gpu"')
    assert selector.reads == [("attributes", "dra.aligned.dev", "kind")]
    nic = {"name": "nic-1", "attributes": {"dra.aligned.dev/kind": {"string": "nic"}}}
    assert selector.evaluate(dra_cel.cel_device(GPU, "dra.aligned.dev")) == (True, None)
    assert selector.evaluate(dra_cel.cel_device(nic, "dra.aligned.dev")) == (False, None)
    assert len(selector.memo) == 2
    other_gpu = dict(GPU, name="gpu-2", attributes=dict(GPU["attributes"], extra={"int": 7}))
    assert selector.evaluate(dra_cel.cel_device(other_gpu, "dra.aligned.dev")) == (True, None)
    assert len(selector.memo) == 2
    missing = {"name": "x", "attributes": {}}
    assert selector.evaluate(dra_cel.cel_device(missing, "dra.aligned.dev"))[1] is not None
    # the whole device passed around: no memo
    assert dra_cel.Selector("size(device.attributes) > 0").reads is None


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("1 + 1", "must evaluate to bool"),
        ("device.nope == 1", "undefined field 'nope'"),
        ('device.attributes["dra.aligned.dev"].kidn == "gpu"', "no dra.aligned.dev device has this attribute"),
        ('device.attributes["resource.kubernetes.io"].numaNode == "0"', "is an int but is compared with"),
        ('device.attributes["dra.aligned.dev"].rdma == 1', "is a bool but is compared with"),
        ('device.capacity["dra.aligned.dev"].mem.isGreaterThan(quantity("1"))', "no dra.aligned.dev device has this"),
        ('device.attributes["Bad_Domain"].x == 1', "not a DNS subdomain"),
        ("device.driver ==", "does not compile"),
        ("nosuchfunction(1)", "does not compile"),
        ("true || " * 1500 + "true", "characters long, limit 10240"),
    ],
)
def test_check_expression_finds_problems(expression, message):
    problems = dra_cel.check_expression(expression)
    assert any(message in p for p in problems), problems


@pytest.mark.parametrize(
    "expression",
    [
        'device.driver == "dra.aligned.dev" && device.attributes["dra.aligned.dev"].kind in ["gpu", "accelerator"]',
        'device.attributes["gpu.nvidia.com"].productName == "H100"',  # other drivers' domains are not catalogued
        'device.capacity["dra.aligned.dev"].memory.compareTo(quantity("40Gi")) >= 0',
        'device.attributes["resource.kubernetes.io"].numaNode == 0',
    ],
)
def test_check_expression_accepts(expression):
    assert dra_cel.check_expression(expression) == []


def test_referenced_domains():
    assert dra_cel.referenced_domains(
        ['device.attributes["a.io"].x == 1', "device.capacity['b.io'].y.sign() == 1", "true"]
    ) == {"a.io", "b.io"}


# -- list-typed attributes and includes() (DRAListTypeAttributes) ------------------------------------

LISTED = {
    "name": "cpu-0",
    "attributes": {
        "resource.kubernetes.io/numaNode": {"ints": [0, 1]},
        "resource.kubernetes.io/pcieRoot": {"strings": ["pci0000:00", "pci0000:16"]},
        "smt": {"bools": [True]},
        "firmware": {"versions": ["1.2.3", "2.0.0"]},
        "socket": {"int": 0},
    },
}
NUMA_NODE = 'device.attributes["resource.kubernetes.io"].numaNode'
PCIE_ROOT = 'device.attributes["resource.kubernetes.io"].pcieRoot'


@pytest.mark.parametrize(
    ("expression", "device", "expected"),
    [
        (f"{NUMA_NODE}.includes(1)", LISTED, True),
        (f"{NUMA_NODE}.includes(2)", LISTED, False),
        (f"{NUMA_NODE}.includes(1)", GPU, True),  # a scalar: equality
        (f"{NUMA_NODE}.includes(0)", GPU, False),
        (f'{PCIE_ROOT}.includes("pci0000:16")', LISTED, True),
        (f'{PCIE_ROOT}.includes("pci0000:17")', LISTED, False),
        ('device.attributes["dra.aligned.dev"].smt.includes(true)', LISTED, True),
        ('device.attributes["dra.aligned.dev"].smt.includes(1)', LISTED, False),  # a bool is not a number
        ('device.attributes["dra.aligned.dev"].socket.includes(false)', LISTED, False),
        ('device.attributes["dra.aligned.dev"].firmware.includes(semver("2.0.0"))', LISTED, True),
        ('device.attributes["dra.aligned.dev"].firmware.includes(semver("2.0.1"))', LISTED, False),
        ('device.attributes["dra.aligned.dev"].driverVersion.includes(semver("550.54.15"))', GPU, True),
        (f'{NUMA_NODE}.includes("1")', LISTED, False),
        # a list attribute is a CEL list: the macros work on it, == a scalar is simply false
        (f"{NUMA_NODE}.exists(n, n > 0)", LISTED, True),
        (f"{NUMA_NODE} == 0", LISTED, False),
    ],
)
def test_includes_and_list_attributes(expression, device, expected):
    assert run(expression, device, ()) == (expected, None)


def test_includes_refuses_lists_longer_than_a_device_may_hold():
    long = {"name": "x", "attributes": {"resource.kubernetes.io/numaNode": {"ints": list(range(49))}}}
    matched, error = run(f"{NUMA_NODE}.includes(1)", long, ())
    assert not matched and "longer than 48" in error


def test_list_attributes_are_memo_keys():
    selector = dra_cel.Selector(f"{NUMA_NODE}.includes(1)")
    one = dra_cel.cel_device(LISTED, "dra.aligned.dev")
    other = dra_cel.cel_device({"name": "y", "attributes": {"resource.kubernetes.io/numaNode": {"ints": [2, 3]}}}, "d")
    assert selector.evaluate(one) == (True, None)
    assert selector.evaluate(other) == (False, None)
    assert len(selector.memo) == 2
