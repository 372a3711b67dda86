"""A BFCL row through the real episode: declared tools offered, the model's call recorded, not run, and scored
by ``bfcl_ast`` loaded through the plugin's entry point. The policy is scripted (no model here)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import asyncio, json, sys
    from agentrl.dataset import loop_record
    from agentrl.episode import Call, Episode, Turn
    from agentrl.spec import RunSpec
    from agentrl.worker import WorkerState
    from agentrl_bfcl.rows import rows

    class Scripted:
        '''One turn: the given text, its calls parsed by verl's Hermes parser as in training.'''
        def __init__(self, text):
            self.versions, self.model_seconds, self.text = {"global_steps": 0}, 0.0, text
        async def start(self, messages, tools):
            self.tools = tools
        def room(self):
            return 100
        async def generate(self, params, room):
            from verl.experimental.agent_loop.tool_parser import ToolParser

            class Bytes:
                def decode(self, ids, **_):
                    return bytes(ids).decode()
            parser = ToolParser.get_tool_parser("hermes", Bytes())
            _, calls = await parser.extract_tool_calls(list(self.text.encode()))
            return Turn("", [Call(c.name, c.arguments) for c in calls], self.text)
        async def extend(self, previous, messages, tools):
            raise AssertionError("nothing follows a turn that calls declared tools")
        async def finish(self, prompt):
            return 7

    async def main(run_dir, category, row_id, *texts):
        spec = RunSpec(run_dir=run_dir, tools=[], rewards=[{"name": "bfcl_ast"}])
        row = next(r for r in rows(category) if r["id"] == row_id)
        state = WorkerState(spec)
        try:
            for text in texts:  # one episode each, one line each
                policy = Scripted(text)
                record = await Episode(state, policy).run(
                    loop_record(__import__("pathlib").Path("bfcl.jsonl"), 1, row), {"temperature": 0})
                print(json.dumps({"record": record.to_dict(), "tools": [t["function"] for t in policy.tools]}))
        finally:
            await state.aclose()

    asyncio.run(main(*sys.argv[1:]))
""")


def _block(name, args):
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': args})}\n</tool_call>"


def _runs(run_dir, category, row_id, *texts):
    """One episode of the row per text, in one process: each episode's record and the tools it offered."""
    run_dir.mkdir()
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(run_dir), category, row_id, *texts], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return [json.loads(line) for line in out.stdout.splitlines()[-len(texts):]]


def _run(run_dir, text):
    (got,) = _runs(run_dir, "parallel", "parallel_0", text)
    got["tools"] = [t["name"] for t in got["tools"]]
    return got


def test_a_parallel_row_scored_through_the_episode(tmp_path):
    # parallel_0: play Taylor Swift for 20 minutes and Maroon 5 for 15 (spotify.play, offered as spotify_play)
    right = _block("spotify_play", {"artist": "Maroon 5", "duration": 15}) + "\n" + \
        _block("spotify_play", {"artist": "Taylor Swift", "duration": 20})
    got = _run(tmp_path / "a", right)
    record = got["record"]
    assert got["tools"] == ["spotify_play"]
    assert record["stop_reason"] == "declared_call" and record["tool_calls"] == 2
    assert record["trajectories"][0]["tool_results"] == [] and record["reward"] == 1.0
    assert record["components"] == {"bfcl_ast": 1.0}
    wrong = _block("spotify_play", {"artist": "Taylor Swift", "duration": 20})  # one of the two calls
    assert _run(tmp_path / "b", wrong)["record"]["components"] == {"bfcl_ast": 0.0}


def test_java_and_javascript_rows_take_source_text_through_the_episode(tmp_path):
    # simple_java_1: SQL completion proposals for 'Customers', short names, params limit 50 and schema 'public'
    right = _block("SQLCompletionAnalyzer_makeProposalsFromObject", {
        "object": "Customers", "useShortName": "true",
        "params": 'new HashMap<String, Object>() {{ put("limit", 50); put("schemaFilter", "public"); }}'})
    json_true = right.replace('"true"', "true")  # a JSON boolean where Java source text is asked for
    got = _runs(tmp_path / "java", "simple_java", "simple_java_1", right, json_true)
    (tool,) = got[0]["tools"]
    assert {p["type"] for p in tool["parameters"]["properties"].values()} == {"string"}  # offered as source text
    assert [g["record"]["components"] for g in got] == [{"bfcl_ast": 1.0}, {"bfcl_ast": 0.0}]
    # simple_javascript_0: validate the field 'userInputField' after typing is complete
    quoted = _block("validateUserInput", {"inputField": '"userInputField"', "isComplete": "true"})
    bare = _block("validateUserInput", {"inputField": "userInputField", "isComplete": "true"})  # read as is
    wrong = _block("validateUserInput", {"inputField": '"userInputField"', "isComplete": "false"})
    got = _runs(tmp_path / "js", "simple_javascript", "simple_javascript_0", quoted, bare, wrong)
    assert [g["record"]["components"] for g in got] == [{"bfcl_ast": 1.0}, {"bfcl_ast": 1.0}, {"bfcl_ast": 0.0}]
