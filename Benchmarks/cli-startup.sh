#!/usr/bin/env bash
# Whole-process start-up of `yashima run` on a hit, against `cat` of the same file, in one run.
#
#   Benchmarks/cli-startup.sh [--runs N] [--rounds R] [--baseline OTHER-YASHIMA] [--output FILE]
#
# Builds `yashima` in release mode (or uses $YASHIMA): the static, fixed-address binary Package.swift
# links. Stores `cat FILE` for a 4 KiB and a 1 MiB file in a fresh directory, then times with hyperfine
# (no shell, warm page cache): `cat FILE`; `yashima --version` (the process floor: loading and starting
# the runtime, no storage); `yashima run -- cat FILE` (a hit: the stored output is written, cat does not
# run); `yashima get` of a miss (opening the directory, one lookup). With --baseline, the same commands of
# another build (say the one before a change) in the same rounds. R rounds (default 3) of N runs each
# (default 100), the commands' order reversed every other round (the machine is shared: what runs next to
# what changes); each figure is the median of its rounds' medians, each ratio the median of the rounds'
# ratios to `cat` of the same file in the same round. Prints a Markdown table.
set -euo pipefail
cd "$(dirname "$0")/.."

runs=100
rounds=3
baseline=""
output=""
while [ $# -gt 0 ]; do
    case "$1" in
        --runs) runs="$2"; shift 2 ;;
        --rounds) rounds="$2"; shift 2 ;;
        --baseline) baseline="$2"; shift 2 ;;
        --output) output="$2"; shift 2 ;;
        *) echo "usage: $0 [--runs N] [--rounds R] [--baseline OTHER-YASHIMA] [--output FILE]" >&2; exit 2 ;;
    esac
done

command -v hyperfine >/dev/null || { echo "needs hyperfine (apt-get install hyperfine)" >&2; exit 2; }
export PATH="/opt/swift/usr/bin:$PATH"
if [ -z "${YASHIMA:-}" ]; then
    swift build -c release --product yashima >&2
    YASHIMA="$(swift build -c release --show-bin-path)/yashima"
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
head -c 4096 /dev/urandom > "$work/4k"
head -c 1048576 /dev/urandom > "$work/1m"
binaries=("$YASHIMA")
labels=("")
if [ -n "$baseline" ]; then binaries+=("$baseline"); labels+=(" [baseline]"); fi
commands=(-n "cat 4 KiB" "cat $work/4k" -n "cat 1 MiB" "cat $work/1m")
for index in "${!binaries[@]}"; do
    binary="${binaries[$index]}"
    label="${labels[$index]}"
    dir="$work/cache-$index"
    for size in 4k 1m; do
        "$binary" run --dir "$dir" -- cat "$work/$size" > /dev/null   # the miss that stores it
        cmp <("$binary" run --dir "$dir" -- cat "$work/$size") "$work/$size"   # a hit gives the same bytes
    done
    commands+=(
        -n "yashima run -- cat 4 KiB (hit)$label" "$binary run --dir $dir -- cat $work/4k"
        -n "yashima run -- cat 1 MiB (hit)$label" "$binary run --dir $dir -- cat $work/1m"
        -n "yashima --version (process floor)$label" "$binary --version"
        -n "yashima get (a miss)$label" "$binary get --dir $dir --identity absent"
    )
done

for round in $(seq 1 "$rounds"); do
    ordered=("${commands[@]}")
    if [ $((round % 2)) -eq 0 ]; then   # the same (-n name command) triples, last first
        ordered=()
        for ((index = ${#commands[@]} - 3; index >= 0; index -= 3)); do
            ordered+=("${commands[@]:index:3}")
        done
    fi
    hyperfine -N -i --warmup 20 --runs "$runs" --output=null --export-json "$work/round-$round.json" \
        "${ordered[@]}" >&2
done

python3 - "$work" "$rounds" "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)" "$runs" <<'EOF' | tee ${output:+"$output"}
import json, statistics, sys
work, rounds, cores, load, runs = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
per_round = [{r["command"]: r["median"] * 1e3 for r in json.load(open(f"{work}/round-{i}.json"))["results"]}
             for i in range(1, rounds + 1)]
names = list(per_round[0])
def median(name): return statistics.median(r[name] for r in per_round)
def ratio(name, base): return statistics.median(r[name] / r[base] for r in per_round)
print(f"yashima start-up, {cores} cores, load average {load} at the end (hyperfine -N, page cache warm; "
      f"{rounds} rounds of {runs} runs, medians of the rounds' medians)\n")
print("| command | median | vs cat of the same file (median of the rounds' ratios) |")
print("|---|---|---|")
order = ["cat 4 KiB", "cat 1 MiB"] + [n for n in names if not n.startswith("cat ")]
for name in order:
    base = None if name.startswith("cat ") else ("cat 1 MiB" if "1 MiB" in name else "cat 4 KiB")
    text = f"{ratio(name, base):.1f}x" if base else ""
    print(f"| `{name}` | {median(name):.2f} ms | {text} |")
hit = median("yashima run -- cat 4 KiB (hit)") - median("yashima --version (process floor)")
print(f"\nA 4 KiB hit costs {hit:.2f} ms over the process floor (parsing, key, opening the directory, one read).")
EOF
