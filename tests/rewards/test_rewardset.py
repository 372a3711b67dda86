"""load_reward and RewardSet: None is left out, failures are unscorable with a cause, config fails early."""

import asyncio
import time

import pytest
from reward_rows import item, sample

from agentrl.plugins import PluginError
from agentrl.rewards import RewardConfigError, RewardSet, ScoreResult, Unscorable, load_reward


def always(value):
    def grade(sample, item):
        return value

    grade.__name__ = f"always_{str(value)[:10]}"
    return grade


def boom(sample, item):
    raise KeyError("expected_answer")


def slow(sample, item):
    time.sleep(5)
    return 1.0


async def async_half(sample, item):
    await asyncio.sleep(0)
    return 0.5


def attr_and_key(sample, item):
    assert sample.final_answer == sample["final_answer"]
    assert item.metadata.x == item["metadata"]["x"]
    assert sample.trajectories[0].response == sample.final_answer
    return 1.0


def test_plain_dicts_with_attribute_and_key_access():
    assert load_reward(attr_and_key)(sample("hi", trajectories=[{"response": "hi"}]), item("q", x=1)) == 1.0


def test_async_grade_works_sync_and_async():
    reward = load_reward(async_half)
    assert reward(sample("a"), item("q")) == 0.5
    assert asyncio.run(reward.acall(sample("a"), item("q"))) == 0.5


def test_sync_score_inside_a_running_loop():
    async def main():
        return RewardSet([{"name": async_half}]).score(sample("a"), item("q"))

    assert asyncio.run(main()).score == 0.5


@pytest.mark.parametrize("bad, cause", [
    (float("nan"), "nan"), (float("inf"), "inf"), (2e6, "within"), ("1.0", "str"), ([1], "list"), (True, "bool"),
])
def test_invalid_values_are_unscorable(bad, cause):
    with pytest.raises(Unscorable, match=cause):
        load_reward(always(bad))(sample("a"), item("q"))


def test_weighted_mean_leaves_out_not_applicable():
    rs = RewardSet([{"name": always(1.0), "weight": 3}, {"name": always(None), "weight": 5, "label": "n"},
                    {"name": always(0.0), "weight": 1, "label": "z"}])
    result = rs.score(sample("a"), item("q"))
    assert result == ScoreResult(score=0.75, components={"always_1.0": 1.0, "n": None, "z": 0.0}, applicable_weight=4.0)


def test_exception_makes_the_trajectory_unscorable_with_a_cause():
    result = RewardSet([{"name": always(1.0)}, {"name": boom}]).score(sample("a"), item("q"))
    assert result.score is None
    assert result.unscorable.startswith("boom: KeyError: 'expected_answer' (at test_rewardset.py:")
    assert result.components == {"always_1.0": 1.0, "boom": None}


def test_timeout_is_unscorable():
    result = RewardSet([{"name": slow, "timeout": 0.2}]).score(sample("a"), item("q"))
    assert result.score is None and result.unscorable == "slow: timeout after 0.2s"


def test_timeout_off_the_main_thread():
    import threading

    box = {}
    t = threading.Thread(target=lambda: box.update(r=RewardSet([{"name": slow, "timeout": 0.2}]).score(sample("a"), item("q"))))
    t.start()
    t.join()
    assert box["r"].unscorable == "slow: timeout after 0.2s"


def test_weight_zero_is_logged_only():
    result = RewardSet([{"name": always(1.0)}, {"name": always(0.0), "weight": 0, "label": "metric"},
                        {"name": boom, "weight": 0}]).score(sample("a"), item("q"))
    assert result.score == 1.0 and result.components["metric"] == 0.0
    assert result.unscorable is None and "boom" in result.errors


def test_nothing_applies_is_unscorable():
    result = RewardSet([{"name": always(None)}]).score(sample("a"), item("q"))
    assert result.score is None and "all returned None" in result.unscorable


def test_unknown_name_fails_at_config_time():
    with pytest.raises(PluginError, match=r"unknown reward 'maths' \(in rewards\[1\]\)\. Did you mean 'math'\?"):
        RewardSet.from_config([{"name": "math"}, {"name": "maths"}])


@pytest.mark.parametrize("config, message", [
    ([], "non-empty list"),
    ([{"weight": 1}], "needs a \"name\""),
    ([{"name": "math", "weight": -1}], "weight must be"),
    ([{"name": "math", "weight": "high"}], "weight must be"),
    ([{"name": "math", "weight": float("nan")}], r"rewards\[0\]: weight must be a finite number >= 0 \(0 = log only\), got nan"),
    ([{"name": "math", "weight": float("inf")}], "weight must be a finite number >= 0 .*, got inf"),
    ([{"name": "math", "weight": True}], "weight must be a finite number >= 0 .*, got True"),
    ([{"name": "math"}, {"name": "math"}], "labelled 'math'"),
    ([{"name": "math", "tolerence": 0.1}], "does not take option\\(s\\) \\['tolerence'\\]"),
    ([{"name": "missing.py"}], "not found"),
])
def test_bad_config_fails_early(config, message):
    with pytest.raises(RewardConfigError, match=message):
        RewardSet.from_config(config)


def test_only_declared_env_reaches_an_in_process_reward(monkeypatch):
    monkeypatch.setenv("MY_TOKEN", "t0k")
    monkeypatch.setenv("OTHER_SECRET", "nope")
    seen = {}

    def grade(sample, item, env):
        seen.update(env)
        return 1.0

    load_reward(grade, env=["MY_TOKEN"])(sample("a"), item("q"))
    assert seen == {"MY_TOKEN": "t0k"}


def test_provenance_names_origin_and_version():
    (entry,) = RewardSet([{"name": "math"}]).describe()
    assert entry["origin"].startswith("plugin ") and len(entry["version"]) == 12 and entry["sandboxed"] is False


def test_plugin_registered_reward_is_found(monkeypatch):
    from agentrl import plugins
    from agentrl.hookspecs import hookimpl
    from agentrl.rewards import builtin

    class Mine:
        @hookimpl
        def register_rewards(self, register):
            register("length", lambda sample, item: float(len(sample["final_answer"])))

    plugins.reset_plugin_manager(plugins.new_plugin_manager(builtin, Mine()))
    assert load_reward("length")(sample("abc"), item("q")) == 3.0


def test_rewardset_pickles_for_ray_workers():
    import pickle

    rs = pickle.loads(pickle.dumps(RewardSet([{"name": "math"}, {"name": "tool_use", "weight": 0}])))
    assert rs.score(sample("Answer: 7"), item("q", expected_answer="7")).score == 1.0


def test_sandboxed_file_pickles(tmp_path):
    import pickle

    path = tmp_path / "r.py"
    path.write_text("def grade(sample, item):\n    return 1.0\n")
    reward = pickle.loads(pickle.dumps(load_reward(str(path))))
    assert reward.sandboxed and reward.origin == str(path.resolve())


def test_grade_calling_exit_is_unscorable():
    import sys

    def quits(sample, item):
        sys.exit(0)

    result = RewardSet([{"name": quits}]).score(sample("a"), item("q"))
    assert result.score is None and result.unscorable.startswith("quits: SystemExit")
