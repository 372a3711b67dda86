"""An agent written with the OpenAI SDK (configs/agents/openai_calculator.py, unchanged) trained through its own
endpoint: run by the agent loop on local engines (the demo model, and scripted replies that always call a tool),
with the token audit checking that every trained assistant token is a token the model sampled."""

from __future__ import annotations

import asyncio

import json
from pathlib import Path

import pytest
import yaml

from agentrl.program import ProgramError, load_program
from agentrl.workflow.local import LocalRunner, load_rows
from agentrl.workflow.models import load_settings

ROOT = Path(__file__).resolve().parents[2]
AGENT = ROOT / "configs" / "agents" / "openai_calculator.py"

# an agent that rewrites its history as many frameworks do: it folds each tool result into a new user message
# and drops the call, so no request continues the previous one
REWRITER = '''
from openai import AsyncOpenAI
import json, sys
sys.path.insert(0, %(agents)r)
from openai_calculator import TOOLS, call_tool

async def run(row, base_url, api_key):
    client = AsyncOpenAI(base_url=base_url, api_key=api_key)
    question = row["messages"][-1]["content"]
    messages = [{"role": "user", "content": question}]
    for _ in range(3):
        r = await client.chat.completions.create(model="policy", messages=messages, tools=TOOLS)
        m = r.choices[0].message
        if not m.tool_calls:
            return m.content
        c = m.tool_calls[0]
        messages = [{"role": "user", "content": question + " (" + c.function.name + " gave "
                     + call_tool(c.function.name, c.function.arguments) + ")"}]
'''

FAILING = '''
async def run(row, base_url, api_key):
    raise ValueError("my agent broke")
'''


def _demo() -> dict:
    """The demo build agentrl keeps in its cache (built offline on first use)."""
    from agentrl.runner import resolve_model

    model_path, demo = resolve_model("demo")
    return {**demo, "model_path": model_path}


def _config(tmp_path: Path, program: str, rows: int = 6) -> Path:
    demo = _demo()
    lines = Path(demo["val_path"]).read_text().splitlines()[:rows]
    (tmp_path / "val.jsonl").write_text("\n".join(lines) + "\n")
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"agentrl": {
        "model": "demo", "train_data": "val.jsonl", "val_data": "val.jsonl",
        "rewards": [{"name": "math", "weight": 1.0}, {"name": "tool_use", "weight": 0.5}],
        "max_prompt_length": 320, "max_response_length": 64, "agent": {"program": program, "max_turns": 3}}}))
    return path


