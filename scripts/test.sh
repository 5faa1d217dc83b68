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
#
# Fuzzing (tests/support/fuzzing/profiles.py): the pytest stage runs every
# property at full strength (profile full); the unit stage, and so the quick
# tier, runs a small share of each property's examples (profile quick, or the
# one ALIGNED_DRA_FUZZ_PROFILE names). ALIGNED_DRA_FUZZ_SCALE multiplies both.
set -euo pipefail

# The full suite (no arguments, .ci/run), in order.
STAGES=(ruff changelog sanity lint pytest molecule)
# Stages outside the full suite, run only when named.
EXTRA_STAGES=(unit)
# Tiers: a name for several stages.
QUICK=(ruff unit)
# Fuzzing profiles (tests/support/fuzzing/profiles.py) and the one each pytest
# stage runs; the unit stage's can be chosen with ALIGNED_DRA_FUZZ_PROFILE.
FUZZ_PROFILES=(full quick)
FUZZ_PROFILE_PYTEST=full
FUZZ_PROFILE_UNIT="${ALIGNED_DRA_FUZZ_PROFILE:-quick}"

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
if [[ " ${FUZZ_PROFILES[*]} " != *" $FUZZ_PROFILE_UNIT "* ]]; then
    echo "test.sh: ALIGNED_DRA_FUZZ_PROFILE='$FUZZ_PROFILE_UNIT' is no fuzzing profile (profiles: ${FUZZ_PROFILES[*]})" >&2
    exit 2
