"""The same model outputs scored twice: by agentrl (verl's Hermes tool-call parser, then the ``bfcl_ast`` reward)
and by bfcl-eval's own runner (``_evaluate_single_ast_entry`` / ``_evaluate_single_relevance_entry`` with its
Hermes-format function-calling handler, ``QwenFCHandler``), for every row of every supported single-turn category.

    python tests/bfcl/fidelity.py        # prints the agreement table the README quotes

A model output is the text of one assistant turn with ``<tool_call>`` blocks. Per row: the ground truth (each
call with the first of its possible values, an optional argument whose first possibility is "" left out; in
simple_java / simple_javascript each value written as Java / JavaScript source text, ``agentrl_bfcl.literals``) and
perturbations of it: wrong value, wrong type, missing required argument, extra call, wrong function, swapped
order (rows with two or more calls), no call, a broken JSON block beside the calls, arguments that are not an
object. Relevance/irrelevance rows: no call, a call, a broken block only, a call with a non-object argument.
The tokenizer handed to verl's parser is bytes-as-tokens (UTF-8), so its decode gives back the text exactly.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

from agentrl.trajectory import make_item, make_sample, make_step

from agentrl_bfcl import ast_reward, bfcl, literals
from agentrl_bfcl.rows import rows

OMIT = object()


def _concrete(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: v for k, p in value.items() if (v := _pick(p)) is not OMIT}
    if isinstance(value, list):
        return [_concrete(x) for x in value]
    return value


def _pick(possible: Any) -> Any:
    """The first possibility of a possible-answer entry other than "" (which means "may be left out")."""
    if not isinstance(possible, list) or not possible:
        return _concrete(possible)
    given = [p for p in possible if p != ""]
    return _concrete(given[0]) if given else OMIT


def ground_truth(possible_answer: list, functions: list) -> list[tuple[str, dict]]:
    """Each call with the first given possibility of each argument its function documents."""
    documented = {f["name"]: f["parameters"].get("properties", {}) for f in functions}
    calls = []
    for call in possible_answer:
        (name, params), = call.items()
        args = {k: v for k, p in params.items() if k in documented.get(name, params) and (v := _pick(p)) is not OMIT}
        calls.append((name.replace(".", "_"), args))
    return calls


def writer(category: str, functions: list):
    """``write(name, args)``: the arguments as the model writes them, values as they are (Python categories) or
    as Java / JavaScript source text (simple_java, simple_javascript: ``agentrl_bfcl.literals``)."""
    language = bfcl.language(category).value
    documented = {f["name"].replace(".", "_"): f["parameters"].get("properties", {}) for f in functions}

    def write(name: str, args: dict) -> dict:
        if language == "python":
            return args
        return {k: literals.source(v, documented[name][k], language) for k, v in args.items()}
    return write


def _other_value(v: Any) -> Any:
    if isinstance(v, bool):
        return not v
    if isinstance(v, int):
        return v + 1
    if isinstance(v, float):
        return v + 1.5
    if isinstance(v, str):
        return v + "x"
    if isinstance(v, list):
        return v + [v[0]] if v else [1]
    if isinstance(v, dict):
        return {**v, "unexpected_key": 1}
    return "something else"  # None


def _other_type(v: Any) -> Any:
    return [v] if isinstance(v, str) else json.dumps(v)


def _block(obj: Any) -> str:
    return f"<tool_call>\n{json.dumps(obj, ensure_ascii=False)}\n</tool_call>"


def text_of(calls: list[tuple[str, Any]]) -> str:
    return "\n".join(_block({"name": n, "arguments": a}) for n, a in calls)


BROKEN = "<tool_call>\n{\"name\": \"oops\", \"arguments\": {\"a\": 1\n</tool_call>"


def outputs(row: dict) -> Iterator[tuple[str, str]]:
    """(kind, model text) for one converted row."""
    names = [t["function"]["name"] for t in row["metadata"]["declared_tools"]] or ["some_function"]  # rows may offer none
    answer = row["metadata"]["bfcl"]["possible_answer"]
    if answer is None:  # relevance / irrelevance
        yield "no_call", "I cannot help with that using these functions."
        yield "a_call", text_of([(names[0], {})])
        yield "broken_block_only", BROKEN
        yield "args_not_object", _block({"name": names[0], "arguments": [1, 2]})
        return
    write = writer(row["metadata"]["bfcl_category"], row["metadata"]["bfcl"]["functions"])
    values = ground_truth(answer, row["metadata"]["bfcl"]["functions"])
    gt = [(n, write(n, a)) for n, a in values]
    yield "ground_truth", text_of(gt)
    name, args = gt[0]
    if args:
        key = next(iter(args))
        value = values[0][1][key]  # a wrong value is wrong in the language: changed, then written
        yield "wrong_value", text_of([(name, {**args, key: write(name, {key: _other_value(value)})[key]})] + gt[1:])
        # a wrong type: in Java/JavaScript rows the bare JSON value where source text (a string) is asked for
        wrong = _other_type(args[key]) if args[key] == value or isinstance(value, str) else value
        yield "wrong_type", text_of([(name, {**args, key: wrong})] + gt[1:])
    docs = {f["name"].replace(".", "_"): f for f in row["metadata"]["bfcl"]["functions"]}
    required = [k for k in docs.get(name, {}).get("parameters", {}).get("required", []) if k in args]
    if required:
        yield "missing_required", text_of([(name, {k: v for k, v in args.items() if k != required[0]})] + gt[1:])
    yield "extra_call", text_of(gt + gt[:1])
    other = next((n for n in names if n != name), name + "_other")
    yield "wrong_function", text_of([(other, args)] + gt[1:])
    if len(gt) > 1 and gt[::-1] != gt:
        yield "swapped_order", text_of(gt[::-1])
    yield "no_call", "Here is the answer without calling anything."
    yield "broken_block_beside_calls", text_of(gt) + "\n" + BROKEN
    yield "args_not_object", _block({"name": name, "arguments": [1, 2]})


class _ByteTokenizer:
    """Bytes as tokens: ``decode(list(text.encode()))`` is ``text``."""

    def decode(self, ids, **_):
        return bytes(ids).decode("utf-8")


def agentrl_scores(category: str, texts: list[tuple[dict, str]]) -> list[float]:
    """Each text parsed by verl's Hermes tool-call parser, as one first turn, scored by ``bfcl_ast``."""
    scores = []
    for (row, _), calls in zip(texts, parsed_calls(texts)):
        step = make_step("", tool_calls=calls)
        item = make_item(row["messages"], row["metadata"], id=row["id"])
        scores.append(ast_reward.grade(make_sample("r", [step]), item))
    return scores


