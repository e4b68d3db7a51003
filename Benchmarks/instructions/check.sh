#!/usr/bin/env bash
# CI's regression guard on instructions per operation: builds yashima-stress (release) and runs
# `bench --section instructions` against the ceilings recorded in ceilings.json (callgrind counts user-space
# instructions, which this machine's load does not move). Fails (exit 1) when a count exceeds its ceiling.
# After a change that lowers a count for good, or raises one on purpose, record the new count: set its
# "measured" to the count printed and its "ceiling" about 12 % above it, and say why in the commit.
# Needs valgrind and binutils (objcopy). Usage: Benchmarks/instructions/check.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="/opt/swift/usr/bin:$PATH"
swift build -c release --product yashima-stress 2>&1 | tail -1
start=$(date +%s)
status=0
.build/release/yashima-stress bench --section instructions --ceilings Benchmarks/instructions/ceilings.json || status=$?
echo "instructions check: $(( $(date +%s) - start )) s, exit status $status"
exit "$status"