fi
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
    if [[ ${#extra[@]} -gt 0 ]]; then
        (cd "$collection" && ANSIBLE_TEST_CONTENT_ROOT="$collection" \
            ansible-test sanity --python "$pyver" "${extra[@]}") || return 1
        return 0
    fi
    # pylint is half of the stage and one process: it runs beside the other
    # tests (each test has a virtualenv and temporary files of its own).
    local log rc=0 pylint_rc=0 pylint_pid
    log="$(mktemp)"
    (cd "$collection" && ANSIBLE_TEST_CONTENT_ROOT="$collection" \
        ansible-test sanity --python "$pyver" --test pylint) >"$log" 2>&1 &
    pylint_pid=$!
    (cd "$collection" && ANSIBLE_TEST_CONTENT_ROOT="$collection" \
        ansible-test sanity --python "$pyver" --skip-test pylint) || rc=1
    wait "$pylint_pid" || pylint_rc=1
    echo "--- ansible-test sanity --test pylint (ran beside the other tests)"
    cat "$log"
    rm -f "$log"
    [[ $rc -eq 0 && $pylint_rc -eq 0 ]] || return 1
}

stage_lint() {
    # Settings (production profile, offline) are in .ansible-lint.
    ansible-lint "${extra[@]}" || return 1
}

# pytest_parallel NAME PROFILE DIR... [-- ARGS...]: the pytest run of the
# pytest and unit stages, on the test files under the DIRs, with fuzzing
# profile PROFILE.
pytest_parallel() {
    local name="$1" profile="$2" files rc=0 dirs=()
    shift 2
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
    # Files in the order tests/support/suite_timing.py gives them (the slowest first,
    # from the last run's figures), not xdist's order by number of tests: a
    # long file that starts last leaves the other worker idle. The run's own
    # figures land in .cache/timings for the end-of-run table.
    # Bytecode (and pytest's rewritten test modules) is cached under
    # .cache/pycache even where PYTHONDONTWRITEBYTECODE is set: each worker
    # compiles every test file otherwise, a third of the quick tier's CPU.
    ALIGNED_DRA_TIMINGS="$TIMINGS/pytest-files.json" ALIGNED_DRA_FUZZ_PROFILE="$profile" \
        PYTHONPYCACHEPREFIX="${PYTHONPYCACHEPREFIX:-$ALIGNED_DRA_CACHE/pycache}" \
        env -u PYTHONDONTWRITEBYTECODE pytest --numprocesses="${ALIGNED_DRA_PYTEST_WORKERS:-auto}" --dist=loadfile --no-loadscope-reorder \
        --durations=25 "$@" || rc=$?
    if [[ $rc -eq 5 ]]; then
        echo "$name: exit 5, no tests collected although $files test file(s) exist" >&2
    fi
    [[ $rc -eq 0 ]] || return 1
}

stage_pytest() {
    # no paths: pytest.ini's testpaths, tests/unit and tests/integration
    pytest_parallel pytest "$FUZZ_PROFILE_PYTEST" tests/unit tests/integration -- "${extra[@]}"
}

stage_unit() {
    # The quick tier's tests: tests/unit only, as the pytest stage runs them.
    # Arguments after -- go to pytest; a path among them replaces tests/unit.
    local arg paths=(tests/unit)
    for arg in "${extra[@]}"; do
        [[ -e "${arg%%::*}" ]] && paths=()
    done
    pytest_parallel unit "$FUZZ_PROFILE_UNIT" tests/unit -- "${paths[@]}" "${extra[@]}"
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
    : >"$TIMINGS/molecule-steps.tsv"
    for name in "${scenarios[@]}"; do
        echo "--- molecule test -s $name"
        molecule test -s "$name" 2>&1 | clock_molecule_steps "$name" "$TIMINGS/molecule-steps.tsv"
        [[ ${PIPESTATUS[0]} -eq 0 ]] || {
            echo "molecule: scenario '$name' failed" >&2
            return 1
        }
    done
}

# clock_molecule_steps SCENARIO FILE: pass Molecule's output through and append
# "SCENARIO STEP START" to FILE whenever an action starts, then "SCENARIO end
# END" (epoch seconds), for the step table at the end of the run.
clock_molecule_steps() {
    # Molecule 26 starts each action with "INFO     [SCENARIO > STEP] Executing".
    local scenario="$1" file="$2" line pattern='> ([a-z_]+)\] Executing$'
    while IFS= read -r line; do
        printf '%s\n' "$line"
        if [[ "$line" =~ $pattern ]]; then
            printf '%s\t%s\t%s\n' "$scenario" "${BASH_REMATCH[1]}" "$EPOCHREALTIME" >>"$file"
        fi
    done
    printf '%s\t%s\t%s\n' "$scenario" end "$EPOCHREALTIME" >>"$file"
}

# ---------------------------------------------------------------------------
# Runner and summary
# ---------------------------------------------------------------------------
summary=()
started="$EPOCHREALTIME"

# elapsed START [END]: seconds from START to END (default: now).
elapsed() { awk -v a="$1" -v b="${2:-$EPOCHREALTIME}" 'BEGIN { printf "%.1fs", b - a }'; }

# The step table: per Molecule scenario, each step's seconds (from the
# timestamps clock_molecule_steps wrote), and the scenario's total.
print_molecule_steps() {
    local file="$TIMINGS/molecule-steps.tsv"
    [[ -s "$file" ]] || return 0
    echo "    molecule, per scenario and step (seconds):"
    awk -F'\t' '
        $1 != scenario { if (scenario != "") flush(); scenario = $1; n = 0; first = $3 }
        { if (n > 0) { seconds[n] = $3 - at[n] } n++; step[n] = $2; at[n] = $3; last = $3 }
        function flush(   i, line) {
            line = ""
            for (i = 1; i < n; i++) line = line sprintf(" %s %.0f", step[i], seconds[i])
            printf "      %-10s %6.0f  %s\n", scenario, last - first, line
        }
        END { if (scenario != "") flush() }' "$file"
}

# print_fuzz_profiles: which fuzzing profile each pytest stage that ran used.
print_fuzz_profiles() {
    local stage profile line
    for stage in pytest unit; do
        [[ " ${summary[*]} " == *" $stage "* ]] || continue
        profile="FUZZ_PROFILE_${stage^^}"
        line="$(ALIGNED_DRA_FUZZ_PROFILE="${!profile}" python tests/support/fuzzing/profiles.py 2>&1)" ||
            line="fuzzing profile: ${!profile} ($line)"
        echo "    $line, stage $stage"
    done
}

print_slowest_pytest_files() {
    local file="$TIMINGS/pytest-files.json"
    [[ -s "$file" && "$file" -nt "$TIMINGS/.run-started" ]] || return 0
    echo "    pytest, the ten slowest files (seconds and CPU, setup + call + teardown of their tests):"
    python tests/support/suite_timing.py "$file" 10 | sed 's/^/  /'
}

print_summary() {
    local line stage
    echo
    echo "==> summary"
    for line in "${summary[@]}"; do echo "    $line"; done
    for stage in "${selected[@]}"; do
        [[ " ${summary[*]} " == *" $stage "* ]] || printf '    %-10s %-8s\n' "$stage" "not run"
    done
    printf '    %-10s %-8s %s\n' "total" "" "$(elapsed "$started")"
    print_machine_cpu
    print_fuzz_profiles
    print_molecule_steps
    print_slowest_pytest_files
}

# record NAME RC START [END] [NOTE]: the stage's line in the summary; stop
# everything if it failed.
record() {
    local name="$1" rc="$2" took
    took="$(elapsed "$3" "${4:-}")${5:-}"
    case $rc in
        0) summary+=("$(printf '%-10s %-8s %s' "$name" passed "$took")") ;;
        "$SKIPPED") summary+=("$(printf '%-10s %-8s %s' "$name" skipped "$took")") ;;
        *)
            summary+=("$(printf '%-10s %-8s %s' "$name" FAILED "$took")")
            print_summary
            echo
            echo "test.sh: stage '$name' FAILED (exit $rc); later stages not run." >&2
            exit 1
            ;;
    esac
}

