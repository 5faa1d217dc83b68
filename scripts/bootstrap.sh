#!/usr/bin/env bash
# Prepare everything the demo and the tests need, on a fresh machine or again.
#
#   ./scripts/bootstrap.sh          prepare, then print the environment to use
#   ./scripts/bootstrap.sh --quiet  prepare only
#   . scripts/bootstrap.sh          prepare and export that environment into
#                                   the calling shell (scripts/test.sh and
#                                   scripts/demo.sh do this)
#
# Every step is skipped when its stamp (a checksum of its inputs) or its result
# is already there, so a re-run takes seconds. Steps:
#   1. Debian packages (podman, runc, debootstrap, hwloc, prometheus for the
#      monitoring tests, ...) when missing
#   2. .venv from a Python >= 3.12, pip install -r requirements-dev.txt (exact pins)
#   3. kubernetes.core and containers.podman taken out of the `ansible` wheel
#      (Galaxy is unreachable) into .cache/collections, plus a symlink
#      .cache/collections/ansible_collections/aligned/dra -> repository root
#   4. a private podman config that uses runc (crun fails on this kernel)
#   5. the offline Molecule node image localhost/aligned-dra-node:bookworm
#   6. the offline stand-in for the get-pip script ansible-test downloads
#
# Knobs (environment): ALIGNED_DRA_PYTHON (interpreter for .venv),
# ALIGNED_DRA_DEBIAN_MIRROR (for debootstrap), ALIGNED_DRA_SKIP_IMAGE=1 and
# ALIGNED_DRA_SKIP_APT=1 (skip steps 5 / 1, e.g. for a pure-Python check).

# ---------------------------------------------------------------------------
# Environment: pure assignments, safe to run in the caller's shell.
# ---------------------------------------------------------------------------
_aligned_dra_env() {
    ALIGNED_DRA_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
    ALIGNED_DRA_CACHE="$ALIGNED_DRA_ROOT/.cache"
    ALIGNED_DRA_VENV="$ALIGNED_DRA_ROOT/.venv"
    ALIGNED_DRA_NODE_IMAGE="localhost/aligned-dra-node:bookworm"
    # Collections: ours (via symlink) plus the two taken from the ansible wheel.
    ANSIBLE_COLLECTIONS_PATH="$ALIGNED_DRA_CACHE/collections"
    # Absolute, so ansible run from any directory (pytest tmp dirs) gets it;
    # Molecule replaces it with its own generated file, which is fine.
    ANSIBLE_CONFIG="$ALIGNED_DRA_ROOT/ansible.cfg"
    # podman reads this instead of /etc/containers/containers.conf.
    CONTAINERS_CONF="$ALIGNED_DRA_CACHE/containers/containers.conf"
    VIRTUAL_ENV="$ALIGNED_DRA_VENV"
    case ":$PATH:" in
        *":$ALIGNED_DRA_VENV/bin:"*) ;;
        *) PATH="$ALIGNED_DRA_VENV/bin:$PATH" ;;
    esac
    # Never prompt (apt, pip, ansible-galaxy) and never wait for a TTY.
    DEBIAN_FRONTEND=noninteractive
    PIP_DISABLE_PIP_VERSION_CHECK=1
    export ALIGNED_DRA_ROOT ALIGNED_DRA_CACHE ALIGNED_DRA_VENV ALIGNED_DRA_NODE_IMAGE \
        ANSIBLE_COLLECTIONS_PATH ANSIBLE_CONFIG CONTAINERS_CONF VIRTUAL_ENV PATH \
        DEBIAN_FRONTEND PIP_DISABLE_PIP_VERSION_CHECK
}

# ---------------------------------------------------------------------------
# The work. Runs in its own process with strict error handling (see bottom).
# ---------------------------------------------------------------------------

# Pinned inputs. Changing one of them re-runs the step that uses it.
ALIGNED_DRA_ANSIBLE_BUNDLE="14.5.0"           # `ansible` wheel the collections come from
ALIGNED_DRA_BUNDLED_COLLECTIONS="kubernetes/core containers/podman"
ALIGNED_DRA_APT_PACKAGES="git podman runc uidmap fuse-overlayfs slirp4netns catatonit \
debootstrap hwloc iproute2 shellcheck chromium fonts-dejavu-core openssh-client tar gzip prometheus"
ALIGNED_DRA_NODE_PACKAGES="python3,systemd,systemd-sysv,dbus,iproute2"

