#!/usr/bin/env bash
# The bench "from outside": builds main.swift as a separate package (in a temp folder) that depends on
# this repository by path, builds the C floors, starts a redis-server on a Unix socket of its own, and runs
# the measurements (storage hit, memory hit, miss+publish, fresh stampede at 8, 32 and 64 released both by
# one flock barrier and by GO lines, Redis remote hit), each against its C floor released the same way;
# prints one line per figure. OUTSIDE_ONLY=stampede runs the stampedes alone, OUTSIDE_RELEASE=flock or
# lines one release. Usage: Benchmarks/outside/run.sh [WORK_DIR]
# (the package's build is kept there between runs when given). Needs the Swift toolchain, cc, redis-server.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
work="${1:-$(mktemp -d)}"
mkdir -p "$work/pkg/Sources/outside" "$work/run" "$work/tmp"
export TMPDIR="$work/tmp"
cat > "$work/pkg/Package.swift" <<SWIFT
// swift-tools-version: 6.0
import PackageDescription
let package = Package(
    name: "outside",
    dependencies: [.package(path: "$root")],
    targets: [
        .executableTarget(
            name: "outside", dependencies: [.product(name: "YashimaShared", package: "$(basename "$root")")],
            swiftSettings: [.swiftLanguageMode(.v6)])
    ]
)
SWIFT
cp "$(dirname "$0")/main.swift" "$work/pkg/Sources/outside/main.swift"
swift build -c release --package-path "$work/pkg" 2>&1 | tail -1
floors="$("$root/Benchmarks/floors/build.sh" "$work/floors")"
redis=""
if command -v redis-server >/dev/null; then
    redis-server --port 0 --unixsocket "$work/redis.sock" --save "" --appendonly no >"$work/redis.log" 2>&1 &
    redis=$!
    trap 'kill $redis 2>/dev/null || true' EXIT
    for _ in $(seq 100); do [ -S "$work/redis.sock" ] && break; sleep 0.05; done
fi
rm -rf "$work/run" && mkdir -p "$work/run"
FLOORS="$floors" OUTSIDE_WORK="$work/run" "$work/pkg/.build/release/outside" \
    ${redis:+"redis+unix://$work/redis.sock" "$work/redis.sock"}
rm -rf "$work/run"
