#!/usr/bin/env bash
# Builds the API documentation: the DocC catalog Sources/YashimaShared/YashimaShared.docc (its landing
# page, the guides as articles, the API's topics) with the library's symbol graph, into OUT, with the
# toolchain's own `swift` and `docc` only (no package dependency, no network). Any warning fails it
# (--warnings-as-errors): a broken symbol or article link, a documented parameter that does not exist.
# Usage: Scripts/docs.sh OUT. The symbol graph is built in .build/docs (apart from the debug build, whose
# flags it would otherwise change). Serve OUT with any static web server and open /documentation/yashimashared.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -ne 1 ]; then
    echo "usage: Scripts/docs.sh OUT" >&2
    exit 2
fi
out="$1"
# A fixed folder: an up-to-date build emits nothing, and leaves the last graph in place.
symbols=.build/docs/symbol-graphs
[ -f "$symbols/YashimaShared.symbols.json" ] || rm -rf .build/docs
mkdir -p "$symbols"
swift build --target YashimaShared --scratch-path .build/docs \
    -Xswiftc -emit-symbol-graph -Xswiftc -emit-symbol-graph-dir -Xswiftc "$symbols" \
    -Xswiftc -symbol-graph-minimum-access-level -Xswiftc public
mkdir -p "$(dirname "$out")"
docc convert Sources/YashimaShared/YashimaShared.docc \
    --additional-symbol-graph-dir "$symbols" \
    --output-path "$out" \
    --fallback-display-name YashimaShared \
    --fallback-bundle-identifier org.yashima.YashimaShared \
    --warnings-as-errors
echo "docs: $out/documentation/yashimashared"
