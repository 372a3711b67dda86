"""The coding preset: code extraction, and tests run in agentrl.sandbox with verdicts decided outside it."""

import pytest
from reward_rows import item, sample

from agentrl.rewards import RewardSet, load_reward
from agentrl.rewards.codecheck import extract_code, normalise_tests

EXTRACT = [
    ("Here:\n```python\ndef f():\n    return 1\n```\nDone.", "def f():\n    return 1\n"),
    ("```py\nx = 1\n```\nthen\n```python\nx = 2\n```", "x = 2\n"),
    ("```bash\nls\n```\n```python\nx = 3\n```\n```text\noutput\n```", "x = 3\n"),
    ("```\ny = 4\n```", "y = 4\n"),
    ("def g():\n    return 5", "def g():\n    return 5"),
    ("", ""),
]


@pytest.mark.parametrize("text, code", EXTRACT)
def test_extract_code(text, code):
    assert extract_code(text) == code


def test_normalise_tests():
    assert normalise_tests(["assert f(1) == 2", {"stdin": "1", "expected_stdout": "2\n"}]) == [
        {"type": "assert", "code": "assert f(1) == 2"}, {"type": "stdio", "stdin": "1", "expected_stdout": "2\n"}]
    with pytest.raises(ValueError, match=r"metadata.tests\[0\]"):
        normalise_tests([{"foo": 1}])


def test_no_tests_is_not_applicable():
    assert load_reward("coding")(sample("def f(): pass"), item("q")) is None


def sandbox_or_skip():
    try:
        from agentrl.sandbox import get_sandbox
    except ImportError:
        pytest.skip("agentrl.sandbox is not built yet")
    return get_sandbox()


TESTS = [
    {"type": "assert", "code": "assert add(2, 3) == 5"},
    {"type": "assert", "code": "assert add(-1, 1) == 0"},
    {"type": "stdio", "stdin": "2 3\n", "expected_stdout": "5\n"},
    {"type": "stdio", "stdin": "10 20\n", "expected_stdout": "30\n"},
]
GOOD = """```python
import sys

def add(a, b):
    return a + b

if __name__ == "__main__":
    a, b = map(int, sys.stdin.read().split())
    print(add(a, b))
```"""

CASES = [
    ("correct", GOOD, 1.0),
    ("assert half right", "def add(a, b):\n    return a + b\n", 0.5),  # no stdin handling
    ("wrong", "def add(a, b):\n    return a - b\n", 0.0),
    ("prints PASSED", "print('PASSED')\nprint('All tests passed')", 0.0),
    ("exits early", "import sys\nsys.exit(0)\ndef add(a, b):\n    return 0\n", 0.0),
    ("os._exit early", "import os\nos._exit(0)\n", 0.0),
    ("raises", "raise SystemExit('ok')", 0.0),
    ("empty", "", 0.0),
    ("colon", ":", 0.0),
    ("says correct", "correct", 0.0),
    ("huge output", "print('5\\n' * 2_000_000)", 0.0),
    ("hangs", "while True:\n    pass\n", 0.0),
]


@pytest.mark.parametrize("label, answer, score", CASES, ids=[c[0] for c in CASES])
def test_coding_in_sandbox(label, answer, score):
    sandbox_or_skip()
    reward = load_reward("coding", timeout_per_test=2.0, timeout=120)
    assert reward(sample(answer), item("write add", tests=TESTS)) == pytest.approx(score)


def test_sandbox_failure_is_unscorable(monkeypatch):
    sandbox_or_skip()
    from agentrl import sandbox

    class Broken:
        def run_tests(self, *a, **k):
            raise sandbox.SandboxError("isolation too weak", "weak_isolation")

    monkeypatch.setattr(sandbox, "get_sandbox", lambda: Broken())
    result = RewardSet(["coding"]).score(sample(GOOD), item("q", tests=TESTS))
    assert result.score is None and result.unscorable == "coding: sandbox failed: weak_isolation"


def _calls_running(pool) -> bool:
    """Whether any worker's template has a call process: the children of its templates (the children of its
    factory, the child running as root, or its own children under a slot uid), as tests/sandbox/conftest.py's
    calls_of reads /proc."""
    def children(pid: int) -> list[int]:
        try:
            return [int(p) for p in open(f"/proc/{pid}/task/{pid}/children").read().split()]
        except OSError:
            return []

    def root(pid: int) -> bool:
        try:
            return next(x for x in open(f"/proc/{pid}/status") if x.startswith("Uid:")).split()[1] == "0"
        except (OSError, StopIteration):
            return False
    templates = [t for w in pool.workers if w.alive() for c in children(w.proc.pid)
                 for t in (children(c) if root(c) else [c])]
    return any(children(t) for t in templates)


def test_a_worker_that_dies_mid_test_makes_correct_code_unscorable_not_zero():
    """Real, not mocked: the worker running the tests is killed from outside; correct code must not score 0."""
    import os
    import signal
    import threading
    import time

    sb = sandbox_or_skip()
    slow = "```python\nimport time\ntime.sleep(3)\n\ndef add(a, b):\n    return a + b\n```"
    tests = [{"type": "assert", "code": "assert add(2, 3) == 5"}]
    out = {}
    t = threading.Thread(target=lambda: out.update(r=RewardSet(["coding"]).score(sample(slow), item("q", tests=tests))))
    t.start()
    pool = sb._pool("code")
    deadline = time.monotonic() + 60
    while not _calls_running(pool):  # a template has forked the call: the tests are running, not queued
        assert time.monotonic() < deadline, "the coding reward's call never started in the sandbox"
        time.sleep(0.02)
    killed = [w.proc.pid for w in pool.workers if w.alive()]
    for pid in killed:
        os.kill(pid, signal.SIGKILL)
    t.join()
    assert out["r"].score is None and out["r"].unscorable.startswith("coding: sandbox failed"), out["r"]

    def gone(pid: int) -> bool:  # reaped, or a zombie: a call sent now cannot reach it
        try:
            return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
        except OSError:
            return True
    while not all(gone(pid) for pid in killed):  # a worker killed but not yet dead would fail the next call
        assert time.monotonic() < deadline + 60, f"the killed workers {killed} never died"
        time.sleep(0.02)
    assert RewardSet(["coding"]).score(sample(GOOD.replace("```python", "```python\n")),
                                       item("q", tests=tests)).score == 1.0  # a new worker took over
