"""Each family's tool-call format: detection from its published chat template, calls from its documentation,
broken calls told apart from answers, reasoning kept apart from the visible answer.

The chat templates are the published ones (tests/fixtures/families, sources in families.json).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentrl import families
from agentrl.families import detect_family, family_for_parser, template_limits

FIXTURES = Path(__file__).parent.parent / "fixtures" / "families"
FAMILY_DATA = json.loads((FIXTURES / "families.json").read_text())


def template(name: str) -> str:
    return (FIXTURES / FAMILY_DATA[name]["template"]).read_text()


@pytest.mark.parametrize("fixture,family,parser", [
    ("qwen2.5", "qwen2.5", "hermes"), ("qwen3", "qwen3", "hermes"), ("qwen3-coder", "qwen3-coder", "qwen3_coder"),
    ("llama3.1", "llama3", "llama3_json"), ("llama3.2", "llama3", "llama3_json"), ("mistral-nemo", "mistral", "mistral"),
    ("mistral-small-3.2", "mistral-v11", "mistral"), ("gpt-oss", "gpt-oss", "gpt-oss"), ("glm-4.5", "glm-4.5", "glm"),
    ("kimi-k2", "kimi-k2", "kimi"), ("seed-oss", "seed-oss", "seed"), ("deepseek-v3.1", "deepseek-v3", "deepseek_v3"),
    ("granite-3.3", "granite", "granite"),
])
def test_family_is_found_from_the_published_template(fixture, family, parser):
    found = detect_family(template(fixture), FAMILY_DATA[fixture]["model_type"])
    assert (found.name, found.parser) == (family, parser)


def test_a_template_without_tool_markup_falls_back_to_hermes():
    assert detect_family("{{ messages[0]['content'] }}").parser == "hermes"
    assert family_for_parser("qwen3_coder").name == "qwen3-coder"
    assert family_for_parser("seed").parser == "seed" and family_for_parser("seed").malformed("<x>") == []


# Calls as each family's documentation shows them (names and values from those pages).
def test_llama_json_calls_from_the_prompt_format_page():
    doc = '{"name": "get_current_conditions", "parameters": {"location": "San Francisco, CA", "unit": "Fahrenheit"}}'
    assert families.llama_json_calls(doc) == [
        {"name": "get_current_conditions", "arguments": {"location": "San Francisco, CA", "unit": "Fahrenheit"}}]
    assert families.llama_json_calls("<|python_tag|>" + doc + "; " + doc)[1]["name"] == "get_current_conditions"
    assert families.llama_json_calls("It is 18 C in Paris.") is None  # an answer, not a call
    with pytest.raises(ValueError, match="not valid JSON"):
        families.llama_json_calls('{"name": "get_current_conditions", "parameters": {"location": }')


def test_llama_pythonic_calls():
    assert families.pythonic_calls("[get_user_info(user_id=7890, special='black')]") == [
        {"name": "get_user_info", "arguments": {"user_id": 7890, "special": "black"}}]
    assert len(families.pythonic_calls("[add(a=1, b=2), multiply(a=3, b=4)]")) == 2
    assert families.pythonic_calls("[1, 2] are the roots.") is None
    with pytest.raises(ValueError):
        families.pythonic_calls("[add(a=1, b=]")


def test_mistral_calls_old_and_new_forms():
    old = '[TOOL_CALLS][{"name": "get_current_weather", "arguments": {"location": "Paris, France", "format": "celsius"}}]'
    assert families.mistral_calls(old + "</s>")[0]["arguments"]["format"] == "celsius"
    new = '[TOOL_CALLS]get_current_weather[ARGS]{"location": "Paris, France"}[TOOL_CALLS]add[CALL_ID]a1b2c3d4e[ARGS]{"a": 1}'
    calls = families.mistral_calls(new)
    assert [c["name"] for c in calls] == ["get_current_weather", "add"] and calls[1]["id"] == "a1b2c3d4e"
    assert families.mistral_calls("Paris is sunny.") is None
    for broken in ('[TOOL_CALLS][{"name": "x", "arguments": {"a": 1}', "[TOOL_CALLS]add[ARGS]{a: 1}"):
        with pytest.raises(ValueError):
            families.mistral_calls(broken)


@pytest.mark.parametrize("turn", [
    # the harmony cookbook: analysis first, recipient in the channel
    "<|channel|>analysis<|message|>Need to use function get_weather.<|end|><|start|>assistant<|channel|>commentary "
    'to=functions.get_weather <|constrain|>json<|message|>{"location":"San Francisco"}<|call|>',
    # gpt-oss's chat template: recipient in the role header
    '<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant to=functions.get_weather<|channel|>commentary '
    'json<|message|>{"location":"San Francisco"}<|call|>',
    # a direct call: the generation prompt already holds <|start|>assistant
    ' to=functions.get_weather<|channel|>commentary json<|message|>{"location":"San Francisco"}<|call|>',
])
def test_gpt_oss_calls_in_every_harmony_form(turn):
    calls, bad = families.harmony_calls(turn)
    assert calls == [{"name": "get_weather", "arguments": {"location": "San Francisco"}}] and bad == []


def test_gpt_oss_broken_arguments_are_reported_not_passed_as_text():
    calls, bad = families.harmony_calls(
        '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"location": San Francisco}<|call|>')
    assert calls == [] and "not valid JSON" in bad[0]


@pytest.mark.parametrize("family,turn,answer,reasoning", [
    ("qwen3", "<think>\n2 plus 3.\n</think>\n\nThe answer is 5.<|im_end|>", "The answer is 5.", "2 plus 3."),
    ("glm-4.5", "<think>2 plus 3.</think>\nThe answer is 5.<|user|>", "The answer is 5.", "2 plus 3."),
    ("gpt-oss", "<|channel|>analysis<|message|>The tool answered.<|end|><|start|>assistant<|channel|>final<|message|>"
                "It is 18 C in Paris.<|return|>", "It is 18 C in Paris.", "The tool answered."),
    ("qwen2.5", "The answer is 5.<|im_end|>", "The answer is 5.", ""),
    ("mistral", "Paris is sunny.</s>", "Paris is sunny.", ""),
])
def test_visible_answer_keeps_reasoning_and_channels_apart(family, turn, answer, reasoning):
    specials = ("<|im_end|>", "<|user|>", "<|return|>", "</s>")
    assert families.FAMILIES[family].split(turn, specials) == families.TurnText(answer, reasoning)


@pytest.mark.parametrize("family,good,broken", [
    ("qwen2.5", '<tool_call>\n{"name": "add", "arguments": {"a": 1}}\n</tool_call>',
     '<tool_call>\n{"name": "add", "arguments": {"a": 1,}}\n</tool_call>'),
    ("qwen3-coder", "<tool_call>\n<function=add>\n<parameter=a>\n1\n</parameter>\n</function>\n</tool_call>",
     "<tool_call>\n<function=add>\n<parameter=a>\n1\n</function>\n</tool_call>"),
    ("glm-4.5", "<tool_call>add\n<arg_key>a</arg_key>\n<arg_value>1</arg_value>\n</tool_call>",
     "<tool_call>add\n<arg_key>a</arg_key>\n</tool_call>"),
    ("llama3", '{"name": "add", "parameters": {"a": 1}}', '{"name": "add", "parameters": {"a": 1}'),
    ("mistral", '[TOOL_CALLS][{"name": "add", "arguments": {"a": 1}}]', '[TOOL_CALLS][{"name": "add", "arguments": {"a": 1'),
    ("gpt-oss", ' to=functions.add<|channel|>commentary json<|message|>{"a": 1}<|call|>',
     ' to=functions.add<|channel|>commentary json<|message|>{"a": 1<|call|>'),
])
def test_malformed_calls_are_told_in_the_familys_own_format(family, good, broken):
    fam = families.FAMILIES[family]
    assert fam.malformed(good) == [] and fam.malformed("The answer is 1.") == []
    reasons = fam.malformed(broken)
    assert len(reasons) == 1
    message = fam.malformed_message(reasons[0])
    assert message.startswith("error: malformed tool call") and fam.call_example in message


def test_mistral_call_ids_are_nine_alphanumerics_and_unique():
    ids = {families.MISTRAL.call_id(n, "r-3f2a9c") for n in range(20)}
    assert len(ids) == 20 and all(len(i) == 9 and i.isalnum() for i in ids)
    assert families.QWEN25.call_id(3) == "c3"


def test_template_limits_name_what_the_config_asks_for():
    assert "parallel_calls" in template_limits(template("llama3.1"), detect_family(template("llama3.1")))
    assert "simulated_user" in template_limits(template("mistral-nemo"), detect_family(template("mistral-nemo")))
    assert template_limits(template("qwen2.5"), detect_family(template("qwen2.5"))) == {}
    assert "tools" in template_limits("{{ messages }}", families.HERMES)


def _model_folder(path: Path, fixture: str) -> Path:
    from agentrl.demo.tokenizer import train_family_tokenizer

    data = FAMILY_DATA[fixture]
    train_family_tokenizer(["What is 2 + 2? The answer is 4."] * 20, data, template(fixture)).save_pretrained(path)
    (path / "config.json").write_text(json.dumps({"model_type": data["model_type"]}))
    return path


@pytest.mark.parametrize("fixture,agent,family,warned", [
    ("llama3.1", {}, "llama3", "one tool call per assistant turn"),
    ("mistral-nemo", {"max_parallel_calls": 1, "simulated_user": {"model": "openai/gpt-4o-mini"}}, "mistral",
     "alternate"),
    ("qwen3-coder", {}, "qwen3-coder", None),
])
def test_data_check_reports_the_models_format_and_what_its_template_cannot_express(tmp_path, capsys, fixture, agent,
                                                                                   family, warned):
    import yaml

    from agentrl.cli import main

    model = _model_folder(tmp_path / "model", fixture)
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"id": "a", "messages": [{"role": "user", "content": "What is 2 + 2?"}],
                                "metadata": {"expected_answer": "4"}}) + "\n")
    config = tmp_path / "train.yaml"
    config.write_text(yaml.safe_dump({"agentrl": {"model": str(model), "train_data": str(rows), "tools": ["calculator"],
                                                  "rewards": [{"name": "math"}], "agent": agent}}))
    assert main(["data", "check", "--config", str(config), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    fmt = result["summary"]["model_format"]
    assert fmt["family"] == family and fmt["chosen"] == "chat template" and fmt["model_type"] == FAMILY_DATA[fixture]["model_type"]
    template_warnings = [w["problem"] for w in result["warnings"] if w["where"].startswith(str(model))]
    assert (any(warned in w for w in template_warnings) if warned else template_warnings == [])
    assert main(["data", "check", "--config", str(config)]) == 0
    assert f"model format: {family} (parser {fmt['parser']}, from the chat template" in capsys.readouterr().out


def test_mistral_reads_every_tool_calls_list_and_ignores_trailing_text():
    """A second [TOOL_CALLS] list was dropped without a word; text after the last list is not read (as vLLM)."""
    two = '[TOOL_CALLS] [{"name": "add", "arguments":{"a": 1}}][TOOL_CALLS] [{"name": "sub", "arguments":{"b": 2}}]'
    assert [(c["name"], c["arguments"]) for c in families.mistral_calls(two)] == [("add", {"a": 1}), ("sub", {"b": 2})]
    trailing = '[TOOL_CALLS] [{"name": "add", "arguments": {"a": 1}}]\nextra trailing data'
    assert [c["name"] for c in families.mistral_calls(trailing)] == ["add"]
    with pytest.raises(ValueError, match="not valid JSON"):
        families.mistral_calls('[TOOL_CALLS] [{"name": "add", "arguments": {"a": 1}}][TOOL_CALLS] [{"name": ')


def test_mistral_v11_calls_decoded_without_args_token():
    """vLLM's v11 tokenizer skips the [ARGS] control token when decoding: [TOOL_CALLS]NAME{...} is read as the new
    form; arguments cut off or not an object are reported naming the tool; a name with no arguments is no call."""
    skipped = '[TOOL_CALLS]add{"a": 3.5, "b": 4}[TOOL_CALLS]mul[ARGS]{"a": 3, "b": 6}'
    assert [(c["name"], c["arguments"]) for c in families.mistral_calls(skipped)] == [
        ("add", {"a": 3.5, "b": 4}), ("mul", {"a": 3, "b": 6})]
    assert families.mistral_calls('Sure.[TOOL_CALLS]add{"a": "{}"}')[0]["arguments"] == {"a": "{}"}
    with pytest.raises(ValueError, match=r"the arguments of bash are not valid JSON"):
        families.mistral_calls('[TOOL_CALLS]bash{"command": "ls')
    with pytest.raises(ValueError, match=r"the arguments of add must be a JSON object"):
        families.mistral_calls("[TOOL_CALLS]add[ARGS][1, 2]")
    with pytest.raises(ValueError):
        families.mistral_calls("[TOOL_CALLS]toolname_no_args")
