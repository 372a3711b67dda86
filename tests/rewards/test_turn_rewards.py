"""Per-turn results from rewards: the shape, the reward set's mix, unscorable per turn, tool_use's per-turn form."""

import pytest
from reward_rows import item, sample

from agentrl.rewards import RewardSet, Unscorable, load_reward
from agentrl.rewards.turns import TurnScores, TurnUnscorable


def steps(*results):
    """One assistant turn per entry: a list of tool results (dicts with is_error) or None for a plain answer."""
    out = []
    for n, res in enumerate(results):
        step = {"response": f"turn {n}", "tool_calls": [], "tool_results": []}
        for m, bad in enumerate(res or []):
            step["tool_calls"].append({"id": f"c{n}{m}", "name": "add", "arguments": {}})
            step["tool_results"].append({"id": f"c{n}{m}", "name": "add", "content": "x", "is_error": bad})
        out.append(step)
    return sample("done", trajectories=out)


def returns(value):
    def grade(sample, item):
        return value

    grade.__name__ = "per_turn"
    return grade


def test_a_per_turn_dict_becomes_turn_scores():
    got = load_reward(returns({"episode": 1, "turns": [0.5, None, {"unscorable": "judge down"}]}))(
        steps(None, None, None), item("q"))
    assert got == TurnScores(1.0, (0.5, None, TurnUnscorable("per_turn: turn 3: judge down")))


@pytest.mark.parametrize("value, cause", [
    ({"episode": 1.0, "turns": [0.5]}, "returned 1 turn scores for 2 assistant turns"),
    ({"episode": 1.0}, "a per-turn result is"),
    ({"episode": 1.0, "turns": [0.5, None], "extra": 1}, "a per-turn result is"),
    ({"episode": 1.0, "turns": "0.5"}, "'turns' is str"),
    ({"episode": 1.0, "turns": [float("nan"), None]}, "turns[0] is nan"),
    ({"episode": "1", "turns": [None, None]}, "'episode' is str"),
    ({"episode": 1.0, "turns": [{"why": "x"}, None]}, "the only dict is"),
])
def test_malformed_per_turn_results_are_unscorable_with_the_reason(value, cause):
    with pytest.raises(Unscorable) as info:
        load_reward(returns(value))(steps(None, None), item("q"))
    assert cause in str(info.value)


def test_reward_set_mixes_turns_with_the_episode_weights():
    rs = RewardSet([{"name": returns(1.0), "weight": 1.0, "label": "final"},
                    {"name": returns({"episode": 0.4, "turns": [-0.3, None]}), "weight": 0.5, "label": "tools"}])
    result = rs.score(steps([True], None), item("q"))
    assert result.score == pytest.approx((1.0 + 0.5 * 0.4) / 1.5)
    assert result.components == {"final": 1.0, "tools": 0.4}
    assert result.turns == pytest.approx([0.5 * -0.3 / 1.5, None]) and result.turns[1] is None
    assert result.turn_unscorable == {}


def test_turn_unscorable_is_kept_per_turn_and_the_episode_still_scores():
    rs = RewardSet([{"name": returns({"episode": 1.0, "turns": [None, {"unscorable": "timeout"}]})}])
    result = rs.score(steps(None, None), item("q"))
    assert result.score == 1.0
    assert result.turn_unscorable == {1: "per_turn: turn 2: timeout"}
    assert result.turns == [None, None]


def test_turns_only_is_unscorable_as_an_episode():
    result = RewardSet([{"name": returns({"episode": None, "turns": [0.1]})}]).score(steps(None), item("q"))
    assert result.score is None and "scored turns only" in result.unscorable


def test_float_rewards_have_no_turns():
    result = RewardSet([{"name": returns(0.5)}]).score(steps(None), item("q"))
    assert result.turns is None and result.turn_unscorable == {}


def test_tool_use_per_turn_penalises_failed_and_malformed_calls():
    made = steps([False], [True, True], None)
    made["trajectories"][1]["tool_results"][1]["name"] = "(unparsed)"  # the episode's record of a malformed call
    want = item("q", expected_tools=["add"])
    plain = load_reward("tool_use")(made, want)
    assert plain == pytest.approx(0.8)  # two calls over a budget of one
    per_turn = load_reward("tool_use", per_turn=True)(made, want)
    assert per_turn.episode == pytest.approx(plain)
    assert per_turn.turns == pytest.approx((None, -0.4, None)) and per_turn.turns[0] is None
    scaled = load_reward("tool_use", per_turn=True, failed_call_penalty=0.05)(made, want)
    assert scaled.turns[1] == pytest.approx(-0.1)
