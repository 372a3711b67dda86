import os
import socket
import threading
import time
from pathlib import Path

import pytest

from agentrl.sandbox import Sandbox

REPO = Path(__file__).resolve().parents[2]  # this checkout, wherever it was cloned
NORMAL_GRADER = "def grade(sample, item):\n    return 1.0 if sample.final_answer == item['answer'] else 0.0\n"


@pytest.fixture(scope="session", params=["C", "Python"])
def sb(request):
    """Every test runs against both per-call loops of the templates: the C extension (the default) and the
    pure-Python fallback used where the extension is not built."""
    os.environ["OPENAI_API_KEY"] = "sk-fake-parent-secret"  # must never be visible inside
    before = os.environ.get("AGENTRL_SANDBOX_FORKSERVER")
    os.environ["AGENTRL_SANDBOX_FORKSERVER"] = request.param.lower()
    box = Sandbox(size=2)
    loop = box.isolation_report().fork_loop.reason
    assert loop.startswith(f"per-call loop of the templates in {request.param} "), loop
    yield box
    box.close()
    if before is None:
        os.environ.pop("AGENTRL_SANDBOX_FORKSERVER", None)
    else:
        os.environ["AGENTRL_SANDBOX_FORKSERVER"] = before


def children(pid: int) -> list[int]:
    try:
        return [int(p) for p in open(f"/proc/{pid}/task/{pid}/children").read().split()]
    except OSError:
        return []


def _uid(pid: int) -> int | None:
    try:
        return int(next(x for x in open(f"/proc/{pid}/status") if x.startswith("Uid:")).split()[1])
    except (OSError, StopIteration):
        return None


def templates_of_zygote(zygote: int) -> list[int]:
    """A zygote's templates: the children of its template factory (its child that runs as root), or any
    child of its own that runs under a slot uid (where templates are forked by the zygote itself)."""
    out = []
    for c in children(zygote):
        out += children(c) if _uid(c) == 0 else [c]
    return out


def calls_of(pool) -> list[int]:
    """The processes of the calls running now on ``pool``'s workers: what their templates have forked."""
    return [c for w in pool.workers if w.alive() for t in templates_of_zygote(w.proc.pid) for c in children(t)]


def wait_until(condition, what: str, timeout: float = 60.0):
    """Wait for ``condition()`` to hold (its value returned), looking every 20 ms; fail naming ``what`` if it
    has not within ``timeout`` seconds. A test waits on what it needs to have happened, never on a guess of
    how long that takes."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not seen within {timeout:g} s")
        time.sleep(0.02)


def gone(pids) -> bool:
    """None of ``pids`` is running any longer (a killed process reaped, or left a zombie)."""
    def dead(pid: int) -> bool:
        try:
            return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
        except OSError:
            return True
    return all(dead(p) for p in pids)


def assert_still_works(box: Sandbox) -> None:
    """After any attack the host and the workers keep serving normal calls."""
    assert box.run_grader(NORMAL_GRADER, "normal.py", {"final_answer": "4"}, {"answer": "4"}) == 1.0
    [v] = box.run_tests("def f(x):\n    return 2 * x\n", [{"type": "assert", "code": "assert f(2) == 4"}])
    assert v.passed, v


class Listener:
    """A TCP server on the host's 127.0.0.1 that records whether anything connected."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self._stop = False
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
                self.connections += 1
                conn.close()
            except OSError:
                pass

    def close(self) -> None:
        self._stop = True
        self._t.join()
        self.sock.close()


@pytest.fixture
def listener():
    lst = Listener()
    yield lst
    lst.close()
