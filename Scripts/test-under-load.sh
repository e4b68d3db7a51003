#!/usr/bin/env bash
# Scripts/test-under-load.sh N: runs the test suite N times (default 3) on a busy machine: beside two
# CPU-burning processes and one process writing and deleting files in a loop (in a temporary folder of its
# own), all started here and killed at the end whatever happens. Prints, per run, passed or failed with the
# failed tests' names, the run's time and the load average at its end; then the total. Exits 0 only when
# every run passed. The tests are built once first (`swift build --build-tests`), so each run is
# `swift test --skip-build`: the tests, not the compiler, beside the load.
set -uo pipefail
cd "$(dirname "$0")/.."

runs="${1:-3}"
case "$runs" in '' | *[!0-9]* | 0) echo "usage: $0 N (a number of runs, at least 1)" >&2; exit 2 ;; esac
export PATH="/opt/swift/usr/bin:$PATH"
work="$(mktemp -d)"
export TMPDIR="$work/tmp"  # Swift tools leave temporary folders: in ours, removed at the end
mkdir -p "$TMPDIR" "$work/churn" "$work/logs"
load_pids=()

cleanup() {
    for pid in "${load_pids[@]}"; do kill "$pid" 2>/dev/null; done
    for pid in "${load_pids[@]}"; do wait "$pid" 2>/dev/null; done
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "== swift build --build-tests (once, before the load)"
if ! swift build --build-tests >"$work/logs/build.log" 2>&1; then
    tail -n 30 "$work/logs/build.log" >&2
    exit 1
fi

# The load: two busy loops, and one that writes (a 4 MiB file and 64 small ones) and deletes, forever.
sh -c 'while :; do :; done' &
load_pids+=($!)
sh -c 'while :; do :; done' &
load_pids+=($!)
sh -c 'd="$1"; while :; do
    dd if=/dev/zero of="$d/big" bs=64k count=64 status=none
    for i in 1 2 3 4 5 6 7 8; do for j in 1 2 3 4 5 6 7 8; do echo "$i$j" >"$d/small-$i-$j"; done; done
    rm -f "$d"/big "$d"/small-*
done' churn "$work/churn" &
load_pids+=($!)

passed=0
for run in $(seq 1 "$runs"); do
    log="$work/logs/run-$run.log"
    started=$(date +%s)
    swift test --skip-build >"$log" 2>&1
    status=$?
    took=$(($(date +%s) - started))
    load="$(cut -d' ' -f1-3 /proc/loadavg)"
    summary="$(grep -aE "^.{0,4}Test run with [0-9]+ tests?" "$log" | tail -n 1)"
    count="$(sed -nE 's/.*Test run with ([0-9]+) tests?.*/\1/p' <<<"$summary")"
    if [ "$status" = 0 ] && grep -aqE "Test run with [0-9]+ tests? .*passed" <<<"$summary"; then
        passed=$((passed + 1))
        echo "run $run/$runs: passed ($count tests, $took s, load average $load)"
    else
        # Swift Testing's failed tests (✘ Test "name" / ✘ Test name()), and XCTest's failed test cases.
        names="$(
            {
                grep -aE '^✘ Test ' "$log" | grep -av '^✘ Test run with' |
                    sed -E 's/^✘ Test ("[^"]*"|[^ ]+).*/\1/'
                grep -aE "^Test Case '.*' failed" "$log" | sed -E "s/^Test Case '([^']*)' failed.*/\1/"
            } | sort -u | tr '\n' ';' | sed 's/;$//; s/;/; /g'
        )"
        [ -n "$summary" ] || names="${names:+$names; }no summary line: the run crashed or hung (status $status)"
        echo "run $run/$runs: FAILED (status $status, $took s, load average $load): $names"
        cp "$log" "/tmp/test-under-load-run-$run.log" 2>/dev/null &&
            echo "    its log: /tmp/test-under-load-run-$run.log"
    fi
done
echo "total: $passed of $runs runs passed"
[ "$passed" = "$runs" ]