# run NAME COMMAND...: time one stage, record it, stop everything if it fails.
# A stage runs in a subshell that writes its CPU (its own and its children's,
# `times`) when it ends; bootstrap runs in this shell (it exports the
# environment), without a CPU figure.
run() {
    local name="$1" t0="$EPOCHREALTIME" rc=0
    shift
    echo
    echo "==> $name"
    if [[ "$name" == bootstrap ]]; then
        "$@" || rc=$?
        record "$name" "$rc" "$t0"
        return
    fi
    rm -f "$TIMINGS/$name.times"
    (
        code=0
        "$@" || code=$?
        times >"$TIMINGS/$name.times"
        exit "$code"
    ) || rc=$?
    record "$name" "$rc" "$t0" "" "$(cpu_note "$TIMINGS/$name.times")"
}

# cpu_note FILE: "  (CPU N s)" from the output of `times` in FILE (every field
# summed: the shell's and its children's user and system time).
cpu_note() {
    [[ -s "$1" ]] || return 0
    awk '{ for (i = 1; i <= NF; i++) { split($i, p, "m"); sub(/s$/, "", p[2]); s += p[1] * 60 + p[2] } }
        END { printf "  (CPU %.0f s)", s }' "$1"
}

# machine_cpu: "BUSY IDLE CONTAINERS" in seconds since boot: every core's busy
# and idle time (/proc/stat) and the CPU of podman's containers (their cgroup:
# v1 cpuacct libpod_parent or v2 machine.slice; 0 where neither is there).
machine_cpu() {
    local hz containers=0 file
    hz="$(getconf CLK_TCK 2>/dev/null || echo 100)"
    for file in /sys/fs/cgroup/cpuacct/libpod_parent/cpuacct.usage /sys/fs/cgroup/machine.slice/cpu.stat; do
        [[ -r "$file" ]] || continue
        case "$file" in
            *.usage) containers="$(awk '{ printf "%.1f", $1 / 1e9 }' "$file")" ;;
            *) containers="$(awk '$1 == "usage_usec" { printf "%.1f", $2 / 1e6 }' "$file")" ;;
        esac
        break
    done
    awk -v hz="$hz" -v c="$containers" '$1 == "cpu" {
        idle = $5 + $6; busy = 0; for (i = 2; i <= 9; i++) busy += $i; busy -= idle
        printf "%.1f %.1f %s\n", busy / hz, idle / hz, c }' /proc/stat
}

# print_machine_cpu: the whole machine's CPU from the start of the first lane
# to now, and how much of it podman's containers used (every lane's).
print_machine_cpu() {
    [[ -n "${machine_cpu_start:-}" ]] || return 0
    local busy0 idle0 c0 busy1 idle1 c1
    read -r busy0 idle0 c0 <<<"$machine_cpu_start"
    read -r busy1 idle1 c1 <<<"$(machine_cpu)"
    awk -v b="$busy1" -v b0="$busy0" -v i="$idle1" -v i0="$idle0" -v c="$c1" -v c0="$c0" 'BEGIN {
        busy = b - b0; idle = i - i0
        printf "    CPU after bootstrap: %.0f s busy, %.0f s idle (%.0f %% busy), of it %.0f s in podman containers\n",
            busy, idle, 100 * busy / (busy + idle + 1e-9), c - c0 }'
}

# Stages that share no files, ports, containers or networks run side by
# side, each in a lane of its own: Molecule's scenarios (about half of the
# suite, much of it waiting for containers, systemd and the driver) start in
# the background as soon as the machine is prepared, and ansible-lint beside
# ansible-test sanity. A background stage's output goes to a file, printed
# when the stage ends; each stage is timed on its own. A failing stage stops
# every lane.
BACKGROUND=(molecule)
SIDE_BY_SIDE=("sanity lint")
background_pids=()
background_names=()

# descendants PID: every process below PID (Molecule's ansible-playbook runs
# three levels down), listed before any of them is stopped.
descendants() {
    local child
    for child in $(pgrep -P "$1" 2>/dev/null); do
        echo "$child"
        descendants "$child"
    done
}

