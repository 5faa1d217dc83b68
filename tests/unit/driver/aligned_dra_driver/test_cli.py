# SPDX-License-Identifier: Apache-2.0
"""The command line's device kinds (``--kinds``), and the runner's publication loop: what the first scan decides
before anything is published."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest
from aligned_dra_driver import cli
from aligned_dra_driver.cli import Runner
from aligned_dra_driver.collection import dra


def loop_once(scanned: bool) -> list[str]:
    """Run the publication loop of a runner that is told to stop at once; the calls it made."""
    calls: list[str] = []
    stopping = threading.Event()
    stopping.set()
    runner = SimpleNamespace(
        stopping=stopping,
        wake=threading.Event(),
        publish=lambda: calls.append("publish"),
        sync=lambda: calls.append("sync"),
        _wait_time=lambda: 0.0,
    )
    Runner.publish_loop(runner, scanned)
    return calls


@pytest.mark.parametrize(("scanned", "calls"), [(True, ["publish"]), (False, [])])
def test_a_failed_first_scan_publishes_nothing(scanned, calls):
    # the inventory of a failed scan is empty: publishing it would delete the node's slices
    assert loop_once(scanned) == calls


# one function of each kind, as the probe reports them: a VF's PF is an RDMA NIC
TOPOLOGY = {
    "devices": [
        {"pci_address": "0000:18:00.0", "kind": "gpu"},
        {"pci_address": "0000:1a:00.0", "kind": "accelerator"},
        {"pci_address": "0000:19:00.0", "kind": "rdma"},
        {"pci_address": "0000:19:00.2", "kind": "nic", "physfn": "0000:19:00.0"},
        {"pci_address": "0000:5b:00.0", "kind": "nic"},
    ]
}


def published(*argv: str) -> dict[str, str]:
    """``{pci address: kind}`` the driver publishes with this command line."""
    return dra.published_kinds(TOPOLOGY, cli.device_options(cli.parser().parse_args(["--node-name=n1", *argv])))


def test_the_kinds_are_the_device_models():
    assert tuple(cli.KIND_OPTIONS) == dra.DEVICE_KINDS
    assert set(cli.KIND_OPTIONS.values()) <= set(dra.DEFAULT_OPTIONS)


@pytest.mark.parametrize(
    ("argv", "kinds"),
    [
        ([], {"0000:18:00.0": "gpu", "0000:1a:00.0": "accelerator", "0000:19:00.0": "nic", "0000:19:00.2": "vf"}),
        (["--kinds=gpu,accelerator"], {"0000:18:00.0": "gpu", "0000:1a:00.0": "accelerator"}),
        (["--kinds=nic,vf"], {"0000:19:00.0": "nic", "0000:19:00.2": "vf"}),
        (["--kinds=nic,vf", "--plain-nics"], {"0000:19:00.0": "nic", "0000:19:00.2": "vf", "0000:5b:00.0": "nic"}),
        (["--kinds=gpu", "--plain-nics"], {"0000:18:00.0": "gpu"}),  # plain NICs only with the kind nic
        (["--kinds=vf"], {"0000:19:00.2": "vf"}),  # a VF does not need its PF published
        (["--kinds=vf", "--exclude=0000:19:00.0"], {}),  # an excluded PF takes its VFs with it
        (["--kinds=nic,vf", "--no-vfs"], {"0000:19:00.0": "nic"}),  # --no-vfs wins
        (["--kinds=gpu,gpu"], {"0000:18:00.0": "gpu"}),
    ],
)
def test_kinds_choose_what_is_published(argv, kinds):
    assert published(*argv) == kinds


@pytest.mark.parametrize(
    ("kinds", "message"),
    [
        ("", "--kinds '' has an empty kind"),
        ("gpu,,nic", "--kinds 'gpu,,nic' has an empty kind"),
        ("gpu,", "--kinds 'gpu,' has an empty kind"),
        ("gpus,nic", "--kinds: unknown kind 'gpus' (kinds: gpu,accelerator,nic,vf)"),
        ("GPU", "unknown kind 'GPU'"),
    ],
)
def test_an_empty_or_unknown_kind_is_a_usage_error(tmp_path, capsys, kinds, message):
    args = cli.parser().parse_args(["--node-name=n1", f"--sysfs-root={tmp_path}", f"--kinds={kinds}"])
    with pytest.raises(SystemExit) as exited:
        cli.build(args)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("--reclaim-margin=0", "--reclaim-margin must lie between 0 and 100"),
        ("--reclaim-margin=100", "--reclaim-margin must lie between 0 and 100"),
        ("--reclaim-margin=nan", "--reclaim-margin must lie between 0 and 100"),
        ("--reclaim-interval=0", "--reclaim-interval must lie in 0.1..3600"),
        ("--reclaim-interval=inf", "--reclaim-interval must lie in 0.1..3600"),
    ],
)
def test_bad_reclaim_values_are_usage_errors(tmp_path, capsys, option, message):
    args = cli.parser().parse_args(["--node-name=n1", f"--sysfs-root={tmp_path}", "--reclaim=evict", option])
    with pytest.raises(SystemExit) as exited:
        cli.build(args)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_reclaim_is_off_by_default_and_never_imports_nvml_at_start(tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "pynvml", None)  # an import of it would raise
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'http://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n"
    )
    base = ["--node-name=n1", f"--sysfs-root={tmp_path}", f"--kubeconfig={kubeconfig}", f"--state-dir={tmp_path}"]
    assert cli.build(cli.parser().parse_args(base))["reclaimer"] is None
    parts = cli.build(cli.parser().parse_args([*base, "--reclaim=evict", "--reclaim-margin=7.5"]))
    assert parts["reclaimer"].margin == 7.5 and parts["reclaimer"].interval == 2.0
    assert parts["reclaimer"].nvml is None


def test_the_gpu_watcher_reports_nvmls_gpu_signals_to_the_health_monitor(tmp_path):
    """gpu-lost and critical XIDs taint the GPU and its MIG devices only if the running driver wires them."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'http://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n"
    )
    base = ["--node-name=n1", f"--sysfs-root={tmp_path}", f"--kubeconfig={kubeconfig}", f"--state-dir={tmp_path}"]
    parts = cli.build(cli.parser().parse_args([*base, "--mig=dynamic"]))
    assert parts["watcher"].health is parts["monitor"]
    assert parts["opts"].mig == "dynamic" and parts["opts"].mig_gpus is None
