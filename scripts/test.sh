#!/usr/bin/env bash
# The project's test command (README, .ci/run).
#
#   scripts/test.sh                       the full suite: every stage, in order
#   scripts/test.sh quick                 the quick tier: ruff and the unit tests
#                                         (tests/unit), for the edit-test loop
#   scripts/test.sh pytest                one stage (or several: ruff pytest)
#   scripts/test.sh pytest -- -k topo     extra arguments for that one stage
#                                         (for molecule: scenario names)
#   scripts/test.sh --list                list the stages (of the full suite, or
#                                         of the tier and stages named with it)
#
# Stages of the full suite: ruff, changelog, sanity (ansible-test), lint
# (ansible-lint), pytest (tests/unit and tests/integration), molecule. The
# stage unit (tests/unit only, run as the pytest stage runs them) is named
# only, by itself or through quick; it is not part of the full suite. It
# prepares the machine first (scripts/bootstrap.sh), stops at the first failing
# stage with a non-zero exit, and always ends with a summary of the stages and
# their durations. Needs no terminal and no stdin (CI=true).
set -euo pipefail

# The full suite (no arguments, .ci/run), in order.
STAGES=(ruff changelog sanity lint pytest molecule)
# Stages outside the full suite, run only when named.
EXTRA_STAGES=(unit)
# Tiers: a name for several stages.
QUICK=(ruff unit)

usage() {
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
}

# ---------------------------------------------------------------------------
# Arguments
# ---------------------------------------------------------------------------
selected=()
extra=()
list=0
while [[ $# -gt 0 ]]; do
    case "$1" in
        -h | --help)
            usage
            exit 0
            ;;
        --list) list=1 ;;
        --)
            shift
            extra=("$@")
            break
            ;;
        quick) selected+=("${QUICK[@]}") ;;
        ansible-lint) selected+=(lint) ;; # the tool's name works too
        ansible-test) selected+=(sanity) ;;
        *)
            if [[ " ${STAGES[*]} ${EXTRA_STAGES[*]} " != *" $1 "* ]]; then
                echo "test.sh: unknown stage '$1' (stages: ${STAGES[*]} ${EXTRA_STAGES[*]}; tier: quick)" >&2
                exit 2
            fi
            selected+=("$1")
            ;;
    esac
    shift
