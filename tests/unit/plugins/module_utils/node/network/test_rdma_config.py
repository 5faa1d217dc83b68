# SPDX-License-Identifier: Apache-2.0
"""RDMA netns mode and modules: persistence, run-time change, reboot detection.

The kernels of the test machines have no RDMA core, so the NETLINK_RDMA side
is played by ``KernelRdma`` below: it keeps the mode like ``ib_core`` does
and refuses a change with EBUSY while "other network namespaces" exist, as
``rdma_compatdev_set`` does. The message encoding itself is tested byte by
byte in test_rdma_netlink.py.
"""

from __future__ import annotations

import errno

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.node.network import rdma_config, rdma_netlink


class KernelRdma:
    """TEST FAKE of the kernel's RDMA system settings (strict: only 0/1 modes)."""

    def __init__(self, mode="shared", other_namespaces=False, loaded=True):
        self.mode = mode
        self.other_namespaces = other_namespaces
        self.loaded = loaded
        self.sets = []

    def __call__(self):
        return self

    def __enter__(self):
        if not self.loaded:
            raise rdma_netlink.RdmaNetlinkError("NETLINK_RDMA is not available", errno.EPROTONOSUPPORT)
        return self

    def __exit__(self, *exc):
        return None

    def get(self):
        return {"netns_mode": self.mode, "copy_on_fork": True, "privileged_qkey": False}

    def set_netns_mode(self, mode):
        self.sets.append(mode)
        if mode != self.mode and self.other_namespaces:
            raise rdma_netlink.RdmaNetlinkError("Device or resource busy (errno 16)", errno.EBUSY)
        self.mode = mode


@pytest.fixture
def dirs(tmp_path):
    return {"modprobe_dir": str(tmp_path / "modprobe.d"), "modules_load_dir": str(tmp_path / "modules-load.d")}


def run(kernel, dirs, check_mode=False, modprobe=None, **desired):
    loaded = []

    def fake_modprobe(name):
        loaded.append(name)
        return 0, ""

    result = rdma_config.apply(
        desired,
        check_mode=check_mode,
        system_factory=kernel,
        modprobe=modprobe or fake_modprobe,
        sysfs_root="/sys",
        **dirs,
    )
    result["loaded"] = loaded
    return result


def test_switch_at_run_time_then_nothing_to_do(dirs, tmp_path):
    kernel = KernelRdma("shared")
    first = run(kernel, dirs, netns_mode="exclusive")
    assert first["changed"] and not first["reboot_required"]
    assert kernel.mode == "exclusive" and kernel.sets == ["exclusive"]
    conf = (tmp_path / "modprobe.d" / "aligned-dra-rdma.conf").read_text()
    assert "options ib_core netns_mode=0\n" in conf
    assert first["diff"]["before"]["netns_mode"] == "shared"
    assert first["diff"]["after"]["netns_mode"] == "exclusive"
    second = run(kernel, dirs, netns_mode="exclusive")
    assert not second["changed"] and second["actions"] == []
    assert kernel.sets == ["exclusive"]


def test_kernel_refusal_means_reboot(dirs, tmp_path):
    kernel = KernelRdma("shared", other_namespaces=True)
    result = run(kernel, dirs, netns_mode="exclusive")
    assert result["changed"] and result["reboot_required"] and result["disruptive"]
    assert "EBUSY" in result["reasons"][0]
    assert kernel.mode == "shared"
    # The persistent half is in place for the next boot.
    assert "netns_mode=0" in (tmp_path / "modprobe.d" / "aligned-dra-rdma.conf").read_text()
    assert result["diff"]["after"]["netns_mode"] == "shared"


def test_check_mode_changes_nothing(dirs, tmp_path):
    kernel = KernelRdma("shared")
    result = run(kernel, dirs, check_mode=True, netns_mode="exclusive", modules=["ib_core", "mlx5_ib"])
    assert result["changed"]
    assert kernel.mode == "shared" and kernel.sets == []
    assert not (tmp_path / "modprobe.d").exists() and not (tmp_path / "modules-load.d").exists()
    assert result["loaded"] == []
    assert "rdma system set netns exclusive" in result["actions"]
    assert result["disruptive"]


