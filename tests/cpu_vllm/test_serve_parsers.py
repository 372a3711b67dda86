"""The `vllm serve --tool-call-parser NAME` that `agentrl export` prints names a parser vLLM has, and for SmolLM2
that parser reads the calls the model writes as agentrl reads them.

Real: vLLM's own tool-parser registry and its `xlam` parser (vLLM's CPU build in .venv-vllm); agentrl's families.
The SmolLM2 texts are its published format and one greedy answer of the SmolLM2 tuned on BFCL (run A of
configs/smollm2.yaml, step 15, exported), copied as the model wrote it.
"""

from __future__ import annotations

import json

import pytest

from agentrl import families

TUNED_SMOLLM2 = ('<tool_call>[\n{"name": "calculate_final_velocity", "arguments": {"initial_velocity": 9.8, '
                 '"acceleration": 9.8, "time": 5}}]</tool_call>')


def test_every_family_names_a_parser_vllm_has():
    from vllm.tool_parsers import ToolParserManager

    have = set(ToolParserManager.list_registered())
    wrong = {f.name: families.vllm_parser(f.parser) for f in families.FAMILIES.values()
             if families.vllm_parser(f.parser) not in have}
    assert not wrong, f"vLLM {sorted(have)} has no parser named {wrong}"


@pytest.mark.parametrize("text", [
    TUNED_SMOLLM2,
    '<tool_call>[{"name": "add", "arguments": {"a": 1, "b": 2}}, {"name": "multiply", "arguments": {"a": 3, "b": 4}}]'
    "</tool_call>",
])
def test_vllms_parser_for_smollm2_reads_its_calls_as_agentrl_does(text):
    from transformers import AutoTokenizer
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.tool_parsers import ToolParserManager

    from agentrl.workflow import model_import

    try:  # the README's import (once per cache; the main suite's tests/core/test_smollm2.py makes it first)
        path = model_import.import_model("smollm2-135m-instruct")
    except model_import.ModelImportError as exc:
        pytest.skip(str(exc))
    name = families.vllm_parser(families.SMOLLM2.parser)
    parser = ToolParserManager.get_tool_parser(name)(AutoTokenizer.from_pretrained(path))
    request = ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "q"}])
    got = parser.extract_tool_calls(text, request)
    assert got.tools_called
    calls = [{"name": c.function.name, "arguments": json.loads(c.function.arguments)} for c in got.tool_calls]
    assert calls == families.smollm2_calls(text)
