"""The demo build (model and data, a short warm-up) that the e2e files train, built once a file."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    from agentrl.demo import build

    return build(str(tmp_path_factory.mktemp("demo")), warmup_steps=30, eval_samples=0, log=lambda m: None)
