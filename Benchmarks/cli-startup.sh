#!/usr/bin/env bash
# Whole-process start-up of `yashima run` on a hit, against `cat` of the same file, in one run.
#
#   Benchmarks/cli-startup.sh [--runs N] [--output FILE]
#
# Builds `yashima` in release mode (or uses $YASHIMA), stores `cat FILE` for a 4 KiB and a 1 MiB file in a
# fresh directory, then times with hyperfine (no shell, warm page cache): `cat FILE`; `yashima --version`
# (the process floor: loading the Swift runtime and Foundation, no storage); `yashima run -- cat FILE` (a
# hit: the stored output is written, cat does not run); `yashima get` of a miss (opening the directory,
# one lookup). Prints a Markdown table, with each row's ratio of medians to `cat` of the same file
# (medians: on a shared machine a few slow runs move the means).
set -euo pipefail
cd "$(dirname "$0")/.."

runs=300
output=""
while [ $# -gt 0 ]; do
    case "$1" in
        --runs) runs="$2"; shift 2 ;;
        --output) output="$2"; shift 2 ;;
        *) echo "usage: $0 [--runs N] [--output FILE]" >&2; exit 2 ;;
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
dir="$work/cache"
for size in 4k 1m; do
    "$YASHIMA" run --dir "$dir" -- cat "$work/$size" > /dev/null   # the miss that stores it
    cmp <("$YASHIMA" run --dir "$dir" -- cat "$work/$size") "$work/$size"   # a hit gives the same bytes
done

hyperfine -N -i --warmup 30 --runs "$runs" --output=null --export-json "$work/results.json" \
    -n "cat 4 KiB" "cat $work/4k" \
    -n "yashima run -- cat 4 KiB (hit)" "$YASHIMA run --dir $dir -- cat $work/4k" \
    -n "cat 1 MiB" "cat $work/1m" \
    -n "yashima run -- cat 1 MiB (hit)" "$YASHIMA run --dir $dir -- cat $work/1m" \
    -n "yashima --version (process floor)" "$YASHIMA --version" \
    -n "yashima get (a miss)" "$YASHIMA get --dir $dir --identity absent" >&2

python3 - "$work/results.json" "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'EOF' | tee ${output:+"$output"}
import json, sys
results = {r["command"]: r for r in json.load(open(sys.argv[1]))["results"]}
def ms(name): return results[name]["mean"] * 1e3
def sd(name): return results[name]["stddev"] * 1e3
def median(name): return results[name]["median"] * 1e3
print(f"yashima start-up, {sys.argv[2]} cores, load average {sys.argv[3]} (hyperfine -N, page cache warm)\n")
print("| command | median | mean | ± | vs cat of the same file (medians) |")
print("|---|---|---|---|---|")
for name, baseline in [
    ("cat 4 KiB", None), ("yashima run -- cat 4 KiB (hit)", "cat 4 KiB"),
    ("cat 1 MiB", None), ("yashima run -- cat 1 MiB (hit)", "cat 1 MiB"),
    ("yashima --version (process floor)", "cat 4 KiB"), ("yashima get (a miss)", "cat 4 KiB"),
]:
    ratio = f"{median(name) / median(baseline):.1f}x" if baseline else ""
    print(f"| `{name}` | {median(name):.2f} ms | {ms(name):.2f} ms | {sd(name):.2f} | {ratio} |")
hit = median("yashima run -- cat 4 KiB (hit)") - median("yashima --version (process floor)")
print(f"\nA 4 KiB hit costs {hit:.2f} ms over the process floor (medians; parsing, key, opening the directory, one read).")
EOF
