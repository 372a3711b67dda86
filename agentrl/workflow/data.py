"""``agentrl data check | split | convert``: look at a dataset before training on it.

    agentrl data check data/train.jsonl data/val.jsonl --config train.yaml --model demo
    agentrl data split data/all.jsonl --val 0.15 --stratify metadata.task_type,metadata.difficulty --seed 0 -o data/
    agentrl data convert tutorial.jsonl -o data/all.jsonl

``check`` reports every problem with ``file:line`` (not only the first): rows that are not agentrl rows,
duplicate ids across all files, exact duplicate rows, the same prompt in two files (train/validation overlap),
empty prompts, coding tests that cannot be read, rows no configured reward applies to (each reward's metadata
missing), rows whose ``allowed_tools`` / ``expected_tools`` name a tool no configured server offers, and
prompts longer than ``agentrl.max_prompt_length`` once the tool schemas are in the template (a warning:
verl keeps their end, so training runs, on a cut prompt). Then a summary:
rows, metadata keys with their value counts, the layout of the coding tests with tests per row, prompt
lengths in tokens.
"""

from __future__ import annotations

import collections
import json
import random
import re
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentrl.errors import AgentrlError


class DataCommandError(AgentrlError):
    """A data command cannot run as asked (missing file, bad option)."""


@dataclass
class Problem:
    where: str
    message: str

    def as_dict(self) -> dict:
        return {"where": self.where, "problem": self.message}


def _lines(path: Path):
    if not path.is_file():
        raise DataCommandError(f"{path}: no such file")
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if line.strip():
                yield lineno, line


def reward_metadata_keys(rewards: list) -> dict[str, list[str]]:
    """metadata keys each configured reward reads, from what its plugin declares (``metadata=[...]``) or
    the ``metadata.KEY`` names in its description."""
    from agentrl import plugins

    table = plugins.rewards()
    needs: dict[str, list[str]] = {}
    for entry in rewards:
        name = entry if isinstance(entry, str) else entry.get("name")
        label = entry if isinstance(entry, str) else entry.get("label", name)
        reg = table.get(name) if isinstance(name, str) else None
        if reg is None or callable(reg.extra.get("applies")):
            continue  # a reward that says itself which rows it applies to (reward_appliers)
        keys = reg.extra.get("metadata") or re.findall(r"metadata\.(\w+)", reg.description or "")
        if keys:
            needs[str(label)] = list(dict.fromkeys(keys))
    return needs


def reward_appliers(rewards: list) -> dict[str, Any]:
    """label -> applies(metadata) for configured rewards that declare it (the coding reward: tests in a known
    layout, whatever their field is called)."""
    from agentrl import plugins

    table = plugins.rewards()
    out = {}
    for entry in rewards:
        name = entry if isinstance(entry, str) else entry.get("name")
        reg = table.get(name) if isinstance(name, str) else None
        if reg is not None and callable(reg.extra.get("applies")):
            out[str(entry if isinstance(entry, str) else entry.get("label", name))] = reg.extra["applies"]
    return out


def _coding_suite(meta: dict, where: str, layouts: dict, problems: list[Problem]) -> None:
    """Count the row's coding tests by layout; tests that cannot be read are a problem of the row."""
    from agentrl.rewards.codelayouts import TestLayoutError, read_suite

    try:
        suite = read_suite(meta)
    except TestLayoutError as exc:
        problems.append(Problem(where, f"coding tests: {exc}"))
        return
    if suite is not None:
        layouts.setdefault(suite.layout, []).append(len(suite.tests))


