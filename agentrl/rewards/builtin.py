"""The built-in reward presets, registered through the same hook as any pip-installed plugin.

    register("math", math.grade, description="...", source=Path(math.__file__))

What is registered says how far it is trusted: a callable runs in-process (the plugin that registers it
vouches for it); a path, like ``custom``, runs in the sandbox like a user's own reward file. ``source``
makes a registration a *preset*: ``agentrl reward new --preset NAME`` copies that file, and a reward file
byte-for-byte equal to a callable preset's source is as trusted as the preset itself.
"""

from __future__ import annotations

from pathlib import Path

from agentrl.hookspecs import hookimpl


@hookimpl
def register_rewards(register):
    from agentrl.presets import coding, llm_judge, math, tool_use
    from agentrl.rewards.codelayouts import applies

    for module, description in (
        (math, "final answer equals metadata.expected_answer (numbers, LaTeX, sympy)"),
        (coding, "fraction of the row's tests passed (metadata.tests, or a peer dataset's own test fields), run in "
                 "the sandbox"),
        (llm_judge, "an LLM grades the answer against metadata.rubric"),
        (tool_use, "metadata.expected_tools were called (set, order, arguments)"),
    ):
        extra = {"applies": applies} if module is coding else {}  # which rows it scores: tests in a known layout
        register(module.__name__.rsplit(".", 1)[-1], module.grade, description=description,
                 source=Path(module.__file__).resolve(), **extra)
    import agentrl.presets

    custom = Path(agentrl.presets.__file__).resolve().parent / "custom.py"
    register("custom", str(custom), description="the editable template, run in the sandbox", source=custom)
