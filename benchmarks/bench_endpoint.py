"""The endpoint's cost per request against the same turn in agentrl's own loop, as conversations grow.

    .venv/bin/python benchmarks/bench_endpoint.py [--turns 2 8 32] [--rollouts 16] [--repeat 2]

A model stand-in shaped like verl's server manager answers every request at once with pre-tokenised text: a
hermes tool call on each turn but the last, then a final answer. The same rows run twice on the demo's tokenizer
and chat template through ``agentrl.workflow.local.LocalRunner``:

* ``own loop``: agentrl's agent loop (no tool servers: each call gets the loop's "no tools" result);
* ``endpoint``: an agent written with the OpenAI SDK (``AsyncOpenAI``, its own Python tool) through the
  rollout's OpenAI-compatible endpoint: the HTTP request, the SDK, the render of the new messages, the
  bookkeeping of exact tokens and the parse into OpenAI's shape.

For each turn count: wall ms and CPU ms (this process, all threads) per model turn, each side; the difference is
the endpoint's overhead per request. Flat as turns grow means no per-request cost grows with the conversation
(each request renders only what it appends). Figures depend on the machine's load: print ``uptime`` beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import yaml

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

AGENT = '''
import json
from openai import AsyncOpenAI

TOOLS = [{"type": "function", "function": {"name": "add", "description": "Add two numbers: a + b.",
          "parameters": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                         "required": ["a", "b"]}}}]


async def run(row, base_url, api_key):
    client = AsyncOpenAI(base_url=base_url, api_key=api_key)
    messages = [dict(m) for m in row["messages"]]
    while True:
        r = await client.chat.completions.create(model="policy", messages=messages, tools=TOOLS)
        m = r.choices[0].message
        messages.append(m.model_dump(exclude_none=True))
        if not m.tool_calls:
            return m.content
        for c in m.tool_calls:
            args = json.loads(c.function.arguments)
            messages.append({"role": "tool", "tool_call_id": c.id, "content": str(args["a"] + args["b"])})
'''


class Instant:
    """Answers at once: a tool call on every turn but the last of each rollout (counted per request id)."""

    name = "instant"

    def __init__(self, tokenizer, turns: int) -> None:
        self.turns = turns
        self.seen: dict[str, int] = {}
        end = "<|im_end|>"
        call = '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>'
        self.call = tokenizer.encode(call + end, add_special_tokens=False)
        self.answer = tokenizer.encode("The answer is 5." + end, add_special_tokens=False)

    async def generate(self, request_id, *, prompt_ids, sampling_params, **_):
        from verl.workers.rollout.replica import TokenOutput

        n = self.seen[request_id] = self.seen.get(request_id, 0) + 1
        ids = self.answer if n >= self.turns else self.call
        return TokenOutput(token_ids=list(ids), log_probs=[0.0] * len(ids), stop_reason="completed")


def measure(config: Path, turns: int, rows: list, tokenizer) -> dict:
    from agentrl.workflow.local import LocalRunner
    from agentrl.workflow.models import load_settings

    settings = load_settings(str(config))
    engine = Instant(tokenizer, turns)
    runner = LocalRunner(settings, settings.model, engine=engine, concurrency=len(rows))
    try:
        wall, cpu = time.perf_counter(), time.process_time()
        records = runner.run(rows, samples=1, temperature=1.0)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    finally:
        runner.close()
    model_turns = sum(engine.seen.values())
    assert all(r.rollout.reward is not None for r in records), [r.rollout.unscorable for r in records][:2]
    assert model_turns == len(rows) * turns, (model_turns, len(rows), turns)
    return {"wall_ms_per_turn": 1000 * wall / model_turns, "cpu_ms_per_turn": 1000 * cpu / model_turns,
            "turns": model_turns}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, nargs="+", default=[2, 8, 32])
    parser.add_argument("--rollouts", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=2, help="runs of each side; the best is kept")
    args = parser.parse_args()
    from transformers import AutoTokenizer

    from agentrl.runner import resolve_model
    from agentrl.verl.agent_loop import quiet_logs

    quiet_logs()
    model_path, demo = resolve_model("demo")
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    work = Path(tempfile.mkdtemp(prefix="bench-endpoint-"))
    (work / "agent.py").write_text(AGENT)
    rows_file = work / "rows.jsonl"
    questions = [json.loads(line) for line in Path(demo["val_path"]).read_text().splitlines()][: args.rollouts]
    rows_file.write_text("".join(json.dumps(q) + "\n" for q in questions))
    from agentrl.workflow.local import load_rows

    rows = load_rows(rows_file)
    results = []
    for turns in args.turns:
        line = {"turns": turns}
        for side, program in (("own loop", None), ("endpoint", str(work / "agent.py"))):
            config = work / f"{side.replace(' ', '_')}_{turns}.yaml"
            agent = {"max_turns": turns, "max_tool_calls": turns, "max_parallel_calls": 1}
            if program:
                agent["program"] = program
            config.write_text(yaml.safe_dump({"agentrl": {
                "model": "demo", "train_data": str(rows_file), "rewards": [{"name": "math"}],
                "max_prompt_length": 512, "max_response_length": 64 * turns + 64, "agent": agent}}))
            best = min((measure(config, turns, rows, tokenizer) for _ in range(args.repeat)),
                       key=lambda m: m["cpu_ms_per_turn"])
            line[side] = {k: round(v, 3) for k, v in best.items()}
        line["overhead_cpu_ms_per_request"] = round(line["endpoint"]["cpu_ms_per_turn"] - line["own loop"]["cpu_ms_per_turn"], 3)
        line["overhead_wall_ms_per_request"] = round(line["endpoint"]["wall_ms_per_turn"] - line["own loop"]["wall_ms_per_turn"], 3)
        results.append(line)
        print(json.dumps(line), flush=True)
    print(json.dumps({"load": os.getloadavg(), "rollouts": args.rollouts, "python": sys.version.split()[0]}))


if __name__ == "__main__":
    main()