def check(files: list[str], *, settings: Any = None, model: str | None = None, config: str | None = None) -> dict:
    """Every problem in ``files`` and a summary; nothing stops at the first bad row."""
    from agentrl.dataset import DatasetError, _check_row, row_id

    problems: list[Problem] = []
    warnings: list[Problem] = []
    seen: dict[str, str] = {}
    contents: dict[str, str] = {}  # a row's content (without its id) -> where it first appeared
    prompts: dict[str, tuple[str, str]] = {}  # a prompt -> (its file, where it first appeared)
    needs = reward_metadata_keys(settings.rewards) if settings else {}
    appliers = reward_appliers(settings.rewards) if settings else {}
    layouts: dict[str, list[int]] = {}
    per_file: dict[str, int] = {}
    key_counts: collections.Counter = collections.Counter()
    values: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    good: list[tuple[str, dict]] = []
    for name in files:
        path = Path(name)
        per_file[name] = 0
        for lineno, line in _lines(path):
            where = f"{path}:{lineno}"
            try:
                row = _check_row(json.loads(line), where)
            except json.JSONDecodeError as exc:
                problems.append(Problem(where, f"not valid JSON ({exc.msg} at column {exc.colno})"))
                continue
            except DatasetError as exc:
                problems.append(Problem(where, str(exc).split(": ", 1)[-1]))
                continue
            per_file[name] += 1
            rid = row_id(path, lineno, row)
            if "id" in row and rid in seen:
                problems.append(Problem(where, f"duplicate id {rid!r} (first at {seen[rid]}); ids must be unique"))
            seen.setdefault(rid, where)
            _duplicates(where, name, row, contents, prompts, problems)
            users = [m for m in row["messages"] if m["role"] == "user"]
            if not users[-1]["content"].strip():
                problems.append(Problem(where, "empty prompt: the last user message has no text"))
            meta = row.get("metadata") or {}
            _coding_suite(meta, where, layouts, problems)
            _reward_coverage(where, meta, needs, len(settings.rewards) if settings else 0, problems, warnings,
                             appliers)
            for key, value in meta.items():
                key_counts[key] += 1
                if isinstance(value, (int, float, bool)) or value is None or (isinstance(value, str) and len(value) < 200):
                    values[key][str(value)] += 1
                elif isinstance(value, list) and all(isinstance(v, dict) and "name" in v for v in value):
                    values[key][",".join(str(v["name"]) for v in value)] += 1
            good.append((where, row))
    if settings and settings.tools and good:
        _tool_names(good, settings, problems)
    rows = sum(per_file.values())
    summary: dict[str, Any] = {"rows": rows, "files": per_file, "unique_ids": len(seen),
                               "metadata": {k: {"rows": n, "values": dict(values[k].most_common(8)),
                                                "distinct": len(values[k])} for k, n in key_counts.most_common()}}
    if model:
        summary["model_format"] = model_format(model, settings, warnings)
    if layouts:  # which layout the coding reward reads each row's tests in, and how many tests per row
        summary["coding_tests"] = {name: {"rows": len(counts), "tests": sum(counts), "min": min(counts),
                                          "median": statistics.median(counts), "max": max(counts)}
                                   for name, counts in sorted(layouts.items())}
    if model and good:
        summary["prompt_tokens"] = _prompt_lengths(good, model, settings, warnings, config)
    return {"ok": not problems, "problems": [p.as_dict() for p in problems],
            "warnings": [w.as_dict() for w in warnings], "summary": summary}


def _duplicates(where: str, name: str, row: dict, contents: dict, prompts: dict, problems: list[Problem]) -> None:
    """The same row twice (ids aside) weighs it twice; the same prompt in two files (train and validation)
    means validation scores prompts the model trained on."""
    content = json.dumps({k: v for k, v in row.items() if k != "id"}, sort_keys=True)
    prompt = json.dumps(row["messages"], sort_keys=True)
    if content in contents:
        problems.append(Problem(where, f"exact duplicate of the row at {contents[content]}; drop one"))
    elif prompt in prompts and prompts[prompt][0] != name:
        problems.append(Problem(where, f"the same prompt is at {prompts[prompt][1]}: a prompt in both files leaks "
                                       f"training data into validation; drop it from one"))
    contents.setdefault(content, where)
    prompts.setdefault(prompt, (name, where))


def _tool_names(good: list[tuple[str, dict]], settings: Any, problems: list[Problem]) -> None:
    """allowed_tools / expected_tools naming a tool no configured server offers."""
    from agentrl.dataset import tool_name_problems
    from agentrl.tools.cli import check_servers

    text, ok, offered = check_servers(settings.tools)
    if not ok:
        problems.append(Problem("agentrl.tools", "cannot check the rows' tool names: a tool server did not answer:\n"
                                + text))
        return
    problems += [Problem(where, problem) for where, problem in tool_name_problems(good, offered)]


def _reward_coverage(where: str, meta: dict, needs: dict[str, list[str]], n_rewards: int,
                     problems: list[Problem], warnings: list[Problem], appliers: dict | None = None) -> None:
    """A reward whose metadata a row lacks does not apply to it (it returns None). That is a problem only
    when no configured reward applies: the row could never be scored."""
    lacking = {label: [k for k in keys if meta.get(k) in (None, "", [])] for label, keys in needs.items()}
    lacking = {label: keys for label, keys in lacking.items() if keys}
    for label, applies in (appliers or {}).items():
        if not applies(meta):
            lacking[label] = ["tests (in a layout it reads)"]
    if not lacking:
        return
    said = "; ".join(f"{label!r} reads metadata.{', metadata.'.join(keys)}" for label, keys in lacking.items())
    if len(lacking) == n_rewards:
        problems.append(Problem(where, f"no configured reward applies to this row ({said}), so it can never be "
                                       f"scored; add the metadata or drop the row"))
    else:
        warnings.append(Problem(where, f"not scored by {said}, which this row lacks"))


