#!/usr/bin/env bash
# The module, plugin and role reference in docs/reference/, generated with
# antsibull-docs from the DOCUMENTATION blocks (modules, filter .yml files)
# and meta/argument_specs.yml (roles) of whatever the checkout holds.
#
#   scripts/docs.sh          regenerate docs/reference/ (commit the result)
#   scripts/docs.sh --check  lint the docs, regenerate into a temporary
#                            directory and fail if docs/reference/ differs
#                            (the pytest stage runs this)
#
# Needs the .venv and .cache/collections that scripts/bootstrap.sh prepares.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec </dev/null

root="$PWD"
dest="$root/docs/reference"
export ANSIBLE_COLLECTIONS_PATH="${ANSIBLE_COLLECTIONS_PATH:-$root/.cache/collections}"
PATH="$root/.venv/bin:$PATH"
if [[ ! -e "$root/.cache/collections/ansible_collections/aligned/dra/galaxy.yml" ]]; then
    echo "docs.sh: .cache/collections is missing: run scripts/bootstrap.sh first" >&2
    exit 2
fi

generate() {
    local log
    mkdir -p "$1"
    chmod go-w "$1" # antsibull-docs refuses a destination others can write to
    if ! log="$(antsibull-docs collection --use-current --squash-hierarchy --output-format simplified-rst \
        --no-add-antsibull-docs-version --no-breadcrumbs --fail-on-error --cleanup everything \
        --dest-dir "$1" aligned.dra 2>&1)"; then
        printf '%s\n' "$log" >&2
        echo "docs.sh: antsibull-docs failed (above)" >&2
        exit 1
    fi
}

case "${1:-}" in
    "")
        generate "$dest"
        echo "docs.sh: reference written to docs/reference/ ($(find "$dest" -name '*.rst' | wc -l) pages)"
        ;;
    --check)
        antsibull-docs lint-collection-docs --plugin-docs "$root"
        tmp="$(mktemp -d)"
        trap 'rm -rf "$tmp"' EXIT
        generate "$tmp"
        if ! diff -ru "$dest" "$tmp"; then
            echo "docs.sh: docs/reference/ is out of date; run scripts/docs.sh and commit docs/reference/" >&2
            exit 1
        fi
        echo "docs.sh: docs/reference/ is up to date ($(find "$tmp" -name '*.rst' | wc -l) pages)"
        ;;
    *)
        sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
        exit 2
        ;;
esac
