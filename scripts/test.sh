#!/usr/bin/env bash
# Install (if needed), lint with ruff (config in pyproject.toml), then run the whole test suite, the
# end-to-end verl training test included.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
export HF_HUB_OFFLINE=1 WANDB_MODE=disabled LITELLM_LOCAL_MODEL_COST_MAP=True
.venv/bin/ruff check --quiet .
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
