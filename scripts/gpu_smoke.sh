#!/usr/bin/env bash
# GPU smoke run for a Linux machine with one NVIDIA GPU (driver for CUDA 13.0, i.e. >= 580). NOT run in CI:
# CI machines have no GPU. What it does, in order, and where it stops if a step fails:
#   1. installs ./.venv-vllm with `scripts/install.sh --vllm` (the install a CPU machine uses for vLLM's CPU build;
#      with a GPU it takes the `gpu` extra: torch 2.13.0 CUDA 13.0 build, vLLM 0.27–0.31, verl 0.9.1), kept apart
#      from the CPU ./.venv, and checks torch sees the GPU;
#   2. builds the demo's small model and arithmetic data offline (agentrl demo build; nothing is downloaded);
#   3. `agentrl train configs/demo.yaml --dry-run` with the GPU plan (1 GPU, vLLM, sdpa unless flash_attn imports);
#   4. trains STEPS steps (default 4) with verl's vLLM rollout and the calculator MCP tool;
#   5. checks the run directory (metrics, rollouts with tool calls, a complete checkpoint with an HF model)
#      and prints tokens/s and seconds a step.
# Usage: scripts/gpu_smoke.sh [STEPS] [extra key=value overrides]
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS="${1:-4}"; shift || true
VENV="${AGENTRL_VLLM_VENV:-$PWD/.venv-vllm}"
RUN="${AGENTRL_SMOKE_RUN:-$PWD/runs/gpu-smoke}"
export HF_HUB_OFFLINE=1 WANDB_MODE=disabled LITELLM_LOCAL_MODEL_COST_MAP=True
export AGENTRL_HOME="${AGENTRL_HOME:-$PWD/.cache-gpu-smoke}"

command -v nvidia-smi >/dev/null || { echo "gpu_smoke: no nvidia-smi: this script needs an NVIDIA GPU" >&2; exit 2; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader

AGENTRL_VLLM_VENV="$VENV" bash scripts/install.sh --vllm
"$VENV/bin/python" - <<'EOF'
import importlib.metadata as md, torch
assert torch.cuda.is_available(), f"torch {torch.__version__} does not see a GPU (CUDA build: {torch.version.cuda})"
print(f"torch {torch.__version__} CUDA {torch.version.cuda} on {torch.cuda.get_device_name(0)}; vllm {md.version('vllm')}")
EOF

"$VENV/bin/agentrl" demo build "$AGENTRL_HOME/demo" >/dev/null
OVERRIDES=(agentrl.device=gpu agentrl.gpus_per_node=1 "agentrl.max_steps=$STEPS" "agentrl.save_every=$STEPS"
           "agentrl.run_dir=$RUN" "$@")
rm -rf "$RUN"
"$VENV/bin/agentrl" train configs/demo.yaml --dry-run "${OVERRIDES[@]}" > "$RUN.plan.yaml"
grep '^#' "$RUN.plan.yaml"
START=$(date +%s)
"$VENV/bin/agentrl" train configs/demo.yaml "${OVERRIDES[@]}"
END=$(date +%s)

"$VENV/bin/python" - "$RUN" "$STEPS" "$((END - START))" <<'EOF'
import json, pathlib, sys
run, steps, wall = pathlib.Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
metrics = [json.loads(l) for l in (run / "metrics.jsonl").read_text().splitlines() if l.strip()]
train = [m for m in metrics if m.get("step_time") is not None]
assert len(train) >= steps, f"{len(train)} training steps in metrics.jsonl, expected {steps}"
corr = [m.get("verl", {}).get("training/rollout_actor_probs_pearson_corr") for m in train]
assert all(c is not None and c >= 0.99 for c in corr), f"vLLM's log-probs against the actor's, per step: {corr}"
rollouts = [json.loads(l) for l in (run / "rollouts.jsonl").read_text().splitlines() if l.strip()]
rollouts = [r for r in rollouts if not r.get("validation")]
assert rollouts and any(r["tool_calls"] for r in rollouts), "no rollout called the calculator"
status = json.loads((run / "checkpoint_status.json").read_text())
hf = next(run.glob("checkpoints/global_step_*/actor/huggingface"), None)
assert hf and (hf / "config.json").exists(), "no HuggingFace model in the checkpoint"
step_times = [m["step_time"] for m in train if m.get("step_time")]
later = step_times[1:] or step_times  # the first step includes vLLM's CUDA-graph capture and warm-up
tokens = sum(r["response_tokens"] for r in rollouts)
gen = sum(m.get("generation_time") or 0 for m in train)
print(f"gpu_smoke: {len(train)} steps, {len(rollouts)} rollouts, "
      f"{sum(1 for r in rollouts if r['tool_calls'])} with tool calls, {sum(1 for r in rollouts if r['unscorable'])} unscorable")
per_step = sum(later) / len(later)
line = f"gpu_smoke: {per_step:.2f} s/step (steps after the first); {tokens / sum(step_times):.0f} response tokens/s"
if gen:
    line += f" over whole steps, {tokens / gen:.0f} tokens/s while generating"
print(line + f"; {wall} s wall with start-up")
print(f"gpu_smoke: checkpoint step {status.get('step')} at {hf}")
EOF