_log() { printf '[bootstrap] %s\n' "$*" >&2; }
_die() {
    printf '[bootstrap] ERROR: %s\n' "$*" >&2
    exit 1
}
_sha() { cat "$@" | sha256sum | cut -d' ' -f1; }
_stamp_ok() { [[ -f "$ALIGNED_DRA_CACHE/stamps/$1" && "$(cat "$ALIGNED_DRA_CACHE/stamps/$1")" == "$2" ]]; }
_stamp_set() {
    mkdir -p "$ALIGNED_DRA_CACHE/stamps"
    printf '%s\n' "$2" >"$ALIGNED_DRA_CACHE/stamps/$1"
}

# 1. Debian packages, installed only when one is missing (dpkg-query is fast).
_step_apt() {
    [[ "${ALIGNED_DRA_SKIP_APT:-0}" == 1 ]] && return 0
    local missing=() pkg status sudo=()
    for pkg in $ALIGNED_DRA_APT_PACKAGES; do
        status="$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)"
        [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
    done
    [[ ${#missing[@]} -eq 0 ]] && return 0
    command -v apt-get >/dev/null || _die "missing packages ${missing[*]} and no apt-get (Debian/Ubuntu expected)"
    if [[ $EUID -ne 0 ]]; then
        sudo -n true 2>/dev/null || _die "missing packages ${missing[*]}: run as root or with passwordless sudo"
        sudo=(sudo -n)
    fi
    _log "installing Debian packages: ${missing[*]}"
    "${sudo[@]}" apt-get update -qq
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
        --no-install-recommends "${missing[@]}" >/dev/null
}

# Print the first interpreter that really is Python >= 3.12. pyenv shims exist
# on PATH for versions that are not selected and fail when run, so each
# candidate is executed, not just looked up.
_find_python() {
    local cand pyenv_root
    local candidates=("${ALIGNED_DRA_PYTHON:-}" python3.13 python3.12)
    pyenv_root="$(pyenv root 2>/dev/null || true)"
    for pyenv_root in "$pyenv_root" /root/.pyenv "$HOME/.pyenv"; do
        [[ -n "$pyenv_root" ]] || continue
        candidates+=("$pyenv_root"/versions/3.1[23]*/bin/python3.1[23])
    done
    for cand in "${candidates[@]}"; do
        [[ -n "$cand" ]] || continue
        if "$cand" -c 'import sys, venv; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1; then
            "$cand" -c 'import sys; print(sys.executable)'
            return 0
        fi
    done
    return 1
}

# 2. The virtual environment, reinstalled when requirements-dev.txt changes.
_step_venv() {
    local py key
    # Keep a working .venv (whatever >= 3.12 made it); otherwise build one.
    if ! "$ALIGNED_DRA_VENV/bin/python" -c 'import sys; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1; then
        py="$(_find_python)" || _die "no Python >= 3.12 found (tried \$ALIGNED_DRA_PYTHON, python3.13, python3.12, pyenv versions 3.12/3.13); install one or set ALIGNED_DRA_PYTHON"
        _log "creating .venv with $py"
        rm -rf "$ALIGNED_DRA_VENV"
        "$py" -m venv "$ALIGNED_DRA_VENV"
        rm -f "$ALIGNED_DRA_CACHE/stamps/venv"
    fi
    key="$(_sha "$ALIGNED_DRA_ROOT/requirements-dev.txt") $("$ALIGNED_DRA_VENV/bin/python" -V 2>&1)"
    _stamp_ok venv "$key" && return 0
    _log "installing requirements-dev.txt into .venv (pinned)"
    "$ALIGNED_DRA_VENV/bin/python" -m pip install -q -r "$ALIGNED_DRA_ROOT/requirements-dev.txt"
    _stamp_set venv "$key"
}

# 3. Collections. Galaxy is unreachable; the `ansible` wheel on PyPI carries
# every community collection, so take only the members we need out of it.
_step_collections() {
    local root="$ALIGNED_DRA_CACHE/collections/ansible_collections" key wheel
    # Our own collection, under the name ansible wants (relative: survives moves).
    mkdir -p "$root/aligned"
    if [[ "$(readlink "$root/aligned/dra" 2>/dev/null)" != "../../../.." ]]; then
        rm -rf "$root/aligned/dra"
        ln -s ../../../.. "$root/aligned/dra"
    fi
    key="ansible==$ALIGNED_DRA_ANSIBLE_BUNDLE $ALIGNED_DRA_BUNDLED_COLLECTIONS"
    _stamp_ok collections "$key" && return 0
    mkdir -p "$ALIGNED_DRA_CACHE/wheels"
    wheel="$(compgen -G "$ALIGNED_DRA_CACHE/wheels/ansible-$ALIGNED_DRA_ANSIBLE_BUNDLE-*.whl" | head -n1 || true)"
    if [[ -z "$wheel" ]]; then
        _log "downloading ansible==$ALIGNED_DRA_ANSIBLE_BUNDLE (wheel only, ~50 MB) for its collections"
        "$ALIGNED_DRA_VENV/bin/python" -m pip download -q --no-deps --only-binary=:all: \
            -d "$ALIGNED_DRA_CACHE/wheels" "ansible==$ALIGNED_DRA_ANSIBLE_BUNDLE"
        wheel="$(compgen -G "$ALIGNED_DRA_CACHE/wheels/ansible-$ALIGNED_DRA_ANSIBLE_BUNDLE-*.whl" | head -n1)"
    fi
    _log "extracting $ALIGNED_DRA_BUNDLED_COLLECTIONS from $(basename "$wheel")"
    # shellcheck disable=SC2086  # the list is meant to split into words
    "$ALIGNED_DRA_VENV/bin/python" - "$wheel" "$ALIGNED_DRA_CACHE/collections" $ALIGNED_DRA_BUNDLED_COLLECTIONS <<'PY'
import os, shutil, sys, tempfile, zipfile

wheel, dest, names = sys.argv[1], sys.argv[2], sys.argv[3:]
with zipfile.ZipFile(wheel) as zf:
    for name in names:
        prefix = f"ansible_collections/{name}/"
        members = [m for m in zf.namelist() if m.startswith(prefix)]
        if not members:
            sys.exit(f"{name} is not in {wheel}")
        # Extract next to the target, then swap, so a failure never leaves half a collection.
        tmp = tempfile.mkdtemp(dir=dest)
        zf.extractall(tmp, members)
        final = os.path.join(dest, prefix)
        shutil.rmtree(final, ignore_errors=True)
        os.makedirs(os.path.dirname(final.rstrip("/")), exist_ok=True)
        os.rename(os.path.join(tmp, prefix), final)
        shutil.rmtree(tmp)
PY
    _stamp_set collections "$key"
}

# 4. podman configuration: runc instead of crun ("cgroups in hybrid mode not
# supported"), and no default ulimits (podman's nofile default is above the
# machine's hard limit). Private file, so the host's podman setup is untouched.
_step_podman_conf() {
    local conf
    conf='# Written by scripts/bootstrap.sh; used through CONTAINERS_CONF.
[containers]
default_ulimits = []

[engine]
runtime = "runc"'
    if [[ ! -f "$CONTAINERS_CONF" || "$(cat "$CONTAINERS_CONF")" != "$conf" ]]; then
        mkdir -p "$(dirname "$CONTAINERS_CONF")"
        printf '%s\n' "$conf" >"$CONTAINERS_CONF"
    fi
}

# 5. The Molecule node image. Nothing can be pulled here, so build a Debian
# rootfs with debootstrap and import it. The recipe's checksum is stored as a
# label: editing the package list rebuilds the image, otherwise it is reused.
_step_node_image() {
    [[ "${ALIGNED_DRA_SKIP_IMAGE:-0}" == 1 ]] && return 0
    local recipe have dir mirror
    recipe="$(printf '%s\n' "bookworm minbase $ALIGNED_DRA_NODE_PACKAGES v1" | sha256sum | cut -c1-16)"
    have="$(podman image inspect --format '{{ index .Labels "aligned.dra.recipe" }}' "$ALIGNED_DRA_NODE_IMAGE" 2>/dev/null || true)"
    [[ "$have" == "$recipe" ]] && return 0
    [[ $EUID -eq 0 ]] || _die "building $ALIGNED_DRA_NODE_IMAGE needs root (debootstrap)"
    mirror="${ALIGNED_DRA_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
    dir="$(mktemp -d "$ALIGNED_DRA_CACHE/node-rootfs.XXXXXX")"
    # shellcheck disable=SC2064  # expand $dir now: it is local to this function
    trap "rm -rf '$dir'" EXIT
    _log "building $ALIGNED_DRA_NODE_IMAGE with debootstrap (about a minute)"
    debootstrap --variant=minbase --include="$ALIGNED_DRA_NODE_PACKAGES" bookworm "$dir" "$mirror" \
        >"$ALIGNED_DRA_CACHE/debootstrap.log" 2>&1 ||
        _die "debootstrap failed, see $ALIGNED_DRA_CACHE/debootstrap.log"
    # Smaller image: apt lists and caches are of no use to a test node.
    rm -rf "$dir"/var/lib/apt/lists/* "$dir"/var/cache/apt/*.bin "$dir"/var/cache/apt/archives/*.deb
    tar -C "$dir" -c . | podman import -q \
        --change 'CMD ["/sbin/init"]' \
        --change 'STOPSIGNAL SIGRTMIN+3' \
        --change "LABEL aligned.dra.recipe=$recipe" \
        - "$ALIGNED_DRA_NODE_IMAGE" >/dev/null
    rm -rf "$dir"
    trap - EXIT
}

# 6. ansible-test bootstraps pip in each sanity venv with a get-pip script it
# downloads from ci-files.testing.ansible.com (unreachable). It uses a cached
# copy when present, so cache a stand-in that does the same with ensurepip and
# then installs the exact pip version requested (from PyPI) when it can.
_step_get_pip() {
    local version file
    version="$("$ALIGNED_DRA_VENV/bin/python" - <<'PY'
import pathlib, re, ansible_test
src = pathlib.Path(ansible_test.__file__).parent / "_internal" / "python_requirements.py"
print(re.search(r"pip='([0-9.]+)'", src.read_text()).group(1))
PY
)" || _die "cannot find the pip version ansible-test wants"
    file="$HOME/.ansible/test/cache/get_pip_${version//./_}.py"
    [[ -f "$file" ]] && return 0
    mkdir -p "$(dirname "$file")"
    cat >"$file" <<'PY'
"""Offline stand-in for get-pip.py, written by aligned.dra's scripts/bootstrap.sh.

ansible-test runs: python get_pip.py [pip options] pip==X [--no-setuptools] [--no-wheel]
"""

import subprocess
import sys

args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
# ensurepip in a subprocess: it must not run inside an interpreter that imported pip.
subprocess.check_call([sys.executable, "-m", "ensurepip", "--default-pip"], stdout=subprocess.DEVNULL)
if subprocess.call([sys.executable, "-m", "pip", "install", "-q", *args]) != 0:
    print("get-pip stand-in: keeping the bundled pip, could not install " + " ".join(args), file=sys.stderr)
PY
}

_aligned_dra_prepare() {
    mkdir -p "$ALIGNED_DRA_CACHE"
    _step_apt
    _step_venv
    _step_collections
    _step_podman_conf
    _step_node_image
    _step_get_pip
}

# ---------------------------------------------------------------------------
# Executed: do the work with strict error handling, then print the environment
# (not with --quiet). Sourced: run this file as a separate process for the
# work, then export the environment into the caller. A separate process,
# because `set -e` is silently ignored in a function or subshell that runs
# inside a caller's `if`/`||`, and then a failed step would go unnoticed.
# ---------------------------------------------------------------------------
_aligned_dra_env
if [[ "${BASH_SOURCE[0]}" != "$0" ]]; then
    "$BASH" "${BASH_SOURCE[0]}" --quiet || return 1
else
    set -euo pipefail
    _aligned_dra_prepare
    [[ "${1:-}" == --quiet ]] && exit 0
    cat <<EOF
# aligned.dra environment (eval "\$(./scripts/bootstrap.sh)" or: . scripts/bootstrap.sh)
export ALIGNED_DRA_ROOT='$ALIGNED_DRA_ROOT'
export ALIGNED_DRA_CACHE='$ALIGNED_DRA_CACHE'
export ALIGNED_DRA_VENV='$ALIGNED_DRA_VENV'
export ALIGNED_DRA_NODE_IMAGE='$ALIGNED_DRA_NODE_IMAGE'
export ANSIBLE_COLLECTIONS_PATH='$ANSIBLE_COLLECTIONS_PATH'
export ANSIBLE_CONFIG='$ANSIBLE_CONFIG'
export CONTAINERS_CONF='$CONTAINERS_CONF'
export VIRTUAL_ENV='$VIRTUAL_ENV'
export PATH='$PATH'
EOF
fi
