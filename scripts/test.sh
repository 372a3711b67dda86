#!/usr/bin/env bash
# Install (if needed), lint with ruff (config in pyproject.toml), then run the whole test suite, the
# end-to-end verl training test included. Then, in the second environment (.venv-vllm, scripts/install.sh
# --vllm), tests/cpu_vllm: verl's vLLM rollout training the demo on this machine's CPU, and the vLLM eval engine.
# With arguments, only pytest in .venv runs, with them (AGENTRL_TEST_VLLM=0 skips the vLLM part of a full run).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
export HF_HUB_OFFLINE=1 WANDB_MODE=disabled LITELLM_LOCAL_MODEL_COST_MAP=True
.venv/bin/ruff check --quiet .
if [ $# -gt 0 ] || [ "${AGENTRL_TEST_VLLM:-1}" = 0 ]; then
  exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
fi
status=0
.venv/bin/python -m pytest -q -p no:cacheprovider || status=$?
bash scripts/install.sh --vllm
.venv-vllm/bin/python -m pytest -q -p no:cacheprovider tests/cpu_vllm || status=$((status ? status : $?))
exit "$status"