def test_modules_loaded_after_options_and_persisted(dirs, tmp_path, monkeypatch):
    order = []
    kernel = KernelRdma(loaded=False)

    def modprobe(name):
        order.append((name, (tmp_path / "modprobe.d" / "aligned-dra-rdma.conf").exists()))
        return 0, ""

    monkeypatch.setattr(rdma_config.kmod, "is_loaded", lambda name, root: False)
    result = run(kernel, dirs, modprobe=modprobe, netns_mode="exclusive", modules=["ib_core", "mlx5_ib"])
    assert order == [("ib_core", True), ("mlx5_ib", True)]
    assert (tmp_path / "modules-load.d" / "aligned-dra-rdma.conf").read_text().splitlines()[1:] == [
        "ib_core",
        "mlx5_ib",
    ]
    # ib_core is not loaded (in this fake): the mode applies when it loads.
    assert result["netns_mode"]["runtime"] is None
    assert not result["reboot_required"]
    # modules and files only, no namespace move: nothing to drain for
    assert not result["disruptive"]


def test_failed_modprobe_names_the_field(dirs, monkeypatch):
    monkeypatch.setattr(rdma_config.kmod, "is_loaded", lambda name, root: False)
    with pytest.raises(rdma_config.RdmaConfigError, match="^modules: modprobe mlx5_ib failed"):
        run(KernelRdma(), dirs, modprobe=lambda name: (1, "not found"), modules=["mlx5_ib"])


def test_empty_module_list_removes_the_file(dirs, tmp_path, monkeypatch):
    monkeypatch.setattr(rdma_config.kmod, "is_loaded", lambda name, root: True)
    run(KernelRdma(), dirs, modules=["ib_core"])
    assert (tmp_path / "modules-load.d" / "aligned-dra-rdma.conf").exists()
    result = run(KernelRdma(), dirs, modules=[])
    assert result["changed"]
    assert not (tmp_path / "modules-load.d" / "aligned-dra-rdma.conf").exists()


@pytest.mark.parametrize(
    ("desired", "message"),
    [
        ({"netns_mode": "private"}, "^netns_mode: must be one of shared, exclusive"),
        ({"modules": "ib_core"}, "^modules: must be a list"),
        ({"modules": ["ib core"]}, "^modules: 'ib core' is not a kernel module name"),
        ({"modules": ["ib_core", "ib-core"]}, "^modules: a module is listed twice"),
    ],
)
def test_bad_input_changes_nothing(dirs, tmp_path, desired, message):
    kernel = KernelRdma()
    with pytest.raises(rdma_config.RdmaConfigError, match=message):
        run(kernel, dirs, **desired)
    assert not (tmp_path / "modprobe.d").exists() and kernel.sets == []


def test_captured_tree_is_read_not_changed(dirs, tmp_path):
    tree = tmp_path / "sys"
    (tree / "module/ib_core/parameters").mkdir(parents=True)
    (tree / "module/ib_core/parameters/netns_mode").write_text("Y\n")
    kernel = KernelRdma("exclusive")  # the host's state must not be used
    result = rdma_config.apply({"netns_mode": "exclusive"}, sysfs_root=str(tree), system_factory=kernel, **dirs)
    assert result["netns_mode"] == {"runtime": "shared", "source": "module parameter", "desired": "exclusive"}
    assert result["reboot_required"] and "captured tree" in result["reasons"][0]
    assert not result["live"] and kernel.sets == []


def test_check_mode_predicts_reboot_from_namespaces(dirs, tmp_path):
    proc = tmp_path / "proc"
    for pid, target in (("1", "net:[1]"), ("2", "net:[2]")):
        (proc / pid / "ns").mkdir(parents=True)
        (proc / pid / "ns" / "net").write_text(target)  # distinct files stand for distinct namespaces
    result = rdma_config.apply(
        {"netns_mode": "exclusive"},
        procfs_root=str(proc),
        check_mode=True,
        system_factory=KernelRdma("shared"),
        **dirs,
    )
    assert result["reboot_required"] and "network namespaces exist" in result["reasons"][0]


def test_counting_real_namespaces_sees_at_least_this_process():
    assert rdma_config.count_network_namespaces("/proc", "/nonexistent") >= 1
