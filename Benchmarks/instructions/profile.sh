#!/usr/bin/env bash
# Where an operation's instructions go: runs `yashima-stress worker instr --op OP` under callgrind twice
# (two operation counts, the same warm-up, as `bench --section instructions`), and prints each function's
# own instructions per operation (the difference of the two runs over the difference of counts), largest
# first, demangled; then the same for inclusive costs. Usage:
#   Benchmarks/instructions/profile.sh memory-hit|storage-hit|miss-publish|first-miss|first-hit [TOP=40]
#       [YASHIMA_STRESS]
# (first-miss, first-hit: a fresh process's first lookup, counts 0 and 1, everything it sets up included.)
# Leaves the two callgrind files in $TMPDIR/yashima-profile-OP/ for callgrind_annotate.
set -euo pipefail
op="$1"
top="${2:-40}"
root="$(cd "$(dirname "$0")/../.." && pwd)"
stress="${3:-$root/.build/release/yashima-stress}"
work="${TMPDIR:-/tmp}/yashima-profile-$op"
rm -rf "$work" && mkdir -p "$work"
objcopy --strip-debug "$stress" "$work/yashima-stress"   # valgrind 3.19 cannot read Swift's DWARF 5
case "$op" in
memory-hit) counts="2000 32000"; extra=() ;;
storage-hit)
    counts="1000 6000"; extra=(--directory "$work/entries")
    "$work/yashima-stress" worker instr --op prepare --directory "$work/entries"
    sleep 2.1 ;;   # past the window in which a new entry is verified again
miss-publish) counts="100 600"; extra=(--directory "$work/publish") ;;
first-miss) counts="0 1"; extra=(--directory "$work/publish") ;;   # a fresh process's first lookup
first-hit)
    counts="0 1"; extra=(--directory "$work/entries")
    "$work/yashima-stress" worker instr --op prepare --directory "$work/entries"
    sleep 2.1 ;;
*) echo "usage: $0 memory-hit|storage-hit|miss-publish|first-miss|first-hit [TOP] [YASHIMA_STRESS]" >&2; exit 2 ;;
esac
for count in $counts; do
    rm -rf "$work/publish"
    SWIFT_DETERMINISTIC_HASHING=1 valgrind --tool=callgrind --dump-instr=no \
        --callgrind-out-file="$work/$count.callgrind" "$work/yashima-stress" worker instr --op "$op" \
        "${extra[@]}" --count "$count" 2>&1 | grep -E "Collected" || true
done
demangle="$(command -v swift-demangle || echo /opt/swift/usr/bin/swift-demangle)"
set -- $counts
for kind in no yes; do
    echo; echo "== $op: $([ $kind = no ] && echo own || echo inclusive) instructions per operation"
    python3 - "$work/$1.callgrind" "$work/$2.callgrind" "$1" "$2" "$kind" "$top" <<'PYTHON' | "$demangle" --simplified
import re, subprocess, sys
first, second, n1, n2, inclusive, top = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], int(sys.argv[6])
def costs(path):
    out = subprocess.run(["callgrind_annotate", "--inclusive=" + inclusive, "--threshold=100", path],
                         capture_output=True, text=True).stdout
    table = {}
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+) \([ \d.]+%\)\s+(.*)$", line)
        if m and "PROGRAM TOTALS" not in line:
            name = re.sub(r"^\S*?:", "", m.group(2), count=1) if not m.group(2).startswith("???:") else m.group(2)[4:]
            table[name] = table.get(name, 0) + int(m.group(1).replace(",", ""))
    return table
a, b = costs(first), costs(second)
rows = sorted(((b.get(k, 0) - a.get(k, 0)) / (n2 - n1), k) for k in set(a) | set(b))
rows.reverse()
total = sum(r for r, _ in rows) if inclusive == "no" else None
if total is not None: print(f"{total:10.0f}  (all functions, per operation)")
for per, name in rows[:top]:
    print(f"{per:10.0f}  {name[:200]}")
PYTHON
done
