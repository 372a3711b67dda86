"""Two processes asking for the same demo build at once (two commands on a fresh machine, or two test
processes): one builds, the other waits for it and reuses the result; neither writes over the other."""

from __future__ import annotations

import json
import subprocess
import sys
import time

BUILD = """
import json, sys
from agentrl.demo import build
paths = build(sys.argv[1], warmup_steps=2, eval_samples=0, log=lambda m: print(m, flush=True))
print("PATHS " + json.dumps(paths), flush=True)
"""


def test_two_builders_at_once_build_once(tmp_path):
    from filelock import FileLock

    out = tmp_path / "demo"
    out.mkdir()
    held = FileLock(str(out / ".build.lock"))
    held.acquire()  # as if a first build were under way: both processes must wait for it
    procs = [subprocess.Popen([sys.executable, "-c", BUILD, str(out)], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for _ in range(2)]
    logs = [[] for _ in procs]
    deadline = time.monotonic() + 120
    for proc, log in zip(procs, logs):  # each says it waits (a line, read as it comes), before the lock is let go
        while not any("waiting" in line for line in log):
            assert time.monotonic() < deadline and proc.poll() is None, log
            log.append(proc.stdout.readline())
    held.release()
    for proc, log in zip(procs, logs):
        rest, _ = proc.communicate(timeout=300)
        log.extend(rest.splitlines())
        assert proc.returncode == 0, log
    built = [log for log in logs if any(line.startswith("build done") for line in log)]
    reused = [log for log in logs if any(line.startswith("reusing the build") for line in log)]
    assert len(built) == 1 and len(reused) == 1, logs
    paths = [json.loads(next(line for line in log if line.startswith("PATHS "))[6:]) for log in logs]
    assert paths[0] == paths[1]
    marker = json.loads((out / "build.json").read_text())
    assert marker["options"]["warmup_steps"] == 2
