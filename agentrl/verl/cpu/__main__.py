"""The Hydra overrides a plain ``python -m verl.trainer.main_ppo`` needs on a machine with no GPU.

    python -m verl.trainer.main_ppo $(python -m agentrl.verl.cpu) data.train_files=... ...

With agentrl installed, verl loads its plugin in every process: the ``cpu`` platform is chosen when no GPU is
present, and the ``agentrl_cpu`` rollout (transformers) is registered. These keys select that rollout and
work around what else verl assumes of a GPU machine (``agentrl.verl.args.CPU_DEFAULTS`` says why each is
there); later keys on the command line win.
"""

from __future__ import annotations

import sys

from agentrl.precision import choose
from agentrl.verl.args import CPU_DEFAULTS, to_cli

# what `agentrl train` sets for every run and a plain verl run on the CPU needs too: one logical GPU holds
# the whole rollout (verl's default tensor parallelism is 2)
PLAIN_VERL = {"actor_rollout_ref.rollout.tensor_model_parallel_size": 1}


def main(argv: list[str] | None = None) -> int:
    # the actor's dtype chosen for this CPU (bfloat16 only where native), as `agentrl train` chooses it
    keys = to_cli({**CPU_DEFAULTS, **PLAIN_VERL, **choose("auto").verl_overrides()})
    print("\n".join(keys) if "--lines" in (argv if argv is not None else sys.argv[1:]) else " ".join(keys))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
