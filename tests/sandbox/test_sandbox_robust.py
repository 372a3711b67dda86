"""The trusted side survives bad inputs and dead workers, reports isolation honestly, and is thread/async safe."""

import asyncio
import os
import signal
import threading

import pytest

from agentrl.sandbox import IsolationReport, Sandbox, SandboxError, get_sandbox
from agentrl.sandbox.results import Check

from .conftest import NORMAL_GRADER, assert_still_works, calls_of, gone, templates_of_zygote, wait_until


def nested(depth: int):
    x: object = "leaf"
    for _ in range(depth):
        x = [x]
    return x


@pytest.mark.parametrize("depth", [50, 2000, 200000])
def test_deeply_nested_input(sb, depth):
    src = "def grade(sample, item):\n    return 1.0\n"
    try:
        assert sb.run_grader(src, "deep.py", {"final_answer": "x", "blob": nested(depth)}, {}) == 1.0
    except SandboxError as e:
        assert e.cause == "bad_input", e
    assert_still_works(sb)


# (a NaN is not here: it reaches the grader, as test_sandbox_verdict_owner.py checks)
@pytest.mark.parametrize("bad", [{"x": object()}, {"x": b"bytes"}, {1j: 1}])
def test_non_json_input(sb, bad):
    with pytest.raises(SandboxError) as err:
        sb.run_grader(NORMAL_GRADER, "g.py", bad, {})
    assert err.value.cause == "bad_input"


def test_garbage_in_source_and_strings(sb):
    src = "def grade(sample, item):\n    return float(len(sample.final_answer))\n# \udcff \x00?"
    try:
        sb.run_grader(src, "g.py", {"final_answer": "\x00\udcff\u202e"}, {})
    except SandboxError:
        pass
    assert_still_works(sb)


def test_worker_killed_mid_call_is_an_error_not_zero(sb):
    pool = sb._pool("grader")
    pool.ensure_started()
    pids = [w.proc.pid for w in pool.workers if w.alive()]
    result = {}

    def call():
        try:
            result["value"] = sb.run_grader("def grade(sample, item):\n    while True:\n        pass\n", "slow.py",
                                            {}, {}, timeout=8.0)
        except SandboxError as e:
            result["error"] = e

    threads = [threading.Thread(target=call) for _ in range(len(pids))]
    for t in threads:
        t.start()
    wait_until(lambda: len(calls_of(pool)) >= len(pids), "every worker running its call")
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    for t in threads:
        t.join()
    assert "value" not in result
    assert result["error"].cause == "worker_died"
    assert_still_works(sb)


def _templates_of(pool) -> list[int]:
    pids = []
    for w in pool.workers:
        if w.alive():
            pids += templates_of_zygote(w.proc.pid)
    return pids


def test_template_killed_between_calls_is_replaced(sb):
    """A template killed from outside (OOM killer, an operator) costs no call: the next one starts a new one."""
    pool = sb._pool("grader")
    for _ in range(len(pool.workers)):
        assert sb.run_grader(NORMAL_GRADER, "g.py", {"final_answer": "4"}, {"answer": "4"}) == 1.0
    before = _templates_of(pool)
    assert before
    for pid in before:
        os.kill(pid, signal.SIGKILL)
    wait_until(lambda: gone(before), "the killed templates gone")
    for _ in range(2 * len(pool.workers)):
        assert sb.run_grader(NORMAL_GRADER, "g.py", {"final_answer": "4"}, {"answer": "4"}) == 1.0
    after = _templates_of(pool)
    assert after and not set(after) & set(before)


def test_template_killed_mid_call_is_an_error_not_zero(sb):
    pool = sb._pool("grader")
    pool.ensure_started()
    result = {}

    def call():
        try:
            result["value"] = sb.run_grader("def grade(sample, item):\n    while True:\n        pass\n", "slow.py",
                                            {}, {}, timeout=8.0)
        except SandboxError as e:
            result["error"] = e

    t = threading.Thread(target=call)
    t.start()
    wait_until(lambda: calls_of(pool), "the call running in its template")
    for pid in _templates_of(pool):  # the busy one among them dies with its child
        os.kill(pid, signal.SIGKILL)
    t.join()
    assert "value" not in result
    assert result["error"].cause == "killed", result["error"]
    assert_still_works(sb)


def test_isolation_report_is_measured(sb):
    report = sb.isolation_report()
    assert isinstance(report, IsolationReport)
    for key in ("net_ns", "mount_ns", "pid_ns", "uid_drop", "seccomp", "landlock_fs", "rlimits", "env_empty", "cgroups"):
        assert key in report.checks and report.checks[key].reason
    assert report.strong, report.summary()
    assert "probe:" in report.uid_drop.reason
    # the probe tried to read this process's working directory (where datasets and checkpoints live) and failed
    assert os.path.realpath(os.getcwd()) in report.landlock_fs.reason and "readable: none of" in report.landlock_fs.reason
    assert "sandbox isolation" in report.summary()


