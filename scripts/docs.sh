#!/usr/bin/env bash
# The generated parts of the docs: the module, plugin and role reference in
# docs/reference/, generated with antsibull-docs from the DOCUMENTATION blocks
# (modules, filter .yml files) and meta/argument_specs.yml (roles) of whatever
# the checkout holds; and the README's picture of the site report.
#
#   scripts/docs.sh          regenerate docs/reference/ (commit the result)
#   scripts/docs.sh --check  lint the docs, regenerate into a temporary
#                            directory and fail if docs/reference/ differs
#                            (the pytest stage runs this)
#   scripts/docs.sh --picture  the README's picture of the site report,
#                            docs/images/site-report.png: runs playbooks/site.yml
#                            on inventories/demo into a temporary directory and
#                            takes the first screen (1280x900) of the ai-west
#                            page in headless Chromium (scripts/report_picture.py).
#                            The PNG records a digest of roles/report/templates/
#                            (the pages' markup and inline stylesheet);
#                            tests/unit/test_report_picture.py fails when the
#                            templates changed since: run this and commit the PNG.
#
# Needs the .venv and .cache/collections that scripts/bootstrap.sh prepares
# (--picture also the Debian package chromium, which it installs too).
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
    --picture)
        export ANSIBLE_CONFIG="$root/ansible.cfg"
        tmp="$(mktemp -d)"
        trap 'rm -rf "$tmp"' EXIT
        python tests/fixtures/materialize.py "$root/.cache/sysfs" --all >/dev/null
        if ! ansible-playbook -i inventories/demo playbooks/site.yml -e "aligned_dra_output_dir=$tmp/output" \
            >"$tmp/site.log" 2>&1; then
            tail -n 40 "$tmp/site.log" >&2
            echo "docs.sh: playbooks/site.yml failed on inventories/demo (above)" >&2
            exit 1
        fi
        python scripts/report_picture.py "$tmp/output" "$root/docs/images/site-report.png"
        ;;
    *)
        sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
        exit 2
        ;;
esac