def _audit(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _check_exact(lines: list[dict]) -> tuple[int, int]:
    """Every sequence's trained ids (mask 1) are, in order, the ids generate() returned for it; returns
    (trained ids checked, sequences)."""
    checked = sequences = 0
    for line in lines:
        generated = [t for ids in line["generated"] for t in ids]
        trained = [t for seq in line["sequences"] for t, m in zip(seq["response_ids"], seq["mask"]) if m]
        assert trained == generated, line["rollout_id"]
        for seq in line["sequences"]:
            assert len(seq["mask"]) == len(seq["response_ids"])
            score = seq["reward_score"]
            assert score == line["reward"] or (line["reward"] is None and score != score)  # NaN: unscorable
        checked += len(trained)
        sequences += len(line["sequences"])
    return checked, sequences


def _run(config: Path, engine, monkeypatch, tmp_path: Path, samples: int = 1, temperature: float = 1.0):
    audit = tmp_path / "audit.jsonl"
    monkeypatch.setenv("AGENTRL_TOKEN_AUDIT", str(audit))
    settings = load_settings(str(config))
    runner = LocalRunner(settings, settings.model, engine=engine)
    try:
        records = runner.run(load_rows(settings.val_data), samples=samples, temperature=temperature)
    finally:
        runner.close()
    return records, _audit(audit), runner


def test_openai_sdk_agent_on_scripted_replies_calls_its_tool_and_trains_exact_tokens(tmp_path, monkeypatch, scripted):
    from transformers import AutoTokenizer

    config = _config(tmp_path, str(AGENT))
    engine = scripted(AutoTokenizer.from_pretrained(_demo()["model_path"]))
    records, audit, _ = _run(config, engine, monkeypatch, tmp_path)
    assert len(records) == 6 and engine.calls == 12  # a call, then the answer, for every row
    for r in records:
        rollout = r.rollout
        assert rollout.unscorable is None and rollout.components == {"math": 1.0, "tool_use": 1.0}  # rewards saw the calls
        assert rollout.tool_calls == 1 and rollout.trajectories[0].tool_calls[0].name in ("add", "subtract", "multiply")
        assert rollout.trajectories[0].tool_results[0].content == r.metadata["expected_answer"]
        assert rollout.messages[-1]["content"] == f"The answer is {r.metadata['expected_answer']}."
    checked, sequences = _check_exact(audit)
    assert sequences == 6 and checked > 0  # the SDK sent its history back as served: one sequence a rollout
    for line in audit:  # the tool result was appended after the sampled call, masked
        seq = line["sequences"][0]
        assert seq["response_ids"][: len(line["generated"][0])] == line["generated"][0]
        assert 0 in seq["mask"][len(line["generated"][0]):]


def test_openai_sdk_agent_on_the_demo_model_samples_exact_tokens(tmp_path, monkeypatch):
    config = _config(tmp_path, str(AGENT))
    records, audit, _ = _run(config, "transformers", monkeypatch, tmp_path, samples=4)
    assert len(records) == 24 and len(audit) == 24
    assert all(r.rollout.reward is not None for r in records)
    checked, sequences = _check_exact(audit)
    assert checked >= 24 and sequences == 24


def test_a_framework_that_rewrites_history_gives_several_sequences_sharing_the_reward(tmp_path, monkeypatch, scripted):
    from transformers import AutoTokenizer

    agent = tmp_path / "rewriter.py"
    agent.write_text(REWRITER % {"agents": str(AGENT.parent)})
    engine = scripted(AutoTokenizer.from_pretrained(_demo()["model_path"]))
    # the scripted model answers from the question it finds, so tell it the result the way a tool reply would
    records, audit, _ = _run(_config(tmp_path, str(agent)), engine, monkeypatch, tmp_path)
    checked, sequences = _check_exact(audit)
    assert sequences > len(records)  # at least one rollout became two sequences, each trained on its own ids
    assert all(len(line["sequences"]) == len(line["generated"]) for line in audit)


def test_an_agent_that_raises_is_unscorable_not_zero(tmp_path, monkeypatch, scripted):
    from transformers import AutoTokenizer

    agent = tmp_path / "failing.py"
    agent.write_text(FAILING)
    engine = scripted(AutoTokenizer.from_pretrained(_demo()["model_path"]))
    records, audit, _ = _run(_config(tmp_path, str(agent), rows=2), engine, monkeypatch, tmp_path)
    assert [r.rollout.reward for r in records] == [None, None]
    assert all(r.rollout.unscorable == "agent: ValueError: my agent broke" for r in records)
    assert engine.calls == 0
    # verl still gets a well-formed sequence (one filler token) whose NaN score gives it advantage 0
    assert [line["generated"] for line in audit] == [[], []]
    assert all(seq["reward_score"] != seq["reward_score"] for line in audit for seq in line["sequences"])


def test_program_names_fail_clearly(tmp_path):
    with pytest.raises(ProgramError, match="is not a file"):
        load_program(str(tmp_path / "nope.py"))
    (tmp_path / "norun.py").write_text("def helper():\n    pass\n")
    with pytest.raises(ProgramError, match=r"defines no `run` \(it defines: helper\)"):
        load_program(str(tmp_path / "norun.py"))
    (tmp_path / "sync.py").write_text("def run(row, base_url, api_key):\n    return ''\n")
    with pytest.raises(ProgramError, match="asyncio.to_thread"):
        load_program(str(tmp_path / "sync.py"))
    with pytest.raises(ProgramError, match="cannot import 'no_such_module'"):
        load_program("no_such_module:run")
    assert load_program(str(AGENT)).__name__ == "run"
    assert load_program(str(AGENT)) is load_program(str(AGENT))  # imported once per process


def test_an_agent_file_imports_the_modules_beside_it(tmp_path, monkeypatch):
    """An agent written before agentrl keeps its helpers in files of its own folder; loaded by path (relative to the
    config's folder), the file imports them as `python agent.py` would, and installed packages keep their names."""
    import sys

    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "my_directory.py").write_text("PEOPLE = {'Dana': '4417'}\n")
    (tmp_path / "proj" / "colorsys.py").write_text("raise ImportError('the standard library was shadowed')\n")
    (tmp_path / "proj" / "agent.py").write_text(
        "import colorsys, json\nfrom my_directory import PEOPLE\n\nasync def run(row, base_url, api_key):\n"
        "    return json.dumps(PEOPLE)\n")
    monkeypatch.setattr(sys, "path", list(sys.path))
    for name in ("my_directory", "colorsys"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    run = load_program("agent.py", base=tmp_path / "proj")
    assert asyncio.run(run({}, "", "")) == '{"Dana": "4417"}'


def test_register_agents_hook_selects_an_agent_by_name(monkeypatch, capsys):
    from agentrl import plugins
    from agentrl.hookspecs import hookimpl

    class MyAgents:
        @hookimpl
        def register_agents(self, register):
            register("calculator_agent", str(AGENT))

    monkeypatch.setattr(plugins, "_pm", plugins.new_plugin_manager(MyAgents()))
    assert load_program("calculator_agent").__name__ == "run"
    from agentrl.cli import _cmd_plugins

    _cmd_plugins(None)
    assert any(line.split()[:2] == ["agent", "calculator_agent"] for line in capsys.readouterr().out.splitlines())
    with pytest.raises(plugins.PluginError, match="unknown agent 'calculator_agnt'.*Did you mean 'calculator_agent'"):
        load_program("calculator_agnt")


FRAMEWORKS = Path(__file__).parent / "frameworks"


def _framework_engine(scripted, tokenizer):
    """The scripted replies, also reading results the way smolagents sends them (a user message
    "Observation: ...") and ending with smolagents' own final_answer tool, which that framework requires."""
    import re

    class Engine(scripted):
        async def generate(self, request_id, *, prompt_ids, sampling_params, **kw):
            from verl.workers.rollout.replica import TokenOutput

            text = self.tok.decode(prompt_ids)
            seen = re.findall(r"Observation:\s*(\S+)", text)
            if '"final_answer"' not in text or not seen:
                return await super().generate(request_id, prompt_ids=prompt_ids, sampling_params=sampling_params, **kw)
            self.calls += 1
            call = {"name": "final_answer", "arguments": {"answer": f"The answer is {seen[-1]}."}}
            ids = self.tok.encode("<tool_call>\n" + json.dumps(call) + "\n</tool_call><|im_end|>", add_special_tokens=False)
            return TokenOutput(token_ids=ids, log_probs=[0.0] * len(ids), stop_reason="completed")

    return Engine(tokenizer)


@pytest.mark.parametrize("agent", ["openai_agents_calc", "agents_sdk_calculator", "langgraph_calc", "pydantic_ai_calc", "smolagents_calc"])
def test_each_framework_unchanged_but_for_base_url(agent, tmp_path, monkeypatch, scripted, capsys):
    """Each framework's own agent, own tool decorator and own loop; scripted replies call the right tool then
    answer, so every rollout must solve its task, and every trained id must be one the model sampled."""
    from transformers import AutoTokenizer

    engine = _framework_engine(scripted, AutoTokenizer.from_pretrained(_demo()["model_path"]))
    file = FRAMEWORKS / f"{agent}.py" if (FRAMEWORKS / f"{agent}.py").exists() else AGENT.parent / f"{agent}.py"
    records, audit, _ = _run(_config(tmp_path, str(file), rows=4), engine, monkeypatch, tmp_path)
    assert [r.rollout.unscorable for r in records] == [None] * 4
    for r in records:
        assert r.rollout.components["math"] == 1.0, r.rollout.trajectories  # the framework ran its tool, the model answered
        assert r.rollout.components["tool_use"] > 0 and r.rollout.tool_calls >= 1
        if agent != "smolagents_calc":  # smolagents sends results back as user text ("Observation: ..."), not tool messages
            assert r.rollout.components["tool_use"] == 1.0
            assert r.rollout.trajectories[0].tool_results, "the tool result the framework sent back reached the sample"
    checked, sequences = _check_exact(audit)
    assert checked > 0
    if agent in ("openai_agents_calc", "agents_sdk_calculator"):  # the SDK sends the served turns back as served: one sequence a rollout
        assert sequences == len(records)
    with capsys.disabled():  # which case the framework's traffic produced (README, "Agents from other frameworks")
        print(f"\n{agent}: {sequences} sequences for {len(records)} rollouts, "
              f"{engine.calls} requests, {checked} trained ids all sampled")


def test_train_refuses_a_bad_program_before_ray_starts(tmp_path):
    import subprocess
    import sys

    (tmp_path / "sync_agent.py").write_text("def run(row, base_url, api_key):\n    return 'x'\n")
    config = _config(tmp_path, "sync_agent.py")
    out = subprocess.run([sys.executable, "-m", "agentrl.cli", "train", str(config)], capture_output=True, text=True,
                         timeout=300, cwd=tmp_path)
    assert out.returncode != 0
    assert "must be `async def run(row, base_url, api_key)`" in out.stdout + out.stderr
    assert "ray init" not in out.stdout + out.stderr


def test_stop_strings_cut_the_sampled_ids_after_the_token_that_completes_one():
    from transformers import AutoTokenizer

    from agentrl.verl.program_loop import stop_cut

    tok = AutoTokenizer.from_pretrained(_demo()["model_path"])
    ids = tok.encode("Thought: add them\nObservation: 5 and more text", add_special_tokens=False)
    kept, chars = stop_cut(tok, ids, ["Observation:", "never"])
    text = tok.decode(ids[:kept])
    assert "Observation:" in text and "Observation:" not in tok.decode(ids[: kept - 1])  # the shortest such prefix
    assert tok.decode(ids)[:chars] == "Thought: add them\n"
    assert stop_cut(tok, ids, ["absent"]) is None and stop_cut(tok, ids, []) is None


def test_a_malformed_call_comes_back_as_the_text_the_model_wrote(tmp_path, monkeypatch):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(_demo()["model_path"])
    broken = '<tool_call>\n{"name": "add", "arguments": {"a": 1,}}\n</tool_call>'

    class Broken:
        name = "broken"

        async def generate(self, request_id, *, prompt_ids, sampling_params, **_):
            from verl.workers.rollout.replica import TokenOutput

            ids = tok.encode(broken + "<|im_end|>", add_special_tokens=False)
            return TokenOutput(token_ids=ids, log_probs=[0.0] * len(ids), stop_reason="completed")

    records, audit, _ = _run(_config(tmp_path, str(AGENT), rows=2), Broken(), monkeypatch, tmp_path)
    for r in records:
        assert r.rollout.unscorable is None and r.rollout.reward == 0.0 and r.rollout.tool_calls == 0  # scored
        assert r.rollout.messages[-1] == {"role": "assistant", "content": broken}
    _check_exact(audit)


BLOCKING = '''
import asyncio
from openai import OpenAI

async def run(row, base_url, api_key):
    def blocking():  # a synchronous agent, run as program.py asks: through asyncio.to_thread
        client = OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=60)
        r = client.chat.completions.create(model="policy", messages=row["messages"])
        return r.choices[0].message.content
    return await asyncio.to_thread(blocking)
'''


def test_more_blocking_agents_in_flight_than_the_default_executor_has_threads(tmp_path, monkeypatch, scripted):
    """Each blocking agent holds a thread for its whole rollout, and verl renders chat templates on the loop's
    default executor (6 threads on 2 cores): 10 rollouts in flight must not wait on each other for a thread."""
    import os

    from transformers import AutoTokenizer

    agent = tmp_path / "blocking.py"
    agent.write_text(BLOCKING)
    engine = scripted(AutoTokenizer.from_pretrained(_demo()["model_path"]))
    if min(32, (os.cpu_count() or 1) + 4) >= 10:
        pytest.skip("this machine's default executor has 10 threads or more: the case cannot arise")
    records, audit, _ = _run(_config(tmp_path, str(agent), rows=5), engine, monkeypatch, tmp_path, samples=2)
    assert len(records) == 10 and [r.rollout.unscorable for r in records] == [None] * 10
    assert engine.calls == 10
    _check_exact(audit)
