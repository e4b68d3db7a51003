#!/usr/bin/env bash
# Follows the README's quick start word for word, as a new user would, in a scratch folder: clones this
# repository (its committed state), writes the README's Package.swift and main.swift, runs the README's
# commands and compares what they print with the README's expected output (as a set of lines: the two
# concurrent processes may print in either order). Exits non-zero on any difference. CI runs it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
readme="$root/README.md"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# The body of the fenced block that follows the line `<!-- NAME -->` in the README.
block() {
    awk -v marker="<!-- $1 -->" '
        found == 2 && /^```$/ { exit }
        found == 2 { print }
        found == 1 && /^```/ { found = 2 }
        $0 == marker { found = 1 }
    ' "$readme"
}

for name in "walkthrough: setup" "walkthrough: Package.swift" "sample: quick-start" "walkthrough: run" \
    "walkthrough: output"; do
    if [ -z "$(block "$name")" ]; then
        echo "readme-walkthrough: README has no block marked <!-- $name -->" >&2
        exit 1
    fi
done

echo "== setup (in $work)"
cd "$work"
block "walkthrough: setup" | sed "s|<this repository's URL>|\"$root\"|" | tee setup.sh
. ./setup.sh   # sourced: its `cd` is the reader's too
block "walkthrough: Package.swift" > Package.swift
block "sample: quick-start" > Sources/Worker/main.swift

echo "== run"
block "walkthrough: run" | tee run.sh
mkdir -p "$work/tmp"
TMPDIR="$work/tmp" bash -euo pipefail run.sh | tee output.txt

# What the programs printed is the last lines, after swift build's own.
expected_lines="$(block "walkthrough: output" | wc -l)"
if [ "$(tail -n "$expected_lines" output.txt | sort)" != "$(block "walkthrough: output" | sort)" ]; then
    echo "readme-walkthrough: the output differs from the README's:" >&2
    block "walkthrough: output" >&2
    exit 1
fi
echo "readme-walkthrough: the quick start works as the README says"
