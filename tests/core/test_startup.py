"""`agentrl train`'s pre-flight on a machine without a GPU: the CPU/GPU decision costs no torch import.

    pytest tests/core/test_startup.py -q

Start-up time itself is measured by benchmarks/bench_train.py, not asserted here.
"""

import subprocess
import sys

import pytest

from agentrl.verl.cpu.detect import gpu_visible

NO_GPU = not gpu_visible()


@pytest.mark.skipif(not NO_GPU, reason="this machine has a GPU device or driver tool")
def test_cpu_is_chosen_without_importing_torch():
    code = ("import sys\n"
            "from agentrl.config import AgentrlSettings\n"
            "from agentrl.verl.args import on_cpu\n"
            "print(on_cpu(AgentrlSettings(model='m', train_data='t', rewards=['math'])), 'torch' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "False"]


def test_an_explicit_device_is_taken_as_given():
    from agentrl.config import AgentrlSettings
    from agentrl.verl.args import on_cpu

    assert on_cpu(AgentrlSettings(model="m", train_data="t", rewards=["math"], device="cpu"))
    assert not on_cpu(AgentrlSettings(model="m", train_data="t", rewards=["math"], device="gpu"))
