"""The demo build most test folders train or roll out (a short warm-up: the model barely calls tools), built once.

scripts/test.sh runs the e2e folder and the rest of the suite as two pytest processes at once and gives both the
same AGENTRL_TEST_SHARED folder: the first to ask builds there, the other waits on the build's lock and reuses it
(agentrl.firstuse). Without that variable (pytest run by hand) the build goes to this session's temp folder.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def demo(tmp_path_factory) -> dict:
    from agentrl.demo import build

    shared = os.environ.get("AGENTRL_TEST_SHARED")
    out = Path(shared) / "demo-warmup30" if shared else tmp_path_factory.mktemp("demo")
    return build(str(out), warmup_steps=30, eval_samples=0, log=lambda m: None)