def model_format(model: str, settings: Any, warnings: list[Problem]) -> dict:
    """The model's tool-call family, parser and chat template, and a warning for each thing the config asks
    that the template cannot express (tools, several calls in one turn, a simulated user)."""
    from agentrl.families import model_family, template_limits

    agent = settings.agent if settings else None
    family, info = model_family(model, agent.tool_parser if agent else "auto")
    where = f"{model}/{info['template_file'] or 'tokenizer_config.json'}"
    limits = template_limits(info["chat_template"], family)
    asks = {"template": True,
            "tools": bool(settings and settings.tools),
            "parallel_calls": bool(agent and agent.max_parallel_calls > 1 and settings.tools),
            "simulated_user": bool(agent and agent.simulated_user)}
    for key, why in limits.items():
        if asks.get(key):
            warnings.append(Problem(where, why))
    return {"family": family.name, "parser": family.parser, "chosen": "agent.tool_parser" if agent and
            agent.tool_parser != "auto" else "chat template" if info["chat_template"] else "default",
            "template": info["template_file"], "model_type": info["model_type"], "final_answer": family.note,
            "limits": limits}


def _prompt_lengths(good: list[tuple[str, dict]], model: str, settings: Any, warnings: list[Problem],
                    config: str | None = None) -> dict:
    from transformers import AutoTokenizer

    from agentrl.tools.offers import offered_per_row

    tok = AutoTokenizer.from_pretrained(model)
    limit = settings.max_prompt_length if settings else None
    metas = [row.get("metadata") or {} for _, row in good]
    offers = offered_per_row(settings.tools if settings else None, settings.tool_allow if settings else None, metas,
                             config or "the config")
    lengths = []
    for (where, row), offered in zip(good, offers):  # each prompt as the agent loop renders it
        ids = tok.apply_chat_template(row["messages"], tools=offered, add_generation_prompt=True, tokenize=True,
                                      return_dict=False)
        lengths.append(len(ids))
        if limit and len(ids) > limit:
            warnings.append(Problem(where, f"prompt is {len(ids)} tokens with the tool schemas, over "
                                           f"agentrl.max_prompt_length={limit}; verl cuts its start off. "
                                           f"Raise max_prompt_length or shorten the prompt"))
    lengths.sort()
    return {"min": lengths[0], "median": statistics.median(lengths), "p95": lengths[int(0.95 * (len(lengths) - 1))],
            "max": lengths[-1], "with_tool_schemas": any(o is not None for o in offers), "limit": limit}


def _get(row: dict, dotted: str) -> str:
    node: Any = row
    for part in dotted.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    if isinstance(node, list):
        return ",".join(str(v.get("name", v)) if isinstance(v, dict) else str(v) for v in node)
    return str(node)


def split(path: str, *, val: float, stratify: list[str], seed: int, out_dir: str) -> dict:
    """Train/validation split, stratified on the given keys: each stratum gives ``val`` of its rows (rounded,
    at least one from a stratum of two or more), so every slice is in both files."""
    from agentrl.dataset import read_rows

    if not 0 < val < 1:
        raise DataCommandError(f"--val {val}: give the validation share between 0 and 1, e.g. 0.15")
    rows = [(lineno, row) for lineno, row in read_rows(path)]
    keys = [k if k.startswith(("metadata.", "id")) or "." in k else f"metadata.{k}" for k in stratify]
    strata: dict[tuple, list[str]] = collections.defaultdict(list)
    raw = Path(path).read_text(encoding="utf-8").splitlines()
    for lineno, row in rows:
        strata[tuple(_get(row, k) for k in keys)].append(raw[lineno - 1])
    rng = random.Random(seed)
    train, valid, table = [], [], []
    for key in sorted(strata):
        lines = strata[key]
        rng.shuffle(lines)
        n_val = round(len(lines) * val)
        if n_val == 0 and len(lines) >= 2:
            n_val = 1
        valid += lines[:n_val]
        train += lines[n_val:]
        table.append({"stratum": dict(zip(keys, key)), "rows": len(lines), "val": n_val})
    rng.shuffle(train)
    rng.shuffle(valid)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "train.jsonl").write_text("".join(line + "\n" for line in train), encoding="utf-8")
    (out / "val.jsonl").write_text("".join(line + "\n" for line in valid), encoding="utf-8")
    return {"train": str(out / "train.jsonl"), "val": str(out / "val.jsonl"), "train_rows": len(train),
            "val_rows": len(valid), "strata": table, "seed": seed}
