#!/usr/bin/env bash
# Build the default text corpus of the main job (`longattn study`) from the Python
# documentation sources of the Debian package python3.11-doc:
#   data/pydoc/train/*.txt   ~90% of the documents
#   data/pydoc/val/*.txt     ~10% of the documents, stratified by size
#   data/pydoc/MANIFEST      one line per document: split, bytes, file name
# The split is by whole document, so no validation text is ever trained on. Documents are
# ranked by size and cut into consecutive groups of VAL_EVERY (default 10); from each group
# the document whose CRC of "SEED:path" is smallest goes to validation. That keeps the
# validation set's size distribution equal to the corpus's, so it holds several of the
# longest documents (the ones that windows of 16x the training length need), and it is the
# same on every machine (cksum is POSIX CRC-32; no awk random numbers, whose sequences
# differ between mawk and gawk).
# Safe to run again: a stamp file records the inputs; a finished corpus is not rebuilt.
#   usage: scripts/prepare_corpus.sh [SRC_DIR] [OUT_DIR]     (env: SEED, VAL_EVERY)
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."
src=${1:-/usr/share/doc/python3.11/html/_sources}
out=${2:-data/pydoc}
seed=${SEED:-1234}
every=${VAL_EVERY:-10}

if [ ! -d "$src" ]; then
    echo "prepare_corpus: $src does not exist; install the Debian package python3.11-doc" \
         "(scripts/setup.sh does) or pass a directory of .txt files as the first argument" >&2
    exit 1
fi
case "$every" in ''|*[!0-9]*|0|1) echo "prepare_corpus: VAL_EVERY must be an integer >= 2" >&2; exit 1 ;; esac

list=$(mktemp)
trap 'rm -f "$list" "$list.k"' EXIT
# size and path relative to src, largest first, ties by path
(cd "$src" && find . -type f -name '*.txt' -printf '%s %P\n') | sort -k1,1nr -k2,2 >"$list"
n=$(wc -l <"$list")
if [ "$n" -lt "$every" ]; then
    echo "prepare_corpus: only $n .txt documents under $src; need at least $every" >&2
    exit 1
fi
stamp="prepare_corpus v1 seed=$seed every=$every src=$src docs=$n bytes=$(awk '{s+=$1} END{print s}' "$list")"
if [ -f "$out/.stamp" ] && [ "$(cat "$out/.stamp")" = "$stamp" ]; then
    echo "prepare_corpus: $out is up to date ($n documents)"
    exit 0
fi

# one CRC per document: "rank size crc path"
rank=0
while read -r size path; do
    crc=$(printf '%s:%s' "$seed" "$path" | cksum | cut -d' ' -f1)
    echo "$rank $size $crc $path"
    rank=$((rank + 1))
done <"$list" >"$list.k"

tmp="$out.tmp.$$"
rm -rf "$tmp"
mkdir -p "$tmp/train" "$tmp/val"
# pick, per group of $every consecutive ranks, the smallest CRC for validation
awk -v every="$every" '
    { g = int($1 / every); if (!(g in best) || $3 < bestcrc[g]) { best[g] = $1; bestcrc[g] = $3 } ;
      line[$1] = $0 ; n = $1 + 1 }
    END { for (g in best) val[best[g]] = 1;
          for (i = 0; i < n; i++) { split(line[i], f, " "); p = substr(line[i], length(f[1] f[2] f[3]) + 4);
                                   print (i in val ? "val" : "train"), f[2], p } }' "$list.k" |
while read -r split size path; do
    name=$(printf '%s' "$path" | sed 's#/#__#g; s#\.rst\.txt$#.txt#')
    cp "$src/$path" "$tmp/$split/$name"
    echo "$split $size $name"
done >"$tmp/MANIFEST"
echo "$stamp" >"$tmp/.stamp"
rm -rf "$out"
mkdir -p "$(dirname "$out")"
mv "$tmp" "$out"
ntr=$(ls "$out/train" | wc -l); nva=$(ls "$out/val" | wc -l)
btr=$(cat "$out"/train/* | wc -c); bva=$(cat "$out"/val/* | wc -c)
echo "prepare_corpus: $out: train $ntr documents ($btr bytes), val $nva documents ($bva bytes)"
