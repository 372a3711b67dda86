"""agentrl.malloc: glibc keeps large freed tensors on the heap, in this process and in the processes it starts."""

import os
import subprocess
import sys
from pathlib import Path

from agentrl import malloc
from agentrl.verl.args import child_env, worker_env


def test_processes_started_from_here_get_the_settings_and_the_users_own_win(tmp_path):
    env = malloc.environment({"PATH": "/bin", "MALLOC_TOP_PAD_": "0"})
    assert env["MALLOC_MMAP_THRESHOLD_"] == str(32 << 20) and env["MALLOC_TRIM_THRESHOLD_"] == str(1 << 30)
    assert env["MALLOC_TOP_PAD_"] == "0"
    assert "MALLOC_MMAP_THRESHOLD_" not in malloc.environment({"AGENTRL_MALLOC": "default"})
    verl = child_env(Path(tmp_path), 0, {})
    assert verl["MALLOC_MMAP_THRESHOLD_"] == os.environ.get("MALLOC_MMAP_THRESHOLD_", str(32 << 20))
    assert worker_env(verl)["MALLOC_MMAP_THRESHOLD_"] == verl["MALLOC_MMAP_THRESHOLD_"]  # a `ray start` cluster's too


def test_tune_applies_in_a_running_process():
    """With the settings a 16 MiB block comes from the heap (reused once freed); by default from a fresh mapping."""
    code = ("import ctypes, sys; from agentrl import malloc; tuned = malloc.tune() if sys.argv[1] == 'on' else False; "
            "libc = ctypes.CDLL('libc.so.6'); libc.malloc.restype = ctypes.c_void_p; "
            "p = libc.malloc(16 << 20); "
            "heap = [l for l in open('/proc/self/maps') if l.rstrip().endswith('[heap]')][0].split()[0].split('-'); "
            "print(tuned, int(heap[0], 16) <= p < int(heap[1], 16))")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "AGENTRL_MALLOC"}
    runs = {arg: subprocess.run([sys.executable, "-c", code, arg], capture_output=True, text=True, env=env,
                                check=True).stdout.split() for arg in ("on", "off")}
    assert runs == {"on": ["True", "True"], "off": ["False", "False"]}
