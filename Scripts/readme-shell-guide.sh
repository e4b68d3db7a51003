#!/usr/bin/env bash
# Runs the shell guide word for word (the `xargs -P 8` pool and the Makefile under `make -j8` of the article
# Sources/YashimaShared/YashimaShared.docc/MemoizingCommands.md)
# with the `yashima` on PATH (or the one given as $1), over five photos, in a scratch folder. `convert`
# is a stand-in script (ImageMagick is not needed): it records each run in a ledger. Checks that every
# photo is converted exactly once per recipe, that every thumbnail holds the right bytes, and that a rerun
# (and `make clean` + `make -j8`) converts nothing. Exits non-zero on any difference. CI runs it against
# the installed Debian package with the Swift toolchain's libraries hidden from the dynamic loader.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
guide="$root/Sources/YashimaShared/YashimaShared.docc/MemoizingCommands.md"
yashima="${1:-$(command -v yashima)}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

block() {
    awk -v marker="<!-- $1 -->" '
        found == 2 && /^```$/ { exit }
        found == 2 { print }
        found == 1 && /^```/ { found = 2 }
        $0 == marker { found = 1 }
    ' "$guide"
}

mkdir -p "$work/bin" "$work/photos"
ln -s "$yashima" "$work/bin/yashima"
cat >"$work/bin/convert" <<'SCRIPT'
#!/bin/sh
# A stand-in for ImageMagick's convert: `convert IN -resize 320x OUT`.
if [ "$1" = -version ]; then echo "Version: ImageMagick 0.0 (stand-in)"; exit 0; fi
echo "$1" >>"$LEDGER"
{ echo "thumbnail 320x of"; cat "$1"; } >"$4"
SCRIPT
chmod 755 "$work/bin/convert"
for photo in a b c d e; do echo "photo $photo" >"$work/photos/$photo.jpg"; done
export PATH="$work/bin:$PATH" LEDGER="$work/ledger" YASHIMA_DIR="$work/cache"
cd "$work"

check() {  # check RECIPE SUFFIX EXPECTED_RUNS
    local runs
    runs="$(wc -l <"$LEDGER")"
    if [ "$runs" != "$3" ]; then
        echo "readme-shell-guide: $1: convert ran $runs times, expected $3" >&2
        exit 1
    fi
    for photo in a b c d e; do
        if [ "$(cat "thumbs/$photo$2")" != "$(printf 'thumbnail 320x of\nphoto %s' "$photo")" ]; then
            echo "readme-shell-guide: $1: thumbs/$photo$2 is wrong" >&2
            exit 1
        fi
    done
}

echo "== xargs -P 8 (with $yashima: $("$yashima" --version))"
block "shell-guide: xargs" | tee xargs.sh
: >"$LEDGER"
bash -euo pipefail xargs.sh
check xargs .jpg.png 5
rm -rf thumbs
bash -euo pipefail xargs.sh
check "xargs, again" .jpg.png 5

echo "== make -j8"
block "shell-guide: make" >Makefile
rm -rf thumbs
: >"$LEDGER"
make -s -j8
check make .png 5
make -s clean
make -s -j8
check "make clean, make -j8" .png 5
echo "readme-shell-guide: both recipes convert each photo once, and a rebuild converts nothing"
