"""How fast `agentrl rescore` goes, and that its memory stays flat as the run grows (it streams rollouts.jsonl).

Writes synthetic runs of each size in ``--sizes`` (real RolloutRecords: the demo's prompts, 8 samples each, a
tool call and an answer, right or wrong, scored by the demo's rewards; the rows in the run's data/), then
rescores each one with the demo's rewards in a fresh process that reports its own wall time and peak resident
memory (ru_maxrss). With ``--run``, rescores a stored run the same way (e.g. the recorded demo run).

    .venv/bin/python benchmarks/bench_rescore.py [--sizes 10000,100000] [--keep DIR]
    .venv/bin/python benchmarks/bench_rescore.py --run tests/ui/recorded/real_run [--data DEMO_DATA_DIR]

The machine's load average is printed beside each figure: a shared machine's rollouts/s are not idle ones.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CONFIG = {"agentrl": {"name": "demo", "model": "demo", "train_data": "demo",
                      "rewards": [{"name": "math", "weight": 1.0}, {"name": "tool_use", "weight": 0.5}]}}

MEASURE = """
import json, resource, sys, time
from agentrl.rescore import rescore
t = time.perf_counter()
s = rescore(sys.argv[1], sys.argv[2], sys.argv[3], out=open("/dev/null", "w"))
seconds = time.perf_counter() - t
print(json.dumps({"rollouts": s["counts"]["rollouts"], "seconds": round(seconds, 1),
                  "rollouts_per_s": round(s["counts"]["rollouts"] / seconds),
                  "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                  "load": open("/proc/loadavg").read().split()[:3]}))
"""


def synthetic_run(run: Path, n: int) -> None:
    from agentrl.dataset import convert
    from agentrl.demo.data import make_rows, write_jsonl
    from agentrl.record import RolloutRecord
    from agentrl.rundir import RunDir

    rows_file = run.parent / f"{run.name}-train.jsonl"
    write_jsonl(str(rows_file), make_rows(512, 0))
    rundir = RunDir(run)
    convert(rows_file, rundir.train_data)
    rows = [json.loads(json.loads(x)["extra_info"]["agentrl_row"]) for x in rundir.train_data.read_text().splitlines()]
    with rundir.rollouts.open("w") as fh:
        for i in range(n):
            row = rows[(i // 8) % len(rows)]
            gold, tool = row["metadata"]["expected_answer"], row["metadata"]["expected_tools"][0]["name"]
            answer = gold if i % 3 else str(int(gold) + 1)
            call = {"id": "c0", "name": tool, "arguments": {"a": 1, "b": 2}}
            record = RolloutRecord(
                rollout_id=f"r-{i:08d}", prompt_id=row["id"], source=row["source"], step=1 + i // 64, group=f"g{i // 8}",
                messages=[*row["messages"], {"role": "assistant", "content": f"The answer is {answer}."}],
                trajectories=[{"response": "", "tool_calls": [call], "tool_results": [{"id": "c0", "content": gold}]},
                            {"response": f"The answer is {answer}.", "tool_calls": [], "tool_results": []}],
                tool_calls=1, reward=1.0 if i % 3 else 1 / 3, components={"math": float(bool(i % 3)), "tool_use": 1.0},
                reward_version="rv-synthetic", response_tokens=24)
            fh.write(json.dumps(record.to_dict()) + "\n")


def measure(run: Path, config: Path, out: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", MEASURE, str(run), str(config), str(out)], capture_output=True,
                          text=True, cwd=REPO)
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    return json.loads(done.stdout.splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="10000,100000")
    p.add_argument("--run", help="rescore this stored run instead of synthetic ones")
    p.add_argument("--keep", help="folder for the synthetic runs and outputs (default: temporary)")
    args = p.parse_args()
    work = Path(args.keep or tempfile.mkdtemp(prefix="agentrl-rescore-"))
    work.mkdir(parents=True, exist_ok=True)
    config = work / "demo_rewards.json"
    config.write_text(json.dumps(CONFIG))
    if args.run:
        print(json.dumps({"run": args.run, **measure(Path(args.run), config, work / "out-run")}))
        return 0
    for n in (int(x) for x in args.sizes.split(",")):
        run = work / f"run{n}"
        synthetic_run(run, n)
        size = (run / "rollouts.jsonl").stat().st_size / 2**20
        print(json.dumps({"synthetic": n, "rollouts_jsonl_mib": round(size, 1), **measure(run, config, work / f"out{n}")}),
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
