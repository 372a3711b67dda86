"""rollouts.jsonl read through its one decoder (agentrl.rolloutfile): a line the real episode writes today, and
lines in the layouts earlier agentrl wrote, read as typed records; the filing keys read whatever the key order
or spacing; off-policy placement reads them so."""

from __future__ import annotations

import json

import msgspec

from agentrl.placement import Placer
from agentrl.record import KEYS, RolloutRecord
from agentrl.rolloutfile import Call, CallResult, StopReason, Turn, decode, line_key, read_new, read_records
from agentrl.rundir import RunDir
from test_episode import _episode  # the episode with a scripted policy against the real calculator server

# As agentrl's agent loop wrote a line at commit b21425c (the first rollouts.jsonl: no policy_version, user_turns,
# passed, turn fields, group or reward_version, "validation" after the messages) and at 30d6960 (the typed
# record's first layout: no group, drawn_step, staleness, turn_rewards, turn_unscorable, reward_version).
OLDEST = {"rollout_id": "r-old", "prompt_id": "q7", "source": "train.jsonl:7", "step": 2,
          "messages": [{"role": "user", "content": "What is 2 + 3?"}, {"role": "assistant", "content": "5"}],
          "trajectory": [{"response": "5", "tool_calls": [], "tool_results": []}], "tool_calls": 0,
          "reward": 1.0, "components": {"math": 1.0}, "unscorable": None, "stop_reason": "answered",
          "response_tokens": 4, "seconds": 0.5, "tool_seconds": 0.0, "reward_seconds": 0.01, "validation": False}
FIRST_TYPED = {"rollout_id": "r-typed", "prompt_id": "q8", "source": "train.jsonl:8", "step": 3, "validation": True,
               "policy_version": 3, "messages": [], "trajectory": [
                   {"response": "", "tool_calls": [{"id": "c0", "name": "add", "arguments": {"a": 1, "b": 2}}],
                    "tool_results": [{"id": "c0", "name": "add", "content": "3", "is_error": False}]},
                   {"response": "3", "tool_calls": [], "tool_results": []}],
               "tool_calls": 1, "user_turns": 0, "reward": None, "components": {}, "passed": {},
               "unscorable": "tools: calculator: HTTP 503 after 3 retries", "stop_reason": "tool_infra_error",
               "response_tokens": 9, "started_at": 1.0, "finished_at": 2.0, "seconds": 1.0, "model_seconds": 0.5,
               "tool_seconds": 0.4, "reward_seconds": 0.0}
# The layout written since the turns were named as the rewards' sample names them (``trajectories``).
TODAY = {(k if k != "trajectory" else "trajectories"): v for k, v in FIRST_TYPED.items()}


def test_a_line_the_episode_writes_today_reads_back_typed(tmp_path):
    written = _episode(tmp_path, "85")["record"]  # the episode appended its line to the run's rollouts.jsonl
    (record,) = read_records(RunDir(tmp_path).rollouts)
    assert isinstance(record, RolloutRecord) and record.rollout_id == written["rollout_id"]
    assert record.stop_reason is StopReason.ANSWERED and record.stop_reason == written["stop_reason"]
    first, last = record.trajectories
    assert isinstance(first, Turn) and isinstance(first.tool_calls[0], Call)
    assert [c.name for c in first.tool_calls] == [c["name"] for c in written["trajectories"][0]["tool_calls"]]
    results = {r.id: r for r in first.tool_results}  # the call it could parse was answered, the other fed back
    assert all(isinstance(r, CallResult) for r in results.values()) and results["c0"].content == "85"
    assert results["malformed0"].is_error and "malformed tool call" in results["malformed0"].content
    assert last.response == "The answer is 85." and last.tool_calls == []
    for key in KEYS:  # every other field as written
        if key not in ("trajectories", "stop_reason"):
            assert getattr(record, key) == written[key], key
    assert [{k: msgspec.to_builtins(getattr(turn, k)) for k in line} for turn, line in  # all the line held
            zip(record.trajectories, written["trajectories"], strict=True)] == written["trajectories"]


def test_older_layouts_read_with_the_defaults_of_what_they_lack(tmp_path):
    path = tmp_path / "rollouts.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in (OLDEST, FIRST_TYPED)))
    oldest, typed = read_records(path)
    assert (oldest.rollout_id, oldest.step, oldest.validation, oldest.reward) == ("r-old", 2, False, 1.0)
    assert oldest.group is None and oldest.drawn_step is None and oldest.turn_rewards == [] and oldest.passed == {}
    assert oldest.policy_version is None and oldest.reward_version is None and oldest.trajectories[0].response == "5"
    assert typed.stop_reason is StopReason.TOOL_INFRA_ERROR and typed.reward is None
    assert typed.unscorable.startswith("tools: calculator") and typed.trajectories[0].tool_calls[0].arguments == {"a": 1, "b": 2}
    assert typed.turn_unscorable == {} and typed.turn_advantages is None


def test_what_is_not_a_record_is_skipped_and_unknown_values_kept(tmp_path):
    path = tmp_path / "rollouts.jsonl"
    newer = {**FIRST_TYPED, "rollout_id": "r-new", "stop_reason": "context_full", "a_key_from_later": 1,
             "trajectories": [{"response": "x", "tool_calls": None, "a_turn_key_from_later": 2}]}
    path.write_bytes(b"[1, 2]\n\n" + json.dumps(newer).encode() + b"\n" + b'{"rollout_id": "r-cut", "step"')
    records, offset = read_new(path)
    assert [r.rollout_id for r in records] == ["r-new"] and offset == path.read_bytes().rindex(b"\n") + 1
    (record,) = records
    assert record.stop_reason == "context_full" and isinstance(record.stop_reason, StopReason)
    assert record.trajectories[0].tool_calls == [] and not hasattr(record, "a_key_from_later")
    assert decode(b'{"rollout_id": "r-cut", "step"') is None and decode(b"") is None


