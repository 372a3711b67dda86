"""Tests of verl's vLLM rollout and the vLLM eval engine on this machine's CPU, with vLLM's CPU build.

They run in the second environment, .venv-vllm (`scripts/install.sh --vllm`); scripts/test.sh runs them there
after the main suite. In an environment without vLLM they are not collected.
"""

import importlib.util
from pathlib import Path

import pytest

from agentrl.precision import vllm_cpu_problem

collect_ignore_glob = [] if importlib.util.find_spec("vllm") else ["test_*.py"]


def pytest_collection_modifyitems(config, items):
    """On a CPU that vLLM's CPU build cannot run on, every test here skips, saying what the CPU lacks."""
    problem = vllm_cpu_problem()
    if problem:
        here = Path(__file__).parent
        for item in items:
            if here in Path(item.path).parents:  # a conftest's hook sees the whole session's items
                item.add_marker(pytest.mark.skip(reason=problem))
