"""The RFC #7244 bias table of README.md's "Per-turn rewards and turn-level credit", from the test's own bandit.

    .venv/bin/python benchmarks/credit_bias.py

For each noise mean: the mean advantage of "continue" at turn 1 (rollout 0 of each of 6000 groups of 8, the
groups that continued) with its standard error, for ``turn`` without and with the std scale and for the naive
per-turn-index normalisation, beside the true value. The bandit and the naive estimator are those of
tests/core/test_credit.py, so the table is what the test asserts on.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "core"))

from test_credit import GROUPS, N, _bandit, _mean_se, naive  # noqa: E402

from agentrl.credit import advantages  # noqa: E402


def main() -> None:
    for mu in (0.0, 0.5):
        started = time.perf_counter()
        rewards, turns, ids, continued = _bandit(seed=7244 + int(mu * 10), groups=GROUPS, n=N, noise_mean=mu)
        pick = [g * N for g in range(GROUPS) if continued[g]]
        truth = 0.5 * mu * (N - 1) / N
        for name, adv in (("turn", advantages("turn", rewards, turns, ids, norm_by_std=False)),
                          ("turn, std", advantages("turn", rewards, turns, ids)),
                          ("naive", naive(rewards, turns, ids))):
            m, se = _mean_se([adv[i][0] for i in pick])
            print(f"noise mean {mu}: {name:10s} A(continue) {m:+.3f} ± {se:.3f}  (true {truth:+.3f}, {len(pick)} samples)")
        print(f"  {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