def test_filing_keys_read_whatever_the_order_or_spacing():
    pretty = json.dumps({"rollout_id": "r", "messages": [{"content": '"step": 9, "validation": true'}],
                         "validation": True, "step": 4, "group": "g1"})
    compact = json.dumps({"group": "g1", "step": 4, "validation": True, "drawn_step": 3}, separators=(",", ":"))
    assert (line_key(pretty).step, line_key(pretty).validation, line_key(pretty).group) == (4, True, "g1")
    assert line_key(pretty).drawn_step is msgspec.UNSET and line_key(compact).drawn_step == 3
    assert line_key(b"not json") is None and line_key(b'"a string"') is None


def test_placement_finds_groups_placed_by_an_earlier_attempt_whatever_the_spacing(tmp_path):
    """A group already in rollouts.jsonl (written compactly) is not placed a second time when the generated
    and trained logs name it again; a new group is placed under the step that trained it, with its staleness."""
    run = RunDir(tmp_path)
    run.trained.parent.mkdir(parents=True, exist_ok=True)
    done = {**FIRST_TYPED, "rollout_id": "a0", "group": "gA", "step": 2, "drawn_step": 1, "validation": False}
    run.rollouts.write_text(json.dumps(done, separators=(",", ":")) + "\n")
    generated = [{**FIRST_TYPED, "rollout_id": f"{g}{i}", "group": g, "step": 1, "policy_version": 1,
                  "validation": False} for g in ("gA", "gB") for i in range(2)]
    run.generated.write_text("".join(json.dumps(r) + "\n" for r in generated))
    run.trained.write_text(json.dumps({"step": 3, "groups": ["gA", "gB"]}) + "\n")
    Placer(tmp_path, group_size=2).place()
    placed = list(read_records(run.rollouts))
    assert [r.rollout_id for r in placed] == ["a0", "gB0", "gB1"]
    assert [(r.step, r.drawn_step, r.staleness) for r in placed[1:]] == [(3, 1, 1), (3, 1, 1)]


def test_a_record_read_back_writes_the_line_it_was_read_from(tmp_path):
    """to_dict of a decoded record gives the line again (turns as the dicts they were), so a reader that
    rewrites records (rescoring, placement) keeps the file's layout."""
    for line in (TODAY, {**TODAY, "trajectories": [{"response": "r", "tool_calls": [], "tool_results": [],
                                                              "reasoning": "think", "user_reply": "again"}]}):
        record = decode(json.dumps(line))
        assert {k: v for k, v in record.to_dict().items() if k in line} == line
        assert json.loads(json.dumps(record.to_dict()))["stop_reason"] == line["stop_reason"]


def test_a_turn_of_another_shape_keeps_the_rest_of_the_record():
    """A tool result that is a bare string, a turn that is not an object: left out; the record still counts."""
    odd = {**FIRST_TYPED, "trajectory": [{"response": "a", "tool_calls": [{"id": "c0", "name": "add"}],
                                          "tool_results": ["42"]}, "junk", {"response": "b"}]}
    record = decode(json.dumps(odd))
    assert record is not None and record.rollout_id == "r-typed" and record.reward is None
    assert [t.response for t in record.trajectories] == ["a", "b"] and record.trajectories[0].tool_results == []
    assert record.trajectories[0].tool_calls[0].name == "add"


def test_an_older_line_is_written_back_under_todays_name_with_the_same_turns():
    """An old-layout line (turns under ``trajectory``) reads as the record of today's line; written back, its
    turns are under ``trajectories`` (the name a reward's sample uses) and nothing else changed."""
    old, today = decode(json.dumps(FIRST_TYPED)), decode(json.dumps(TODAY))
    assert old == today and old.trajectories[0].tool_calls[0] == Call(id="c0", name="add", arguments={"a": 1, "b": 2})
    assert old.to_dict() == today.to_dict() and "trajectory" not in old.to_dict()
    assert {k: v for k, v in old.to_dict().items() if k in TODAY} == TODAY
    assert RolloutRecord.from_dict(FIRST_TYPED) == today  # the dict reader takes the old name too


def test_every_writer_holds_typed_turns_whatever_it_hands_over():
    """A record built from the step dicts a reward saw (the episode's, the synthetic writer's) holds Turn and
    Call, and a StopReason for the value given; the line it writes is those dicts again."""
    steps = [{"response": "", "tool_calls": [{"id": "c0", "name": "add", "arguments": {"a": 1, "b": 2}}],
              "tool_results": [{"id": "c0", "name": "add", "content": "3", "is_error": False}], "reasoning": "sum"},
             {"response": "3", "tool_calls": [], "tool_results": []}]
    record = RolloutRecord(rollout_id="r", trajectories=steps, stop_reason="turn_budget")
    assert all(isinstance(t, Turn) for t in record.trajectories) and record.trajectories[0].reasoning == "sum"
    assert isinstance(record.trajectories[0].tool_results[0], CallResult)
    assert record.stop_reason is StopReason.TURN_BUDGET
    assert record.to_dict()["trajectories"] == steps and json.loads(json.dumps(record.to_dict()))["stop_reason"] == "turn_budget"
