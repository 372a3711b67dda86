"""CLI: ``python -m agentrl.demo.build OUT_DIR [--seed N] [--warmup-steps N]``.

The implementation is in :mod:`agentrl.demo.builder`; ``agentrl.demo.build`` (the attribute of the
package) is the function.
"""

from agentrl.demo.builder import build, main

__all__ = ["build", "main"]

if __name__ == "__main__":
    raise SystemExit(main())
