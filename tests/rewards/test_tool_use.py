"""The tool_use preset: set, order, arguments, budget."""

import pytest
from reward_rows import item, sample

from agentrl.rewards import RewardSet, load_reward


def calls(*specs, errors=()):
    """One step per call: specs are (name, arguments)."""
    steps = []
    for n, (name, args) in enumerate(specs):
        steps.append({"response": "", "tool_calls": [{"id": f"c{n}", "name": name, "arguments": args}],
                      "tool_results": [{"id": f"c{n}", "name": name, "content": "ok", "is_error": n in errors}]})
    return sample("done", trajectories=steps)


@pytest.fixture(scope="module")
def reward():
    return load_reward("tool_use")


CASES = [
    # expected, extra metadata, calls made, score
    (["search", "add"], {}, calls(("search", {"q": "x"}), ("add", {"a": 1})), 1.0),
    (["search", "add"], {}, calls(("add", {}), ("search", {})), 1.0),  # a set: order ignored
    (["search", "add"], {"ordered": True}, calls(("add", {}), ("search", {})), 0.5),
    (["search", "add"], {"ordered": True}, calls(("search", {}), ("add", {})), 1.0),
    (["search", "add"], {}, calls(("search", {})), 0.5),
    (["search"], {}, calls(), 0.0),
    (["add"], {}, calls(("calc.add", {"a": 2})), 1.0),  # namespaced server.tool names
    (["add"], {}, calls(("calc__add", {"a": 2})), 1.0),
    ([{"name": "add", "arguments": {"a": 2}}], {}, calls(("add", {"a": 2, "b": 3})), 1.0),  # subset of arguments
    ([{"name": "add", "arguments": {"a": 2}}], {}, calls(("add", {"a": 2.0})), 1.0),
    ([{"name": "add", "arguments": {"a": 2}}], {}, calls(("add", '{"a": 2}')), 1.0),  # JSON-string arguments
    ([{"name": "add", "arguments": {"a": 2}}], {}, calls(("add", {"a": 3})), 0.0),
    ([{"name": "add", "arguments": {"a": 2}}], {}, calls(("add", {"b": 2})), 0.0),
    (["add"], {}, calls(("add", {}), errors=(0,)), 0.0),  # a call that errored is not a match
    (["add"], {}, calls(("add", {}), ("add", {}), ("add", {})), 0.8),  # two over budget: -0.1 each
    (["add"], {"max_tool_calls": 3}, calls(("add", {}), ("add", {}), ("add", {})), 1.0),
    ([], {}, calls(), 1.0),  # "call nothing"
    ([], {}, calls(("add", {})), 0.9),
    (["add"], {}, calls(*[("noise", {})] * 30), 0.0),  # spamming calls cannot go below 0
    (["add", "add"], {}, calls(("add", {})), 0.5),  # each expected call needs its own call
]


@pytest.mark.parametrize("expected, extra, made, score", CASES)
def test_tool_use(reward, expected, extra, made, score):
    assert reward(made, item("q", expected_tools=expected, **extra)) == pytest.approx(score)


def test_not_applicable_without_expected_tools(reward):
    assert reward(calls(("add", {})), item("q")) is None


def test_malformed_expected_tools_is_unscorable():
    result = RewardSet(["tool_use"]).score(calls(), item("q", expected_tools=[42]))
    assert result.score is None and "expected_tools entries must be" in result.unscorable


def test_combined_with_a_judge_rubric():
    from judge_server import JudgeServer

    with JudgeServer(["Score: 5/10"]) as server:
        reward = load_reward("tool_use", judge_model="openai/judge", judge_api_base=server.api_base, backoff=0.01)
        made = calls(("add", {}))
        assert reward(made, item("q", expected_tools=["add"], rubric="uses add")) == pytest.approx(0.75)
        assert reward(made, item("q", expected_tools=["add"])) == 1.0  # no rubric: tool check only


def test_judge_sees_the_tool_calls():
    from judge_server import JudgeServer

    with JudgeServer(["Score: 10/10"]) as server:
        reward = load_reward("tool_use", judge_model="openai/judge", judge_api_base=server.api_base, backoff=0.01)
        reward(calls(("calc.add", {"a": 2, "b": 3})), item("q", expected_tools=["add"], rubric="adds"))
    prompt = server.requests[0]["body"]["messages"][0]["content"]
    assert '"calc.add"' in prompt and '"a": 2' in prompt