def parsed_calls(texts: list[tuple[dict, str]]) -> list[list[dict]]:
    """Each text's calls as verl's Hermes tool-call parser finds them and the episode records them (arguments
    decoded from the parser's JSON text)."""
    import logging

    from verl.experimental.agent_loop.tool_parser import ToolParser

    parser = ToolParser.get_tool_parser("hermes", _ByteTokenizer())

    async def parse_all():
        logging.disable(logging.ERROR)  # the parser logs each broken block, which these outputs have on purpose
        try:
            return [await parser.extract_tool_calls(list(text.encode("utf-8"))) for _, text in texts]
        finally:
            logging.disable(logging.NOTSET)

    return [[{"id": f"d{n}", "name": c.name, "arguments": json.loads(c.arguments)} for n, c in enumerate(calls)]
            for _, calls in asyncio.run(parse_all())]


def bfcl_scores(category: str, texts: list[tuple[dict, str]]) -> list[float]:
    """Each text scored by bfcl-eval's runner, as it scores a Hermes-format function-calling model's result."""
    bfcl.require()
    from bfcl_eval.constants.enums import Language, ReturnFormat
    from bfcl_eval.eval_checker.eval_runner import _evaluate_single_ast_entry, _evaluate_single_relevance_entry
    from bfcl_eval.model_handler.local_inference.qwen_fc import QwenFCHandler
    from bfcl_eval.utils import is_java, is_js, load_dataset_entry, load_ground_truth_entry

    handler = QwenFCHandler(model_name=bfcl.MODEL, temperature=0, registry_name=bfcl.MODEL, is_fc_model=True)
    prompts = {e["id"]: e for e in load_dataset_entry(category, include_prereq=False,
                                                      include_language_specific_hint=False)}
    relevance = category in bfcl.RELEVANCE_CATEGORIES
    answers = {} if relevance else {
        e["id"]: a["ground_truth"] for e, a in zip(prompts.values(), load_ground_truth_entry(category))}
    # the runner's own choice of language (eval_runner.ast_file_runner), not agentrl_bfcl.bfcl.language
    language, fmt = ((Language.JAVA, ReturnFormat.JAVA) if is_java(category) else
                     (Language.JAVASCRIPT, ReturnFormat.JAVASCRIPT) if is_js(category) else
                     (Language.PYTHON, ReturnFormat.PYTHON))
    scores = []
    for row, text in texts:
        # each output a fresh evaluation, as in bfcl-eval's runner (its checker edits the entries it is given)
        prompt, answer = copy.deepcopy((prompts[row["id"]], answers.get(row["id"])))
        if relevance:
            result = _evaluate_single_relevance_entry(handler, row["id"], text, prompt, bfcl.MODEL, category)
        else:
            result = _evaluate_single_ast_entry(handler, row["id"], text, answer, prompt, bfcl.MODEL,
                                                category, language, fmt)
        scores.append(1.0 if result["valid"] else 0.0)
    return scores


def _file_ids(category: str) -> list[str]:
    """The ids in bfcl-eval's data file for ``category``, read straight from it."""
    import bfcl_eval

    path = Path(bfcl_eval.__file__).parent / "data" / f"BFCL_v4_{category}.json"
    return [json.loads(line)["id"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def compare(category: str) -> dict:
    """Both scores for every output of every row of ``category``."""
    texts, kinds = [], []
    for row in rows(category):
        for kind, text in outputs(row):
            texts.append((row, text))
            kinds.append(kind)
    ours, theirs = agentrl_scores(category, texts), bfcl_scores(category, texts)
    return {"category": category, "rows": len({r["id"] for r, _ in texts}), "kinds": kinds, "ids": [r["id"] for r, _ in texts],
            "agentrl": ours, "bfcl": theirs}


def table() -> list[dict]:
    out = []
    for category in bfcl.SINGLE_TURN:
        got = compare(category)
        agree = sum(a == b for a, b in zip(got["agentrl"], got["bfcl"]))
        out.append({"category": category, "rows": got["rows"], "outputs": len(got["kinds"]), "agree": agree,
                    "bfcl_valid": int(sum(got["bfcl"])), "kinds": dict(Counter(got["kinds"]))})
    return out


if __name__ == "__main__":
    import time

    started = time.perf_counter()
    total = Counter()
    for line in table():
        print(f"{line['category']:24s} rows {line['rows']:5d}  outputs {line['outputs']:6d}  agree {line['agree']:6d}"
              f"  valid by bfcl-eval {line['bfcl_valid']:5d}")
        total.update({k: line[k] for k in ("rows", "outputs", "agree", "bfcl_valid")})
    print(f"{'all':24s} rows {total['rows']:5d}  outputs {total['outputs']:6d}  agree {total['agree']:6d}"
          f"  valid by bfcl-eval {total['bfcl_valid']:5d}  ({time.perf_counter() - started:.1f} s)")
