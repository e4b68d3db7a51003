#!/usr/bin/env bash
# Peer comparison: makes a Python virtual environment outside the repository, installs python-diskcache
# and lmdb from PyPI, runs peers.py, runs `yashima-stress bench --format json` (single + crossprocess),
# and merges both into one Markdown table (table.py) on stdout and in the file given with --output.
set -euo pipefail

usage() {
    cat <<'EOF'
usage: Benchmarks/peers/run.sh [--quick] [--output FILE] [--work DIR]

  --quick        fewer rounds and 5,000 mix operations per process (default: the full suite)
  --output FILE  also write the Markdown table to FILE
  --work DIR     scratch folder for the virtual environment, JSON and data files
                 (default: ${TMPDIR:-/tmp}/yashima-peers; never inside the repository)

Environment:
  SCRATCH_PATH   passed to `swift build --scratch-path` (default: SwiftPM's .build)
  YASHIMA_STRESS use this yashima-stress binary instead of building one
  PEERS_PIP_SPEC packages to install (default: "diskcache==5.6.3 lmdb==3.0.0", the versions measured)
EOF
}

quick=()
output=""
work="${TMPDIR:-/tmp}/yashima-peers"
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) quick=(--quick) ;;
        --output) output="$2"; shift ;;
        --work) work="$2"; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "run.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
    esac
    shift
done

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
mkdir -p "$work"
venv="$work/venv"

if [ ! -x "$venv/bin/python" ]; then
    echo "== creating the virtual environment in $venv" >&2
    python3 -m venv "$venv"
fi
echo "== installing ${PEERS_PIP_SPEC:-diskcache==5.6.3 lmdb==3.0.0} from PyPI" >&2
# shellcheck disable=SC2086
"$venv/bin/pip" install --quiet --disable-pip-version-check ${PEERS_PIP_SPEC:-diskcache==5.6.3 lmdb==3.0.0}

if [ -n "${YASHIMA_STRESS:-}" ]; then
    binary="$YASHIMA_STRESS"
else
    echo "== building yashima-stress (release)" >&2
    scratch=()
    if [ -n "${SCRATCH_PATH:-}" ]; then scratch=(--scratch-path "$SCRATCH_PATH"); fi
    (cd "$root" && swift build -c release "${scratch[@]}" --product yashima-stress >&2)
    binary="$(cd "$root" && swift build -c release "${scratch[@]}" --show-bin-path)/yashima-stress"
fi

echo "== load before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
echo "== peers: diskcache and LMDB" >&2
rm -rf "$work/data"
"$venv/bin/python" "$here/peers.py" "${quick[@]}" --directory "$work/data" > "$work/peers.json"
rm -rf "$work/data"
echo "== YashimaShared: yashima-stress bench ${quick[*]} --section single --section crossprocess" >&2
TMPDIR="$work" "$binary" bench "${quick[@]}" --format json --section single --section crossprocess > "$work/bench.json"
echo "== load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

if [ -n "$output" ]; then
    python3 "$here/table.py" "$work/peers.json" "$work/bench.json" --output "$output"
else
    python3 "$here/table.py" "$work/peers.json" "$work/bench.json"
fi
echo "== raw JSON: $work/peers.json and $work/bench.json" >&2
