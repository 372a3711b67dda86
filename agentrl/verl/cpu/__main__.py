"""The Hydra overrides a plain ``python -m verl.trainer.main_ppo`` needs on a machine with no GPU.

    python -m verl.trainer.main_ppo $(python -m agentrl.verl.cpu) data.train_files=... ...

With agentrl installed, verl loads its plugin in every process: the ``cpu`` platform is chosen when no GPU is
present, and the ``agentrl_cpu`` rollout (transformers) is registered. These keys select that rollout and
work around what else verl assumes of a GPU machine (``agentrl.verl.args.CPU_DEFAULTS`` says why each is
there); later keys on the command line win.
"""

from __future__ import annotations

import sys

from agentrl.verl.args import CPU_DEFAULTS, to_cli


def main(argv: list[str] | None = None) -> int:
    print("\n".join(to_cli(CPU_DEFAULTS)) if "--lines" in (argv or sys.argv[1:]) else " ".join(to_cli(CPU_DEFAULTS)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
