"""Sandbox for user reward code (RestrictedPython inside OS isolation) and model-written code (plain
Python inside OS isolation), served by pre-started forking workers. See api.Sandbox and README.md.

The public names load lazily, so the worker processes (``python -m agentrl.sandbox.zygote``) do not
import the host side (asyncio, threads, subprocess): every module a zygote holds makes each fork dearer.
"""

from .results import GraderCodeError, IsolationReport, SandboxError, TestVerdict

__all__ = ["get_sandbox", "Sandbox", "SandboxError", "GraderCodeError", "IsolationReport", "TestVerdict",
           "MAX_ABS_REWARD"]


def __getattr__(name: str):
    if name in ("get_sandbox", "Sandbox", "MAX_ABS_REWARD"):
        from . import api
        return getattr(api, name)
    raise AttributeError(f"module 'agentrl.sandbox' has no attribute {name!r}")