# stop_background: a lane and everything it started, so that a failed run
# leaves no Molecule step running on.
stop_background() {
    local pid tree
    for pid in "${background_pids[@]}"; do
        tree="$(descendants "$pid")"
        # shellcheck disable=SC2086  # one PID per word
        kill -TERM "$pid" $tree 2>/dev/null || true
    done
}

# start_background NAME: run stage NAME in a lane of its own; its output and
# its exit status with the moment it ended land in $TIMINGS/NAME.log[.rc].
start_background() {
    local name="$1" log="$TIMINGS/$1.log"
    rm -f "$log.rc" "$log.times"
    echo "$EPOCHREALTIME" >"$log.start"
    (
        code=0
        "stage_$name" >"$log" 2>&1 || code=$?
        times >"$log.times"
        echo "$code $EPOCHREALTIME" >"$log.rc"
    ) &
    background_pids+=($!)
    background_names+=("$name")
    trap stop_background EXIT
}

# finish_background NAME NOTE: wait for it, print its output, record it.
finish_background() {
    local name="$1" note="$2" log="$TIMINGS/$1.log" i rc t0 t1
    for i in "${!background_names[@]}"; do
        [[ "${background_names[$i]}" == "$name" ]] && { wait "${background_pids[$i]}" || true; }
    done
    echo
    echo "==> $name ($note)"
    cat "$log"
    read -r t0 <"$log.start"
    read -r rc t1 <"$log.rc" || rc=1
    record "$name" "$rc" "$t0" "${t1:-}" "  ($note)$(cpu_note "$log.times")"
}

# The first background stage to fail stops the run even while a foreground one goes on.
background_failed() {
    local name rc
    for name in "${background_names[@]}"; do
        [[ -f "$TIMINGS/$name.log.rc" ]] || continue
        read -r rc _ <"$TIMINGS/$name.log.rc"
        [[ "$rc" == 0 || "$rc" == "$SKIPPED" ]] || {
            echo "$name"
            return 0
        }
    done
    return 1
}

bootstrap() {
    # shellcheck disable=SC1091  # linted on its own
    . scripts/bootstrap.sh
}

run bootstrap bootstrap
TIMINGS="$ALIGNED_DRA_CACHE/timings"
mkdir -p "$TIMINGS"
touch "$TIMINGS/.run-started"
machine_cpu_start="$(machine_cpu)"
# Once, before any lane starts: lanes must not build the same trees at once.
if [[ " ${selected[*]} " =~ \ (pytest|unit|molecule)\  ]]; then
    materialize_fixtures || record fixtures 1 "$EPOCHREALTIME"
fi
done_stages=" "
for stage in "${BACKGROUND[@]}"; do
    # Alone, a stage runs in the foreground, its output live.
    if [[ " ${selected[*]} " == *" $stage "* && ${#selected[@]} -gt 1 ]]; then
        echo
        echo "==> $stage: started in the background (output: $TIMINGS/$stage.log, printed when it ends)"
        start_background "$stage"
        done_stages+="$stage "
    fi
done
# The background lane is one stream of work (one Molecule step at a time);
# the foreground keeps both cores busy on its own (two pytest workers, or
# sanity and ansible-lint). With the foreground niced, the one stream gets the
# CPU whenever it wants it and the foreground fills the rest, so the run does
# not end on the background lane alone with a core idle. Nice values pass to
# children: every foreground stage started from here on runs niced.
if [[ ${#background_names[@]} -gt 0 ]]; then
    renice -n "${ALIGNED_DRA_FOREGROUND_NICE:-10}" -p $$ >/dev/null || true
fi
for stage in "${selected[@]}"; do
    [[ "$done_stages" == *" $stage "* ]] && continue
    if failed="$(background_failed)"; then
        finish_background "$failed" "in the background"
    fi
    partner=""
    for pair in "${SIDE_BY_SIDE[@]}"; do
        read -r one two <<<"$pair"
        if [[ "$stage" == "$one" && " ${selected[*]} " == *" $two "* && "$done_stages" != *" $two "* ]]; then
            partner="$two"
        fi
    done
    if [[ -n "$partner" ]]; then
        start_background "$partner"
        run "$stage" "stage_$stage"
        finish_background "$partner" "beside $stage"
        done_stages+="$stage $partner "
    else
        run "$stage" "stage_$stage"
        done_stages+="$stage "
    fi
done
for stage in "${BACKGROUND[@]}"; do
    [[ " ${background_names[*]} " == *" $stage "* ]] && finish_background "$stage" "in the background"
done
trap - EXIT
print_summary
echo
echo "test.sh: all selected stages passed."
