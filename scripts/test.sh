#!/usr/bin/env bash
# Install (if needed), lint with ruff (config in pyproject.toml), then run the whole test suite, the
# end-to-end verl training tests included. Then, in the second environment (.venv-vllm, scripts/install.sh
# --vllm), tests/cpu_vllm: verl's vLLM rollout training the demo on this machine's CPU, and the vLLM eval engine.
# With arguments, only pytest in .venv runs, with them (AGENTRL_TEST_VLLM=0 skips the vLLM part of a full run).
#
# A full run keeps both cores busy: tests/e2e (verl trainings: mostly start-up, processes that import and wait) runs
# as one pytest process beside a second that runs the rest of the suite (one core of Python), then tests/cpu_vllm;
# .venv-vllm installs meanwhile. The two processes share one demo build (AGENTRL_TEST_SHARED, tests/conftest.py). Each group's output
# goes to a log that is printed whole when the group ends; the last line sums the groups.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
export HF_HUB_OFFLINE=1 WANDB_MODE=disabled LITELLM_LOCAL_MODEL_COST_MAP=True
.venv/bin/ruff check --quiet .
if [ $# -gt 0 ]; then
  exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
fi
vllm="${AGENTRL_TEST_VLLM:-1}"
shared="$(mktemp -d -t agentrl-tests.XXXXXX)"
export AGENTRL_TEST_SHARED="$shared"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -INT "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$shared"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# the machine's CPU time over the run (/proc/stat, in USER_HZ ticks): busy (user, nice, system, irq, softirq) and all
cpu_ticks() { awk '/^cpu /{print $2+$3+$4+$7+$8, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat; }
read -r busy0 all0 < <(cpu_ticks)
started=$SECONDS
if [ "$vllm" != 0 ]; then
  bash scripts/install.sh --vllm >"$shared/install-vllm.log" 2>&1 &
  install_pid=$!
  pids+=("$install_pid")
fi
# --durations (each group): every run prints where its time goes, fixtures' setup (where trainings run) included
.venv/bin/python -m pytest -q -p no:cacheprovider --durations=25 tests/e2e >"$shared/e2e.log" 2>&1 &
e2e_pid=$!
pids+=("$e2e_pid")

status=0
echo "== tests (all but tests/e2e, which runs beside them; its log follows)"
.venv/bin/python -m pytest -q -p no:cacheprovider --durations=15 --ignore=tests/e2e | tee "$shared/main.log" || status=$?
logs=("$shared/main.log" "$shared/e2e.log")

# tests/cpu_vllm takes the core the main group leaves, beside tests/e2e (the long pole), not after it
if [ "$vllm" != 0 ]; then
  if wait "$install_pid"; then
    echo "== tests/cpu_vllm in .venv-vllm, beside tests/e2e ($((SECONDS - started)) s since the suite started)"
    .venv-vllm/bin/python -m pytest -q -p no:cacheprovider --durations=10 tests/cpu_vllm | tee "$shared/vllm.log" \
      || status=$((status ? status : $?))
    logs+=("$shared/vllm.log")
  else
    status=$((status ? status : 1))
    echo "== scripts/install.sh --vllm failed:"
    cat "$shared/install-vllm.log"
  fi
fi
wait "$e2e_pid" || status=$((status ? status : $?))
echo "== tests/e2e ($((SECONDS - started)) s since the suite started)"
cat "$shared/e2e.log"
echo "== the suite took $((SECONDS - started)) s"
read -r busy1 all1 < <(cpu_ticks)
hz=$(getconf CLK_TCK)
echo "== the machine's $(nproc) CPUs were busy $(((busy1 - busy0) / hz)) of $(((all1 - all0) / hz)) core-s meanwhile" \
  "($(((busy1 - busy0) * 100 / (all1 - all0 > 0 ? all1 - all0 : 1)))%; every process on the machine, the suite's and any other)"
.venv/bin/python scripts/sum_tests.py "${logs[@]}" || status=$((status ? status : 1))
exit "$status"
