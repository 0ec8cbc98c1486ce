#!/usr/bin/env bash
# Create .venv (Debian's /usr/bin/python3, --system-site-packages) and install
# scripts/requirements-test.txt into it. Safe to run again: does nothing when the
# requirements file has not changed since the last successful install.
set -euo pipefail
cd "$(dirname "$0")/.."
req=scripts/requirements-test.txt
stamp=.venv/.requirements.sha256
want=$(sha256sum "$req" | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then exit 0; fi
[ -x .venv/bin/python ] || /usr/bin/python3 -m venv --system-site-packages .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -r "$req"
echo "$want" > "$stamp"
