"""The eval file read back typed (agentrl.workflow.evalfile): a line as `agentrl eval` writes it round-trips to the
same bytes of JSON, its rollout fields read through the rollouts' own decoder, and a bad file says where."""

from __future__ import annotations

import json
import re

import pytest

from agentrl.record import StopReason
from agentrl.workflow.evalfile import EvalFileError, EvalRecord, read_eval

# a line as agentrl/workflow/local.py wrote it before EvalRecord (its keys, in its order)
LINE = {"id": "demo-3", "sample": 1, "reward": 0.5, "components": {"math": 0.0, "tool_use": 1.0}, "unscorable": None,
        "tool_calls": 1, "tokens": 31, "latency": 0.84, "model_seconds": 0.5, "tool_seconds": 0.2,
        "stop_reason": "answered", "metadata": {"expected_answer": "85"}, "source": "val.jsonl:4",
        "prompt": [{"role": "user", "content": "What is 37 + 48?"}],
        "messages": [{"role": "user", "content": "What is 37 + 48?"}, {"role": "assistant", "content": "86"}],
        "trajectories": [{"response": "", "tool_calls": [{"id": "c0", "name": "add", "arguments": {"a": 37, "b": 48}}],
                        "tool_results": [{"id": "c0", "name": "add", "content": "85", "is_error": False}]},
                       {"response": "86", "tool_calls": [], "tool_results": []}],
        "rollout_id": "r-9", "turn_rewards": [], "turn_unscorable": {}}


def test_a_line_round_trips_to_the_same_json():
    record = EvalRecord.from_line(json.loads(json.dumps(LINE)))
    assert (record.id, record.sample, record.metadata, record.prompt) == ("demo-3", 1, LINE["metadata"], LINE["prompt"])
    assert record.rollout.response_tokens == 31 and record.rollout.stop_reason is StopReason.ANSWERED
    assert record.rollout.trajectories[0].tool_calls[0].name == "add" and record.rollout.trajectories[1].response == "86"
    assert json.dumps(record.to_dict()) == json.dumps(LINE)


def test_an_older_line_reads_with_defaults(tmp_path):
    """The first eval files had no rollout_id, turn fields, model/tool seconds or source."""
    old = {k: v for k, v in LINE.items() if k not in ("rollout_id", "turn_rewards", "turn_unscorable", "model_seconds",
                                                      "tool_seconds", "source")}
    path = tmp_path / "old.jsonl"
    path.write_text(json.dumps({"agentrl_eval": {"model": "base"}}) + "\n" + json.dumps(old) + "\n")
    header, (record,) = read_eval(str(path))
    assert header == {"model": "base"} and record.rollout.reward == 0.5 and record.rollout.rollout_id is None
    assert record.rollout.turn_rewards == [] and record.rollout.model_seconds is None and record.source is None


@pytest.mark.parametrize("text, says", [
    ("{not json\n", "old.jsonl:1: not valid JSON"),
    ('{"agentrl_eval": {}}\n{"reward": 1.0}\n', "old.jsonl:2: not an `agentrl eval` record (needs id and reward)"),
    ('{"agentrl_eval": {}}\n', "no records; is it an `agentrl eval -o` file?"),
])
def test_a_file_that_is_not_an_eval_file_says_where(tmp_path, text, says):
    (tmp_path / "old.jsonl").write_text(text)
    with pytest.raises(EvalFileError, match=re.escape(says)):
        read_eval(str(tmp_path / "old.jsonl"))
