"""A BFCL row through the real episode: declared tools offered, the model's call recorded, not run, and scored
by ``bfcl_ast`` loaded through the plugin's entry point. The policy is scripted (no model here)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

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

    async def main(run_dir, jobs):
        spec = RunSpec(run_dir=run_dir, tools=[], rewards=[{"name": "bfcl_ast"}])
        state = WorkerState(spec)
        try:
            for category, row_id, text in json.loads(jobs):  # one episode each, one line each
                row = next(r for r in rows(category) if r["id"] == row_id)
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


# parallel_0: play Taylor Swift for 20 minutes and Maroon 5 for 15 (spotify.play, offered as spotify_play)
MAROON, SWIFT = {"artist": "Maroon 5", "duration": 15}, {"artist": "Taylor Swift", "duration": 20}
# simple_java_1: SQL completion proposals for 'Customers', short names, params limit 50 and schema 'public'
JAVA = {"object": "Customers", "useShortName": "true",
        "params": 'new HashMap<String, Object>() {{ put("limit", 50); put("schemaFilter", "public"); }}'}
JAVA_FN = "SQLCompletionAnalyzer_makeProposalsFromObject"
# simple_javascript_0: validate the field 'userInputField' after typing is complete
JS_FN = "validateUserInput"
JOBS = {
    "parallel_right": ("parallel", "parallel_0", _block("spotify_play", MAROON) + "\n" + _block("spotify_play", SWIFT)),
    "parallel_one_of_two": ("parallel", "parallel_0", _block("spotify_play", SWIFT)),
    "java_right": ("simple_java", "simple_java_1", _block(JAVA_FN, JAVA)),
    # a JSON boolean where Java source text is asked for
    "java_json_true": ("simple_java", "simple_java_1", _block(JAVA_FN, JAVA).replace('"true"', "true")),
    "js_quoted": ("simple_javascript", "simple_javascript_0",
                  _block(JS_FN, {"inputField": '"userInputField"', "isComplete": "true"})),
    "js_bare": ("simple_javascript", "simple_javascript_0",  # read as is
                _block(JS_FN, {"inputField": "userInputField", "isComplete": "true"})),
    "js_wrong": ("simple_javascript", "simple_javascript_0",
                 _block(JS_FN, {"inputField": '"userInputField"', "isComplete": "false"})),
}


@pytest.fixture(scope="module")
def episodes(tmp_path_factory):
    """Every episode of this file, run in one process (each start imports verl): name -> record and tools."""
    run_dir = tmp_path_factory.mktemp("bfcl-episodes")
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(run_dir), json.dumps(list(JOBS.values()))],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return dict(zip(JOBS, (json.loads(line) for line in out.stdout.splitlines()[-len(JOBS):])))


def test_a_parallel_row_scored_through_the_episode(episodes):
    got = episodes["parallel_right"]
    record = got["record"]
    assert [t["name"] for t in got["tools"]] == ["spotify_play"]
    assert record["stop_reason"] == "declared_call" and record["tool_calls"] == 2
    assert record["trajectories"][0]["tool_results"] == [] and record["reward"] == 1.0
    assert record["components"] == {"bfcl_ast": 1.0}
    assert episodes["parallel_one_of_two"]["record"]["components"] == {"bfcl_ast": 0.0}


def test_java_and_javascript_rows_take_source_text_through_the_episode(episodes):
    (tool,) = episodes["java_right"]["tools"]
    assert {p["type"] for p in tool["parameters"]["properties"].values()} == {"string"}  # offered as source text
    assert [episodes[k]["record"]["components"] for k in ("java_right", "java_json_true")] == [
        {"bfcl_ast": 1.0}, {"bfcl_ast": 0.0}]
    assert [episodes[k]["record"]["components"] for k in ("js_quoted", "js_bare", "js_wrong")] == [
        {"bfcl_ast": 1.0}, {"bfcl_ast": 1.0}, {"bfcl_ast": 0.0}]