def test_weak_isolation_refuses_model_code_unless_opted_in(monkeypatch):
    box = Sandbox(size=1)
    try:
        box._report = IsolationReport({"net_ns": Check(False, "pretend"), "rlimits": Check(True, "")})
        monkeypatch.delenv("AGENTRL_SANDBOX_ALLOW_WEAK", raising=False)
        with pytest.raises(SandboxError) as err:
            box.run_tests("print(1)", [{"type": "stdio", "stdin": "", "expected_stdout": "1"}])
        assert err.value.cause == "weak_isolation" and "AGENTRL_SANDBOX_ALLOW_WEAK" in str(err.value)
        [v] = box.run_tests("print(1)", [{"type": "stdio", "stdin": "", "expected_stdout": "1"}], allow_weak=True)
        assert v.passed
        monkeypatch.setenv("AGENTRL_SANDBOX_ALLOW_WEAK", "1")
        [v] = box.run_tests("print(1)", [{"type": "stdio", "stdin": "", "expected_stdout": "1"}])
        assert v.passed
    finally:
        box.close()


def test_threads(sb):
    errors, values = [], []

    def work(i):
        try:
            for _ in range(5):
                values.append(sb.run_grader(NORMAL_GRADER, "t.py", {"final_answer": str(i)}, {"answer": str(i % 2)}))
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(values) == 30 and set(values) <= {0.0, 1.0}


def test_asyncio(sb):
    async def main():
        return await asyncio.gather(*(sb.arun_grader(NORMAL_GRADER, "a.py", {"final_answer": "4"}, {"answer": "4"})
                                      for _ in range(6)),
                                    sb.arun_tests("print(2)", [{"type": "stdio", "stdin": "", "expected_stdout": "2"}]))
    *values, verdicts = asyncio.run(main())
    assert values == [1.0] * 6 and verdicts[0].passed


def test_get_sandbox_is_process_wide():
    assert get_sandbox() is get_sandbox()


def test_sys_path_entries_holding_the_host_folders_stay_unreadable(monkeypatch, tmp_path):
    """An editable install may put a project root on sys.path; its datasets and checkpoints sit beside the
    code. A zygote grants no sys.path entry that holds the host's working directory or home."""
    from agentrl.sandbox.view import FileView

    project = tmp_path.resolve() / "proj"
    site = project / ".venv" / "lib" / "site-packages"
    site.mkdir(parents=True)
    monkeypatch.setenv("AGENTRL_SANDBOX_PRIVATE", os.pathsep.join([str(project / "runs"), "/home/someone"]))
    report = {}
    view = FileView(61099, False, lambda key, ok, reason: report.__setitem__(key, [ok, reason]))
    kept = view.library_paths([str(project), str(site), "/usr/lib/python3", "/home", "", "/"])
    assert kept == [str(site), "/usr/lib/python3"]
    assert report["sys_path_private"][1].endswith(f"{project}, /home, /")


def test_private_dirs_are_the_host_folders_but_not_the_sandbox_own(monkeypatch, tmp_path):
    import agentrl
    from agentrl.sandbox.pool import private_dirs

    monkeypatch.chdir(tmp_path)
    assert os.path.realpath(tmp_path) in private_dirs()
    monkeypatch.chdir(os.path.dirname(agentrl.__file__))  # the sandbox must read these; the probe must not count them
    assert os.path.realpath(os.path.dirname(agentrl.__file__)) not in private_dirs()


def test_live_sandboxes_never_share_slot_uids():
    """Each Sandbox (one per verl agent-loop worker) runs its calls under uids no other live one uses:
    RLIMIT_NPROC is counted per uid across the machine. The range is free again once a Sandbox closes or
    its process dies."""
    import subprocess
    import sys

    def uids(box: Sandbox) -> set[int]:
        return {w.uid for pool in box._pools.values() for w in pool.workers}

    a, b = Sandbox(size=1), Sandbox(size=1)
    try:
        assert a.run_grader(NORMAL_GRADER, "u.py", {"final_answer": "4"}, {"answer": "4"}) == 1.0
        assert b.run_grader(NORMAL_GRADER, "u.py", {"final_answer": "4"}, {"answer": "4"}) == 1.0
        assert uids(a) and uids(b) and not uids(a) & uids(b)
        other = subprocess.run([sys.executable, "-c", "from agentrl.sandbox.pool import UidBlock\n"
                                "print(UidBlock().base)"], capture_output=True, text=True, timeout=60)
        assert other.returncode == 0, other.stderr
        assert int(other.stdout) not in {a._uids.base, b._uids.base}
        freed = b._uids.base
    finally:
        a.close()
        b.close()
    c = Sandbox(size=1)
    try:
        c._pool("grader")
        assert c._uids.base <= freed  # the lowest free range is taken again
    finally:
        c.close()


def test_pool_size_from_the_environment(monkeypatch):
    monkeypatch.setenv("AGENTRL_SANDBOX_WORKERS", "3")
    assert Sandbox().size == 3
    assert Sandbox(size=1).size == 1  # an explicit size wins
    monkeypatch.setenv("AGENTRL_SANDBOX_WORKERS", "many")
    with pytest.raises(SandboxError, match="AGENTRL_SANDBOX_WORKERS must be a whole number") as err:
        Sandbox()
    assert err.value.cause == "bad_input"
