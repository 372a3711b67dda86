"""The built-in reward presets, registered through the same hook as any pip-installed plugin.

math, coding, llm_judge and tool_use are trusted code and run in-process; ``custom`` is registered as
a file path, so it runs in the sandbox like a user's own reward file.
"""

from __future__ import annotations

from pathlib import Path

from agentrl.hookspecs import hookimpl


TRUSTED_PRESETS = ("math", "coding", "llm_judge", "tool_use")


@hookimpl
def register_rewards(register):
    from agentrl.presets import coding, llm_judge, math, tool_use

    register("math", math.grade, description="final answer equals metadata.expected_answer (numbers, LaTeX, sympy)")
    register("coding", coding.grade, description="fraction of metadata.tests passed, run in the sandbox")
    register("llm_judge", llm_judge.grade, description="an LLM grades the answer against metadata.rubric")
    register("tool_use", tool_use.grade, description="metadata.expected_tools were called (set, order, arguments)")
    register("custom", str(preset_path("custom")), description="the editable template, run in the sandbox")


def preset_path(name: str) -> Path:
    import agentrl.presets

    return Path(agentrl.presets.__file__).resolve().parent / f"{name}.py"
