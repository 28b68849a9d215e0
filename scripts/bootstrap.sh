#!/usr/bin/env bash
# Sets up .venv with gpuconf and its test dependencies. Safe to run again: it reinstalls only
# when pyproject.toml changed. Needs Python >= 3.11 (python3.11, python3.12... or python3).
set -euo pipefail
cd "$(dirname "$0")/.."

pick_python() {
  for py in "${PYTHON:-}" python3.13 python3.12 python3.11 python3; do
    [ -n "$py" ] || continue
    if command -v "$py" >/dev/null 2>&1 &&
       "$py" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
      echo "$py"; return 0
    fi
  done
  return 1
}

if [ ! -x .venv/bin/python ]; then
  py=$(pick_python) || { echo "bootstrap: Python >= 3.11 is needed (set PYTHON=...)" >&2; exit 2; }
  "$py" -m venv .venv
fi
stamp=.venv/.gpuconf-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip >/dev/null
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
  echo "$want" > "$stamp"
fi
