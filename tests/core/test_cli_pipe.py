"""`agentrl ... | head`: the reader going away is not an error of ours, and no traceback says otherwise."""

from __future__ import annotations

import subprocess
import sys


def test_a_closed_pipe_ends_the_command_quietly():
    proc = subprocess.Popen([sys.executable, "-m", "agentrl.cli", "reward", "new", "--preset", "math"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # what `| head -1` does once it has its line: here, before anything was written
    err = proc.stderr.read().decode()
    assert proc.wait(60) == 141, err  # 128 + SIGPIPE, as a shell tool killed by the signal reports
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
