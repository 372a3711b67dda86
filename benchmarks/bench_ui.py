"""How fast the rollout explorer opens a step of a large rollouts.jsonl, against reading the whole file.

Writes a synthetic rollouts.jsonl of --size-mb (1 GiB by default; agentrl/ui/synthetic.py, 256 rollouts a
step), then prints:
  index build     the first, cold indexing of the whole file (once per run directory, kept on disk)
  index extend    indexing one more appended step; and a no-op update (what each page request does)
  page            the explorer's page of a middle step: index query + reading those lines + advantages,
                  median of --repeat; also the whole HTTP page (template included) through the web app,
                  a filtered page, a group view and a text search
  baseline        the naive way: read and parse every line, keep the step's rollouts (same run)

    .venv/bin/python benchmarks/bench_ui.py [--size-mb 1024] [--dir /tmp/bench-ui] [--repeat 20]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agentrl.ui.explorer import Filters, explorer_page  # noqa: E402
from agentrl.ui.index import RolloutIndex  # noqa: E402
from agentrl.ui.synthetic import append_step, write_big_rollouts, write_config  # noqa: E402


def timed(fn, repeat: int = 1) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--dir", help="run directory to use (kept; an existing file of the right size is reused)")
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    run = Path(args.dir or tempfile.mkdtemp(prefix="agentrl-bench-ui-")) / "run"
    run.mkdir(parents=True, exist_ok=True)
    path = run / "rollouts.jsonl"
    target = args.size_mb * 2**20
    if not path.exists() or abs(path.stat().st_size - target) > target * 0.05:
        t0 = time.perf_counter()
        write_config(run, 10**6, 16, 16)
        write_big_rollouts(path, target)
        print(f"wrote {path} in {time.perf_counter() - t0:.1f} s")
    for stale in (run / ".agentrl-ui").glob("rollouts.sqlite*") if (run / ".agentrl-ui").exists() else []:
        stale.unlink()
    size = path.stat().st_size
    print(f"rollouts.jsonl: {size / 2**20:.0f} MiB  (load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} "
          f"{os.getloadavg()[2]:.2f}, {os.cpu_count()} cores)")

    idx = RolloutIndex(run)
    build, added = timed(idx.update)
    steps = idx.steps()
    print(f"index build (cold):          {build:8.2f} s   {added} rollouts, {len(steps)} steps, "
          f"{size / 2**20 / build:.0f} MiB/s")
    noop, _ = timed(idx.update, args.repeat)
    last = max(s["step"] for s in steps)
    extend, added = timed(lambda: (append_step(run, last + 2, prompts=16, samples=16, pad=6000, val_every=0), idx.update())[1])
    print(f"index extend (+1 step):      {extend * 1000:8.1f} ms  ({added} rollouts appended and indexed)")
    print(f"index update, nothing new:   {noop * 1000:8.2f} ms")
    idx.close()
    reopen, _ = timed(lambda: RolloutIndex(run).update())
    print(f"index reopened from disk:    {reopen * 1000:8.1f} ms  (persisted; nothing re-read)")

    idx = RolloutIndex(run)
    mid = steps[len(steps) // 2]["step"]
    page1, p = timed(lambda: explorer_page(idx, mid, page=1), args.repeat)
    page_k, _ = timed(lambda: explorer_page(idx, mid, page=7), args.repeat)
    print(f"explorer page, step {mid} p1:  {page1 * 1000:8.1f} ms  ({len(p['rollouts'])} of {p['total']} rollouts)")
    print(f"explorer page, step {mid} p7:  {page_k * 1000:8.1f} ms")
    filt, p = timed(lambda: explorer_page(idx, mid, filters=Filters(reward_min=0.5, tool="add")), args.repeat)
    print(f"filtered page (reward, tool): {filt * 1000:7.1f} ms  ({p['total']} match)")
    grp, p = timed(lambda: explorer_page(idx, mid, groups=True), args.repeat)
    print(f"group view (4 prompts):      {grp * 1000:8.1f} ms")
    text, p = timed(lambda: explorer_page(idx, mid, filters=Filters(text="The answer is 1")), max(3, args.repeat // 4))
    print(f"text search in a step:       {text * 1000:8.1f} ms  ({p['total']} match)")

    from fastapi.testclient import TestClient

    from agentrl.ui.app import create_app

    client = TestClient(create_app(run.parent, background=False))
    client.get(f"/runs/run/rollouts?step={mid}")  # opens the index once
    http, resp = timed(lambda: client.get(f"/runs/run/rollouts?step={mid}&page=3"), args.repeat)
    assert resp.status_code == 200, resp.text[:300]
    print(f"HTTP explorer page (render): {http * 1000:8.1f} ms  ({len(resp.content) / 1024:.0f} KiB of HTML)")

    def naive() -> int:
        found = []
        with path.open("rb") as fh:
            for line in fh:
                r = json.loads(line)
                if r.get("step") == mid and not r.get("validation"):
                    found.append(r)
        return len(found)

    base, n = timed(naive)
    print(f"baseline, full read+parse:   {base:8.2f} s   ({n} rollouts of step {mid})")
    print(f"\nexplorer page vs full read: {base / page1:.0f}x faster (page {page1 * 1000:.1f} ms, "
          f"full read {base:.2f} s); the index is built once ({build:.1f} s) and extended as the file grows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
