#!/usr/bin/env bash
# Build the long-document corpus of `longattn longeval` (issue #15) from the Debian package
# bible-kjv (its `bible` reader over bible-kjv-text: the King James Version, public domain):
#   data/longdocs/<n>-<division>.txt   the six traditional divisions of the KJV, one
#                                      document each (400 KB to 1.1 MB of English prose,
#                                      ~100k to ~300k SmolLM2 tokens: every document is
#                                      longer than 8C = 65536 tokens of SmolLM2-135M)
#   data/longdocs/MANIFEST             bytes and file name per document
# Format: a "Book chapter" heading line, a blank line, then the chapter's verses joined
# into one paragraph without verse numbers (plain prose, no markup).
# Safe to run again: a stamp file records the inputs; a finished corpus is not rebuilt.
#   usage: scripts/prepare_longdocs.sh [OUT_DIR]
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."
out=${1:-data/longdocs}

if ! command -v bible >/dev/null 2>&1; then
    echo "prepare_longdocs: the 'bible' reader is missing; install the Debian package bible-kjv" \
         "(scripts/setup.sh does)" >&2
    exit 1
fi
# division name and verse range
divs="1-law Gen1:1-Deu34:12
2-history Jos1:1-Est10:3
3-wisdom Job1:1-Sol8:14
4-prophets Isa1:1-Mal4:6
5-gospels-acts Mat1:1-Act28:31
6-epistles-revelation Rom1:1-Rev22:21"
ver=$(dpkg-query -W -f='${Version}' bible-kjv-text 2>/dev/null || echo unknown)
stamp="prepare_longdocs v1 bible-kjv-text=$ver"
if [ -f "$out/.stamp" ] && [ "$(cat "$out/.stamp")" = "$stamp" ]; then
    echo "prepare_longdocs: $out is up to date"
    exit 0
fi
tmp="$out.tmp.$$"
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
echo "$divs" | while read -r name range; do
    # -l100000: one line per verse; stdin closed so that bible never waits for input
    bible -l100000 "$range" </dev/null | awk '
        /^  *[0-9]+ / { sub(/^ *[0-9]+ /, ""); para = para (para == "" ? "" : " ") $0; next }
        /^$/ { next }
        { if (para != "") { print para; print ""; para = "" } print; print "" }
        END { if (para != "") print para }' >"$tmp/$name.txt"
    if [ "$(wc -c <"$tmp/$name.txt")" -lt 300000 ]; then
        echo "prepare_longdocs: $range gave only $(wc -c <"$tmp/$name.txt") bytes; is bible-kjv-text complete?" >&2
        exit 1
    fi
    echo "$(wc -c <"$tmp/$name.txt") $name.txt"
done >"$tmp/MANIFEST"
echo "$stamp" >"$tmp/.stamp"
rm -rf "$out"
mkdir -p "$(dirname "$out")"
mv "$tmp" "$out"
trap - EXIT
echo "prepare_longdocs: $out: $(ls "$out"/*.txt | wc -l) documents ($(cat "$out"/*.txt | wc -c) bytes)"
