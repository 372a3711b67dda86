"""Sandbox for user reward code (RestrictedPython inside OS isolation) and model-written code (plain
Python inside OS isolation), served by pre-started forking workers. See api.Sandbox."""

from .api import MAX_ABS_REWARD, Sandbox, get_sandbox
from .results import GraderCodeError, IsolationReport, SandboxError, TestVerdict

__all__ = ["get_sandbox", "Sandbox", "SandboxError", "GraderCodeError", "IsolationReport", "TestVerdict",
           "MAX_ABS_REWARD"]
