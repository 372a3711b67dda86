"""``agentrl data check | split | convert``."""

from __future__ import annotations

import json
from collections import Counter


from agentrl.cli import main


def _write(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def _row(id_, q="What is 2 + 2?", **meta):
    return {"id": id_, "messages": [{"role": "user", "content": q}], "metadata": meta}


def test_check_reports_every_problem_with_file_and_line(tmp_path, demo_config, capsys):
    a = _write(tmp_path / "a.jsonl", [
        _row("x", expected_answer="4", expected_tools=[{"name": "add"}]),
        '{"messages": [{"role": "user", "content": "hi"}',                                   # line 2: bad JSON
        {"id": "y", "messages": [{"role": "robot", "content": "hi"}]},                         # line 3: role
        _row("z", q="   ", expected_answer="1", expected_tools=[{"name": "add"}]),           # line 4: empty prompt
        {"id": "w", "prompt": "no messages"},                                                  # line 5: schema
    ])
    b = _write(tmp_path / "b.jsonl", [
        _row("x", expected_answer="4", expected_tools=[{"name": "add"}]),                    # dup of a.jsonl:1
        _row("v", q="What is 2 + 5?", expected_tools=[{"name": "add"}]),                      # math does not apply
        _row("u", q="What is 2 + 6?", task="none of the rewards' keys"),                       # no reward applies
    ])
    code = main(["data", "check", str(a), str(b), "--config", str(demo_config), "--json"])
    result = json.loads(capsys.readouterr().out)
    assert code == 1 and not result["ok"]
    where: dict[str, str] = {}
    for p in result["problems"]:  # a row can have several problems
        where[p["where"]] = where.get(p["where"], "") + " | " + p["problem"]
    assert "not valid JSON" in where[f"{a}:2"]
    assert "role" in where[f"{a}:3"] and "'robot'" in where[f"{a}:3"]
    assert "empty prompt" in where[f"{a}:4"]
    assert "no \"messages\" key" in where[f"{a}:5"]
    assert f"duplicate id 'x' (first at {a}:1)" in where[f"{b}:1"]
    assert f"{b}:2" not in where  # tool_use still scores it: a warning, not a problem
    assert any(w["where"] == f"{b}:2" and "'math' reads metadata.expected_answer" in w["problem"]
               for w in result["warnings"])
    assert "no configured reward applies" in where[f"{b}:3"]
    summary = result["summary"]
    assert summary["rows"] == 5 and summary["metadata"]["expected_tools"]["values"] == {"add": 4}
    # prompt lengths with the calculator's real tool schemas, in the config's model's tokens
    assert summary["prompt_tokens"]["with_tool_schemas"] and summary["prompt_tokens"]["min"] > 100


def test_check_flags_prompts_longer_than_max_prompt_length(tmp_path, demo_config, capsys):
    import yaml

    cfg = yaml.safe_load(demo_config.read_text())
    cfg["agentrl"]["max_prompt_length"] = 64
    short = tmp_path / "short.yaml"
    short.write_text(yaml.safe_dump(cfg))
    data = _write(tmp_path / "d.jsonl", [_row("a", expected_answer="4", expected_tools=[{"name": "add"}])])
    assert main(["data", "check", str(data), "--config", str(short)]) == 0  # a warning: training still runs
    out = capsys.readouterr().out
    assert f"{data}:1: warning: prompt is" in out and "over agentrl.max_prompt_length=64" in out


def test_check_counts_a_rows_declared_tools_in_its_prompt_length(tmp_path, demo_config, capsys):
    """A row's metadata.declared_tools (BFCL's rows, OpenAI function-calling rows) reach the prompt as the agent
    loop offers them: a run that serves no tools still has their schemas in every prompt."""
    import yaml

    cfg = yaml.safe_load(demo_config.read_text())
    cfg["agentrl"].pop("tools", None)
    cfg["agentrl"]["max_prompt_length"] = 120
    bare = tmp_path / "bare.yaml"
    bare.write_text(yaml.safe_dump(cfg))
    schema = {"type": "function", "function": {
        "name": "get_weather", "description": "The weather forecast for a city, by day, in the unit asked. " * 4,
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "a city name"},
                                                        "unit": {"type": "string", "enum": ["c", "f"]}},
                       "required": ["city"]}}}
    plain = _row("a", expected_answer="4", expected_tools=[{"name": "add"}])
    declared = {**_row("b", q="What is 2 + 3?", expected_answer="5", expected_tools=[{"name": "add"}]),
                "metadata": {"expected_answer": "5", "expected_tools": [{"name": "add"}], "declared_tools": [schema]}}
    data = _write(tmp_path / "d.jsonl", [plain, declared])
    assert main(["data", "check", str(data), "--config", str(bare), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    tokens = result["summary"]["prompt_tokens"]
    assert tokens["with_tool_schemas"] and tokens["min"] <= 120 < tokens["max"], tokens
    over = [w["where"] for w in result["warnings"] if "over agentrl.max_prompt_length=120" in w["problem"]]
    assert over == [f"{data}:2"], result["warnings"]


def test_clean_file_passes(tmp_path, capsys):
    data = _write(tmp_path / "ok.jsonl", [_row("a", task_type="sum"), _row("b", q="What is 3 + 3?", task_type="sum")])
    assert main(["data", "check", str(data)]) == 0
    assert "no problems in 2 rows" in capsys.readouterr().out


def test_split_is_stratified_seeded_and_loses_nothing(tmp_path, capsys):
    rows = [_row(f"r{i}", task_type=t, difficulty=d) for i, (t, d) in enumerate(
        [(t, d) for t in ("lookup", "calc", "compare") for d in ("easy", "hard") for _ in range(10)])]
    src = _write(tmp_path / "all.jsonl", rows)
    assert main(["data", "split", str(src), "--val", "0.2", "--stratify", "task_type,difficulty",
                 "--seed", "3", "-o", str(tmp_path / "s1"), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    train = [json.loads(line) for line in (tmp_path / "s1" / "train.jsonl").read_text().splitlines()]
    val = [json.loads(line) for line in (tmp_path / "s1" / "val.jsonl").read_text().splitlines()]
    assert sorted(r["id"] for r in train + val) == sorted(r["id"] for r in rows)
    strata = Counter((r["metadata"]["task_type"], r["metadata"]["difficulty"]) for r in val)
    assert strata == {(t, d): 2 for t in ("lookup", "calc", "compare") for d in ("easy", "hard")}
    assert result["val_rows"] == 12
    main(["data", "split", str(src), "--val", "0.2", "--stratify", "task_type,difficulty", "--seed", "3",
          "-o", str(tmp_path / "s2")])
    assert (tmp_path / "s2" / "val.jsonl").read_text() == (tmp_path / "s1" / "val.jsonl").read_text()
    main(["data", "split", str(src), "--val", "0.2", "--stratify", "task_type", "--seed", "4", "-o", str(tmp_path / "s3")])
    assert (tmp_path / "s3" / "val.jsonl").read_text() != (tmp_path / "s1" / "val.jsonl").read_text()


def test_split_rejects_a_bad_share(tmp_path, capsys):
    src = _write(tmp_path / "all.jsonl", [_row("a")])
    assert main(["data", "split", str(src), "--val", "1.5", "-o", str(tmp_path / "o")]) == 2
    assert "--val 1.5" in capsys.readouterr().err


# The row shape of the agent-RFT tutorial (tensorops.ai, "practical guide to agent reinforcement fine-tuning"),
# as listed in the issue: id, prompt, reference_answer, expected{...}, tools, metadata{task_type, difficulty}.
TUTORIAL_ROW = {"id": "q-17", "prompt": "What was ACME's 2023 revenue in USD?", "reference_answer": "4.2e9",
                "expected": {"tolerance_rel": 0.01, "evidence_path": "filings/acme-2023.md",
                             "must_use_tools": ["search", "read"]},
                "tools": ["search", "list", "read"], "metadata": {"task_type": "lookup", "difficulty": "easy"}}


def test_convert_tutorial_rows(tmp_path, capsys):
    src = _write(tmp_path / "tut.jsonl", [TUTORIAL_ROW, dict(TUTORIAL_ROW, id="q-18", tools=[
        {"type": "function", "function": {"name": "search", "parameters": {}}}])])
    out = tmp_path / "agentrl.jsonl"
    assert main(["data", "convert", str(src), "-o", str(out)]) == 0
    first, second = [json.loads(line) for line in out.read_text().splitlines()]
    assert first == {"id": "q-17", "messages": [{"role": "user", "content": TUTORIAL_ROW["prompt"]}],
                     "metadata": {"expected_answer": "4.2e9", "reference_answer": "4.2e9", "tolerance_rel": 0.01, "tolerance": 0.01,
                                  "evidence_path": "filings/acme-2023.md",
                                  "expected_tools": [{"name": "search"}, {"name": "read"}],
                                  "allowed_tools": ["search", "list", "read"], "task_type": "lookup",
                                  "difficulty": "easy"}}
    assert second["metadata"]["allowed_tools"] == ["search"]
    capsys.readouterr()
    assert main(["data", "check", str(out)]) == 0


def test_convert_openai_rft_rows_and_say_what_changed(tmp_path, capsys):
    """OpenAI RFT rows: messages, and the grader's fields (reference_answer, ...) at the top level."""
    rft = {"messages": [{"role": "user", "content": "What was Acme's Q3 2024 revenue?"}],
           "reference_answer": "$842 million", "company": "Acme"}
    src = _write(tmp_path / "rft.jsonl", [rft, _row("kept", expected_answer="4")])
    out = tmp_path / "agentrl.jsonl"
    assert main(["data", "convert", str(src), "-o", str(out)]) == 0
    capsys.readouterr()
    first, second = [json.loads(line) for line in out.read_text().splitlines()]
    assert first == {"messages": rft["messages"], "metadata": {"expected_answer": "$842 million",
                                                             "reference_answer": "$842 million", "company": "Acme"}}
    assert second == _row("kept", expected_answer="4")
    assert main(["data", "convert", str(src), "-o", str(out)]) == 0
    assert "(1 changed; 1 already agentrl rows, copied as they are)" in capsys.readouterr().out


def test_check_finds_duplicate_rows_train_val_overlap_and_unknown_tool_names(tmp_path, demo_config, capsys):
    train = _write(tmp_path / "train.jsonl", [
        _row("a", q="What is 1 + 1?", expected_answer="2", expected_tools=[{"name": "add"}]),
        _row("b", q="What is 1 + 1?", expected_answer="2", expected_tools=[{"name": "add"}]),   # a copy of line 1
        _row("c", q="What is 3 * 3?", expected_answer="9", expected_tools=[{"name": "mul"}]),   # no such tool
        _row("d", q="What is 5 - 1?", expected_answer="4", allowed_tools=["subtract", "calculator.modulo"]),
    ])
    val = _write(tmp_path / "val.jsonl", [
        _row("e", q="What is 3 * 3?", expected_answer="9", expected_tools=[{"name": "multiply"}]),  # train:3's prompt
    ])
    assert main(["data", "check", str(train), str(val), "--config", str(demo_config), "--json"]) == 1
    where = {p["where"]: p["problem"] for p in json.loads(capsys.readouterr().out)["problems"]}
    assert where[f"{train}:2"] == f"exact duplicate of the row at {train}:1; drop one"
    assert where[f"{val}:1"].startswith(f"the same prompt is at {train}:3: a prompt in both files leaks")
    assert "metadata expected_tools 'mul': no tool server offers it (they offer: add, divide, " in where[f"{train}:3"]
    assert "metadata allowed_tools 'calculator.modulo': no tool server offers it" in where[f"{train}:4"]
    assert f"{train}:1" not in where and "subtract'" not in where[f"{train}:4"]


def test_train_stops_before_ray_on_a_tool_name_no_server_offers(tmp_path, demo_config, capsys):
    import yaml

    cfg = yaml.safe_load(demo_config.read_text())
    data = _write(tmp_path / "train.jsonl", [_row(f"r{i}", expected_answer="2", expected_tools=[{"name": "sum"}])
                                             for i in range(8)])
    cfg["agentrl"].update(train_data=str(data), val_data=None, run_dir=str(tmp_path / "run"))
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(cfg))
    assert main(["train", str(config), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "8 row(s) name tools no server offers" in err and f"{data}:1: metadata expected_tools 'sum'" in err, err


def test_convert_refuses_bad_rows_and_writes_nothing(tmp_path, capsys):
    src = _write(tmp_path / "tut.jsonl", [TUTORIAL_ROW, {"id": "q-2", "reference_answer": "1"}, "not json"])
    out = tmp_path / "agentrl.jsonl"
    assert main(["data", "convert", str(src), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{src}:2: no \"prompt\"" in err and f"{src}:3: not valid JSON" in err
    assert not out.exists()


def _peer_rows(layout):
    from pathlib import Path

    data = Path(__file__).parents[1] / "rewards" / "data" / "coding_peer_rows.jsonl"
    return [c for c in map(json.loads, data.read_text().splitlines()) if c["layout"] == layout]


def test_convert_deepcoder_jsonl_and_verl_parquet_keeps_tests_in_their_layout(tmp_path, capsys):
    import datetime

    import pyarrow as pa
    import pyarrow.parquet as pq

    from agentrl.rewards import load_reward

    deepcoder = _peer_rows("deepcoder")
    _write(tmp_path / "deepcoder.jsonl", [c["row"] for c in deepcoder])
    verl = _peer_rows("verl")
    when = datetime.datetime(2024, 8, 3, 12, 0)  # parquet has dates; JSON holds them as text
    pq.write_table(pa.Table.from_pylist([dict(c["row"], contest_date=when) for c in verl]), tmp_path / "verl.parquet")
    for name, cases in (("deepcoder.jsonl", deepcoder), ("verl.parquet", verl)):
        out = tmp_path / (name + ".agentrl.jsonl")
        assert main(["data", "convert", str(tmp_path / name), "-o", str(out)]) == 0
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        assert len(rows) == len(cases)
        assert name == "deepcoder.jsonl" or rows[0]["metadata"]["contest_date"] == "2024-08-03 12:00:00"
        for row, case in zip(rows, cases):
            for key in ("tests", "reward_model"):  # kept as published: JSON text stays JSON text
                if key in case["row"]:
                    assert row["metadata"][key] == case["row"][key]
            item = {"messages": row["messages"], "metadata": row["metadata"]}
            answer = {"final_answer": f"```python\n{case['correct']}\n```"}
            assert load_reward("coding", timeout=120)(answer, item) == 1.0
    capsys.readouterr()
    assert main(["data", "check", str(tmp_path / "deepcoder.jsonl.agentrl.jsonl"), str(tmp_path / "verl.parquet.agentrl.jsonl"),
                 "--json"]) == 0
    coding = json.loads(capsys.readouterr().out)["summary"]["coding_tests"]
    assert coding["deepcoder"] == {"rows": 6, "tests": 19, "min": 1, "median": 2, "max": 7}
    assert coding["verl"]["rows"] == 4 and coding["verl"]["tests"] == 2 + 3 + 2 + 11


def test_check_says_which_coding_tests_cannot_be_read_and_which_rows_coding_scores(tmp_path, demo_config, capsys):
    import yaml

    cfg = yaml.safe_load(demo_config.read_text())
    cfg["agentrl"]["rewards"] = [{"name": "coding"}]
    config = tmp_path / "coding.yaml"
    config.write_text(yaml.safe_dump(cfg))
    data = _write(tmp_path / "c.jsonl", [
        _row("a", input_output=json.dumps({"inputs": ["1\n"], "outputs": ["1\n"]})),   # TACO: scored
        _row("b", tests=['{"inputs": [1]}']),                                               # JSON text in an assert list
        _row("c", unit_tests=[{"in": 1}]),                                                  # no known layout
        _row("d", expected_answer="4"),                                                     # coding does not apply
    ])
    assert main(["data", "check", str(data), "--config", str(config), "--json"]) == 1
    result = json.loads(capsys.readouterr().out)
    where = {}
    for p in result["problems"]:
        where[p["where"]] = where.get(p["where"], "") + " | " + p["problem"]
    assert f"{data}:1" not in where
    assert "not Python test code" in where[f"{data}:2"]
    assert "Known layouts: open-r1" in where[f"{data}:3"]
    assert "no configured reward applies" in where[f"{data}:4"]
    assert result["summary"]["coding_tests"] == {"taco": {"rows": 1, "tests": 1, "min": 1, "median": 1, "max": 1}}
