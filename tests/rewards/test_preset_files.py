"""Preset files as `agentrl reward new --preset NAME > reward.py` writes them, loaded back with load_reward(path)."""

import pytest
from reward_rows import item, sample

from agentrl.rewards import PRESETS, RewardConfigError, load_reward, preset_source
from agentrl.plugins import PluginError

ROWS = {
    "math": (sample("so \\boxed{\\frac{1}{2}}"), item("q", expected_answer="0.5"), 1.0),
    "tool_use": (sample("ok", trajectories=[{"response": "", "tool_calls": [{"id": "c", "name": "add", "arguments": {}}]}]),
                 item("q", expected_tools=["add"]), 1.0),
    "custom": (sample("blah\nParis."), item("q", expected_answer="paris"), 1.0),
    "llm_judge": (sample("Paris"), item("q"), None),  # no rubric: not applicable, no network needed
    "coding": (sample("x"), item("q"), None),
}


def sandbox_or_skip():
    try:
        from agentrl.sandbox import get_sandbox
    except ImportError:
        pytest.skip("agentrl.sandbox is not built yet")
    return get_sandbox()


@pytest.mark.parametrize("name", PRESETS)
def test_preset_source_is_a_grade_file(name):
    text = preset_source(name)
    assert "def grade(sample, item" in text and text.startswith('"""')


def test_unknown_preset_lists_the_known_ones():
    with pytest.raises(PluginError, match="Known presets: coding, custom, llm_judge, math, tool_use"):
        preset_source("maths")


@pytest.mark.parametrize("name", PRESETS)
def test_written_preset_runs_unchanged(tmp_path, name):
    if name == "custom":
        sandbox_or_skip()
    path = tmp_path / "reward.py"
    path.write_text(preset_source(name))
    s, i, expected = ROWS[name]
    assert load_reward(str(path))(s, i) == expected


def test_unmodified_preset_file_runs_in_process_but_edited_one_in_the_sandbox(tmp_path):
    same, edited = tmp_path / "same.py", tmp_path / "edited.py"
    same.write_text(preset_source("math"))
    edited.write_text(preset_source("math") + "\n# my change\n")
    assert load_reward(str(same)).sandboxed is False
    assert load_reward(str(edited)).sandboxed is True


def test_edited_math_preset_runs_in_the_sandbox(tmp_path):
    sandbox_or_skip()
    path = tmp_path / "reward.py"
    path.write_text(preset_source("math").replace("TOLERANCE = 1e-6", "TOLERANCE = 1e-3"))
    reward = load_reward(str(path))
    assert reward.sandboxed
    assert reward(sample("\\boxed{x^2+2x+1}"), item("q", expected_answer="(x+1)^2")) == 1.0
    assert reward(sample("Answer: 42"), item("q", expected_answer="41")) == 0.0


USER_FILE = '''
ENV = ["REWARD_TOKEN"]

def grade(sample, item):
    if getenv("OTHER_SECRET") is not None:
        return -1.0
    return 1.0 if getenv("REWARD_TOKEN") == "t0k" else 0.0
'''


def test_user_file_sees_only_declared_env(tmp_path, monkeypatch):
    sandbox_or_skip()
    monkeypatch.setenv("REWARD_TOKEN", "t0k")
    monkeypatch.setenv("OTHER_SECRET", "leak")
    path = tmp_path / "mine.py"
    path.write_text(USER_FILE)
    assert load_reward(str(path))(sample("a"), item("q")) == 1.0


def test_user_file_errors_are_unscorable_with_file_and_line(tmp_path):
    sandbox_or_skip()
    from agentrl.rewards import RewardSet

    path = tmp_path / "bad.py"
    path.write_text("def grade(sample, item):\n    return item['metadata']['nope']\n")
    result = RewardSet([{"name": str(path)}]).score(sample("a"), item("q"))
    assert result.score is None and result.unscorable.startswith("bad: ")


@pytest.mark.parametrize("text, message", [
    ("x = 1\n", "defines no top-level `def grade"),
    ("def grade(sample, item)\n    return 1\n", "syntax error"),
    ("ENV = names()\ndef grade(sample, item):\n    return 1\n", "must be a literal"),
])
def test_bad_user_file_fails_at_load(tmp_path, text, message):
    path = tmp_path / "r.py"
    path.write_text(text)
    with pytest.raises(RewardConfigError, match=message):
        load_reward(str(path))


def test_options_cannot_reach_a_sandboxed_file(tmp_path):
    path = tmp_path / "r.py"
    path.write_text("def grade(sample, item):\n    return 1.0\n")
    with pytest.raises(RewardConfigError, match="Edit the constants"):
        load_reward(str(path), tolerance=0.1)


def test_declared_read_paths_are_checked_at_load_and_made_absolute(tmp_path, monkeypatch):
    """The reward runs in verl's workers, whose working directory is not the user's: a relative path is
    resolved where the config was loaded, and a missing one is a config error now, not a PermissionError
    at step 1."""
    sandbox_or_skip()
    refs = tmp_path / "refs"
    refs.mkdir()
    (refs / "answer.txt").write_text("42")
    tmp_path.chmod(0o755)
    refs.chmod(0o755)
    path = tmp_path / "r.py"
    path.write_text("def grade(sample, item):\n    return float(open(item.metadata.ref).read())\n")
    monkeypatch.chdir(tmp_path)
    reward = load_reward(str(path), read_paths=["refs"])
    assert reward.fn.read_paths == (str(refs),)
    monkeypatch.chdir("/")
    assert reward(sample("x"), item("q", ref=str(refs / "answer.txt"))) == 42.0
    with pytest.raises(RewardConfigError, match=r"read_paths entry 'nope' does not exist .*fix the path"):
        load_reward(str(path), read_paths=["nope"])
    with pytest.raises(RewardConfigError, match="read_paths must be a list"):
        load_reward(str(path), read_paths="refs")


@pytest.mark.parametrize("name, runs_model_code", [("coding", True), ("math", False), ("tool_use", False)])
def test_rewards_that_run_model_code_say_so(tmp_path, name, runs_model_code):
    """`agentrl train` checks the sandbox before a run whose rewards execute model-written code."""
    assert load_reward(name).runs_model_code is runs_model_code
    copy = tmp_path / "reward.py"
    copy.write_text(preset_source(name))  # byte-identical copy: the preset itself, declarations included
    assert load_reward(str(copy)).runs_model_code is runs_model_code
