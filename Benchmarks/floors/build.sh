#!/usr/bin/env bash
# Builds the C floors (one program, `floors`, with a command per floor) with the system `cc` into OUT
# (default: $TMPDIR/yashima-floors). Prints the program's path. The bench runs this itself; run it by hand
# to use the floors alone (see README.md). Nothing built here is committed.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-${TMPDIR:-/tmp}/yashima-floors}"
mkdir -p "$out"
cc="${CC:-cc}"
# -O2, no -march: the floors run on the machine that builds them, with the flags a C user would pick.
"$cc" -std=gnu11 -O2 -g -Wall -Wextra -Werror -o "$out/floors.new" "$here"/*.c -lpthread
mv -f "$out/floors.new" "$out/floors"
echo "$out/floors"