done
[[ ${#selected[@]} -gt 0 ]] || selected=("${STAGES[@]}")
if [[ $list -eq 1 ]]; then
    printf '%s\n' "${selected[@]}"
    exit 0
fi
if [[ ${#extra[@]} -gt 0 && ${#selected[@]} -ne 1 ]]; then
    echo "test.sh: arguments after -- need exactly one stage" >&2
    exit 2
fi

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# Nothing here may wait for input (CI, cron, agents).
exec </dev/null
# Plain output when nobody watches a terminal (CI logs).
if [[ ! -t 1 || -n "${CI:-}" ]]; then
    export NO_COLOR=1 ANSIBLE_NOCOLOR=1 ANSIBLE_FORCE_COLOR=0 PY_COLORS=0
fi

# ---------------------------------------------------------------------------
# Stages. Each returns 0 (passed), 1 (failed) or $SKIPPED after printing why.
# Commands are chained with || return 1: `set -e` does not apply inside a
# function called from a condition.
# ---------------------------------------------------------------------------
SKIPPED=10

# Fake /sys + /proc trees (real snapshots and synthetic layouts) that tests and
# Molecule scenarios mount; tests/fixtures/materialize.py owns them and is
# idempotent (checksums), so calling it per stage costs nothing on re-runs.
materialized=0
materialize_fixtures() {
    [[ $materialized -eq 1 || ! -f tests/fixtures/materialize.py ]] && return 0
    echo "--- materializing fixture trees into .cache/sysfs"
    python tests/fixtures/materialize.py "$ALIGNED_DRA_CACHE/sysfs" --all >/dev/null || return 1
    materialized=1
}

stage_ruff() {
    ruff check . || return 1
    ruff format --check . || return 1
}

stage_changelog() {
    antsibull-changelog lint || return 1
    antsibull-changelog lint-changelog-yaml changelogs/changelog.yaml || return 1
}

stage_sanity() {
    local collection pyver
    # ansible-test finds its files with git; outside a git checkout it would
    # walk everything, .venv and the .cache symlink loop included.
    if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        echo "sanity: needs a git checkout (ansible-test lists files with git)" >&2
        return 1
    fi
    # ansible-test wants the collection at .../ansible_collections/aligned/dra:
    # the bootstrap symlink is that path, and ANSIBLE_TEST_CONTENT_ROOT makes
    # ansible-test use it as given (getcwd() would resolve the symlink).
    collection="$ALIGNED_DRA_CACHE/collections/ansible_collections/aligned/dra"
    pyver="$(python -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
    # --python: the venv's version only; pyenv shims for others fail.
    (cd "$collection" && ANSIBLE_TEST_CONTENT_ROOT="$collection" \
        ansible-test sanity --python "$pyver" "${extra[@]}") || return 1
}

stage_lint() {
    # Settings (production profile, offline) are in .ansible-lint.
    ansible-lint "${extra[@]}" || return 1
}

# pytest_parallel NAME DIR... [-- ARGS...]: the pytest run of the pytest and
# unit stages, on the test files under the DIRs.
pytest_parallel() {
    local name="$1" files rc=0 dirs=()
    shift
    while [[ $# -gt 0 && "$1" != "--" ]]; do
        dirs+=("$1")
        shift
    done
    [[ $# -gt 0 ]] && shift
    files="$(find "${dirs[@]}" -name 'test_*.py' -o -name '*_test.py' 2>/dev/null | wc -l)"
    if [[ "$files" -eq 0 ]]; then
        echo "$name: no test files under ${dirs[*]} yet"
        return "$SKIPPED"
    fi
    materialize_fixtures || return 1
    # Most tests wait on subprocesses (ansible-playbook, podman, the driver):
    # one worker per core keeps both cores busy. loadfile keeps a file's tests,
    # and so its module- and session-scoped fixtures (built images, wheels,
    # installed collections), on one worker.
    pytest --numprocesses="${ALIGNED_DRA_PYTEST_WORKERS:-auto}" --dist=loadfile --durations=25 "$@" || rc=$?
    if [[ $rc -eq 5 ]]; then
        echo "$name: exit 5, no tests collected although $files test file(s) exist" >&2
    fi
    [[ $rc -eq 0 ]] || return 1
}

stage_pytest() {
    # no paths: pytest.ini's testpaths, tests/unit and tests/integration
    pytest_parallel pytest tests/unit tests/integration -- "${extra[@]}"
}

stage_unit() {
    # The quick tier's tests: tests/unit only, as the pytest stage runs them.
    # Arguments after -- go to pytest; a path among them replaces tests/unit.
    local arg paths=(tests/unit)
    for arg in "${extra[@]}"; do
        [[ -e "${arg%%::*}" ]] && paths=()
    done
    pytest_parallel unit tests/unit -- "${paths[@]}" "${extra[@]}"
}

stage_molecule() {
    local scenarios=() name
    if [[ ${#extra[@]} -gt 0 ]]; then
        scenarios=("${extra[@]}")
    else
        for name in molecule/*/molecule.yml; do
            [[ -f "$name" ]] && scenarios+=("$(basename "$(dirname "$name")")")
        done
    fi
    if [[ ${#scenarios[@]} -eq 0 ]]; then
        echo "molecule: no scenario under molecule/ yet"
        return "$SKIPPED"
    fi
    materialize_fixtures || return 1
    # Scenarios live in molecule/, not extensions/molecule/ (which Molecule
    # expects inside a collection); saying so also silences its warning.
    export MOLECULE_GLOB="molecule/*/molecule.yml"
    for name in "${scenarios[@]}"; do
        echo "--- molecule test -s $name"
        molecule test -s "$name" || {
            echo "molecule: scenario '$name' failed" >&2
            return 1
        }
    done
}

# ---------------------------------------------------------------------------
# Runner and summary
# ---------------------------------------------------------------------------
summary=()
started="$EPOCHREALTIME"

elapsed() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1fs", b - a }'; }

print_summary() {
    local line stage
    echo
    echo "==> summary"
    for line in "${summary[@]}"; do echo "    $line"; done
    for stage in "${selected[@]}"; do
        [[ " ${summary[*]} " == *" $stage "* ]] || printf '    %-10s %-8s\n' "$stage" "not run"
    done
    printf '    %-10s %-8s %s\n' "total" "" "$(elapsed "$started")"
}

# run NAME COMMAND...: time one stage, record it, stop everything if it fails.
run() {
    local name="$1" t0="$EPOCHREALTIME" rc=0
    shift
    echo
    echo "==> $name"
    "$@" || rc=$?
    case $rc in
        0) summary+=("$(printf '%-10s %-8s %s' "$name" passed "$(elapsed "$t0")")") ;;
        "$SKIPPED") summary+=("$(printf '%-10s %-8s %s' "$name" skipped "$(elapsed "$t0")")") ;;
        *)
            summary+=("$(printf '%-10s %-8s %s' "$name" FAILED "$(elapsed "$t0")")")
            print_summary
            echo
            echo "test.sh: stage '$name' FAILED (exit $rc); later stages not run." >&2
            exit 1
            ;;
    esac
}

bootstrap() {
    # shellcheck disable=SC1091  # linted on its own
    . scripts/bootstrap.sh
}

run bootstrap bootstrap
for stage in "${selected[@]}"; do
    run "$stage" "stage_$stage"
done
print_summary
echo
echo "test.sh: all selected stages passed."
