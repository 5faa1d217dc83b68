#!/usr/bin/env bash
# The demo (README): prepare the machine, run the whole pipeline against the
# embedded demo inventory (sites whose nodes are captured sysfs trees), and
# say where the results are. Extra arguments go to ansible-playbook, e.g.
#   ./scripts/demo.sh --check --diff
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec </dev/null # never wait for input

# .venv, collections, podman config, ...; exports ANSIBLE_* and PATH.
# The demo runs no containers: leave the Molecule node image to the tests.
export ALIGNED_DRA_SKIP_IMAGE="${ALIGNED_DRA_SKIP_IMAGE:-1}"
# shellcheck disable=SC1091  # linted on its own
. scripts/bootstrap.sh || exit 1

# The demo nodes' /sys and /proc trees, built from tests/fixtures (idempotent).
if [[ -f tests/fixtures/materialize.py ]]; then
    python tests/fixtures/materialize.py "$ALIGNED_DRA_CACHE/sysfs" --all >/dev/null
fi

ansible-playbook -i inventories/demo playbooks/site.yml "$@"

echo
echo "Results: $ALIGNED_DRA_ROOT/output/"
if [[ -f output/index.json ]]; then
    echo "  index:  output/index.json"
    find output -mindepth 2 -maxdepth 2 -name 'summary.md' -printf '  %p\n' | sort
fi
if [[ -f output/index.html ]]; then
    echo "Site report (open in a browser, works offline): $ALIGNED_DRA_ROOT/output/index.html"
    find output -mindepth 2 -maxdepth 2 -name 'report.html' -printf '  %p\n' | sort
fi
