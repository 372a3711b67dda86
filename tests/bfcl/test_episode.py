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

    async def main(run_dir, text):
        spec = RunSpec(run_dir=run_dir, tools=[], rewards=[{"name": "bfcl_ast"}])
        row = next(r for r in rows("parallel") if r["id"] == "parallel_0")
        state, policy = WorkerState(spec), Scripted(text)
        try:
            record = await Episode(state, policy).run(loop_record(__import__("pathlib").Path("bfcl.jsonl"), 1, row),
                                                      {"temperature": 0})
        finally:
            await state.aclose()
        print(json.dumps({"record": record.to_dict(), "tools": [t["function"]["name"] for t in policy.tools]}))

    asyncio.run(main(*sys.argv[1:]))
""")


def _block(name, args):
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': args})}\n</tool_call>"


def _run(run_dir, text):
    run_dir.mkdir()
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(run_dir), text], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.splitlines()[-1])


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
