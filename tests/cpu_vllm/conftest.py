"""Tests of verl's vLLM rollout and the vLLM eval engine on this machine's CPU, with vLLM's CPU build.

They run in the second environment, .venv-vllm (`scripts/install.sh --vllm`); scripts/test.sh runs them there
after the main suite. In an environment without vLLM they are not collected.
"""

import importlib.util

collect_ignore_glob = [] if importlib.util.find_spec("vllm") else ["test_*.py"]
