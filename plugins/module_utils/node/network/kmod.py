# SPDX-License-Identifier: Apache-2.0
"""Kernel modules now and at boot, and small managed configuration files.

- Loaded modules are read from ``<sysfs_root>/module/<name>`` (a loaded or
  built-in module has that directory; names use ``_`` where ``modprobe``
  accepts ``-`` too).
- Modules are loaded with ``modprobe`` (only on a live node).
- Boot-time loading is a file in ``/etc/modules-load.d/`` and module options
  a file in ``/etc/modprobe.d/``, both owned by this collection (a header
  says so) and written atomically.

Runs on nodes (Python >= 3.9), no Ansible imports.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any

HEADER = "# Managed by the aligned.dra Ansible collection; local changes are overwritten.\n"

_MODULE_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_PARAM_VALUE_RE = re.compile(r"^[A-Za-z0-9_.,:+-]{1,128}$")


class KmodError(Exception):
    pass


def canonical(name: str) -> str:
    """The kernel's spelling of a module name (``-`` becomes ``_``)."""
    return name.replace("-", "_")


def check_module_name(name: str, field: str = "modules") -> str:
    if not isinstance(name, str) or not _MODULE_NAME_RE.match(name):
        raise KmodError(f"{field}: {name!r} is not a kernel module name (letters, digits, _ and -)")
    return name


def is_loaded(name: str, sysfs_root: str = "/sys") -> bool:
    return os.path.isdir(os.path.join(sysfs_root, "module", canonical(name)))


def module_parameter(name: str, parameter: str, sysfs_root: str = "/sys") -> str | None:
    """Current value of a loaded module's parameter, or None."""
    path = os.path.join(sysfs_root, "module", canonical(name), "parameters", parameter)
    try:
        with open(path, encoding="ascii") as fh:
            return fh.read().strip()
    except OSError:
        return None


def run_modprobe(name: str) -> tuple[int, str]:
    """``modprobe NAME``: (exit status, stderr)."""
    try:
        proc = subprocess.run(["modprobe", name], capture_output=True, text=True, check=False, timeout=120)
    except FileNotFoundError:
        return 127, "modprobe is not installed"
    return proc.returncode, proc.stderr.strip()


def load(name: str, runner: Callable[[str], tuple[int, str]] = run_modprobe) -> None:
    code, err = runner(name)
    if code != 0:
        raise KmodError(f"modprobe {name} failed ({code}): {err or 'no message'}")


def modules_load_content(modules: Iterable[str]) -> str:
    lines = [HEADER]
    for name in modules:
        lines.append(check_module_name(name) + "\n")
    return "".join(lines)


def modprobe_options_content(options: dict[str, dict[str, Any]]) -> str:
    """``options MODULE key=value ...`` lines, modules and keys in sorted order."""
    lines = [HEADER]
    for module in sorted(options):
        check_module_name(module, "module options")
        params = []
        for key in sorted(options[module]):
            value = options[module][key]
            if isinstance(value, bool):
                value = 1 if value else 0
            text = str(value)
            if not re.match(r"^[A-Za-z0-9_]+$", key) or not _PARAM_VALUE_RE.match(text):
                raise KmodError(f"module options: {module} {key}={text!r} is not a valid module parameter")
            params.append(f"{key}={text}")
        if params:
            lines.append(f"options {canonical(module)} {' '.join(params)}\n")
    return "".join(lines)


def configured_options(directory: str, module: str, parameter: str, skip: str | None = None) -> list[str]:
    """Files in a modprobe.d directory that set ``module``'s ``parameter``.

    ``skip`` (a file name) is left out: the collection's own file.
    """
    found = []
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return found
    wanted = canonical(module)
    for name in names:
        if name == skip or not name.endswith(".conf"):
            continue
        try:
            with open(os.path.join(directory, name), encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    words = line.split("#", 1)[0].split()
                    if len(words) >= 3 and words[0] == "options" and canonical(words[1]) == wanted:
                        if any(w.split("=", 1)[0] == parameter for w in words[2:]):
                            found.append(os.path.join(directory, name))
                            break
        except OSError:
            continue
    return found


def read_file(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except FileNotFoundError:
        return None


def write_file(path: str, content: str | None, mode: int = 0o644) -> None:
    """Write ``content`` atomically, or remove the file when content is None."""
    if content is None:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        return
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".aligned-dra-", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(content)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


class FileChange:
    """A managed file: what it holds, what it should hold, and applying that."""

    def __init__(self, path: str, desired: str | None) -> None:
        self.path = path
        self.desired = desired
        self.current = read_file(path)

    @property
    def changed(self) -> bool:
        return self.current != self.desired

    def diff(self) -> dict[str, str]:
        return {
            "before_header": self.path,
            "after_header": self.path,
            "before": self.current or "",
            "after": self.desired or "",
        }

    def apply(self) -> None:
        if self.changed:
            write_file(self.path, self.desired)
            self.current = self.desired
