#!/usr/bin/env bash
# Install (if needed), then train the CPU demo: a tiny model learns to use a calculator MCP tool.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
exec .venv/bin/agentrl train configs/demo.yaml "$@"
