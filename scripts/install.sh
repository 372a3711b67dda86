#!/usr/bin/env bash
# Install everything agentrl needs into ./.venv, from this repository's own files. Idempotent: a second
# run with nothing changed takes a second. Used by scripts/demo.sh and scripts/test.sh (and so by CI).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
VENV="${AGENTRL_VENV:-$REPO/.venv}"
PY="${PYTHON:-python3.11}"
command -v "$PY" >/dev/null 2>&1 || PY=python3
STAMP="$VENV/.agentrl-install"
# Everything that decides what gets installed; a change to any of these re-runs the install.
# setup.py builds the sandbox's C fork loop (sandbox/_forkserver.c) into the editable install.
WANT=$(cat pyproject.toml setup.py sandbox/_forkserver.c plugins/*/pyproject.toml scripts/install.sh | sha256sum | cut -d' ' -f1)

# Headless Chromium (Debian's package) and its driver: tests/ui load the job page in a real browser.
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "agentrl: installing chromium and chromium-driver (apt) for the browser tests"
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
  else
    echo "agentrl: chromium/chromedriver missing and not root with apt-get: tests/ui's browser tests will be skipped" >&2
  fi
fi
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ] && [ -x "$VENV/bin/agentrl" ]; then
  exit 0
fi
echo "agentrl: installing into $VENV (first time: a few minutes)"

"$PY" -c 'import sys; assert sys.version_info[:2] == (3, 11), "agentrl needs Python 3.11"' 
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install --quiet --disable-pip-version-check)
# torch first, pinned: anything else that depends on torch would otherwise pull multi-GB CUDA builds.
"${PIP[@]}" "torch==2.13.0"
"${PIP[@]}" -e ".[test]" -e plugins/agentrl-calculator
"$VENV/bin/python" -m pip check >/dev/null

# Third-party MCP servers, published on npm, that the tool tests talk to.
if command -v npm >/dev/null 2>&1; then
  EVERYTHING=$(sed -n 's/^EVERYTHING_VERSION = "\(.*\)"/\1/p' tests/tools/conftest.py)
  if [ -n "$EVERYTHING" ] && [ ! -x "$VENV/npm/node_modules/.bin/mcp-server-everything" ]; then
    npm install --silent --no-audit --no-fund --prefix "$VENV/npm" "@modelcontextprotocol/server-everything@$EVERYTHING"
  fi
  FILESYSTEM=$(sed -n 's/^FILESYSTEM_VERSION = "\(.*\)"/\1/p' tests/tools/conftest.py)
  if [ -n "$FILESYSTEM" ] && [ ! -x "$VENV/npm/node_modules/.bin/mcp-server-filesystem" ]; then
    npm install --silent --no-audit --no-fund --prefix "$VENV/npm" "@modelcontextprotocol/server-filesystem@$FILESYSTEM"
  fi
fi
echo "$WANT" > "$STAMP"
echo "agentrl: installed"
