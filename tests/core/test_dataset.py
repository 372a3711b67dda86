"""Dataset rows: checked with file:line, converted to verl's format without losing anything."""

from __future__ import annotations

import json

import pytest

from agentrl.dataset import DatasetError, convert, read_rows

GOOD = {"messages": [{"role": "user", "content": "What is 2 + 2?"}], "metadata": {"expected_answer": "4"}}


@pytest.mark.parametrize("line, needle", [
    ("{not json", "not valid JSON"),
    (json.dumps({"prompt": "hi"}), 'no "messages" key'),
    (json.dumps({"messages": []}), "non-empty list"),
    (json.dumps({"messages": [{"role": "robot", "content": "x"}]}), "messages[0].role is 'robot'"),
    (json.dumps({"messages": [{"role": "user", "content": 3}]}), "content must be a string"),
    (json.dumps({"messages": [{"role": "system", "content": "x"}]}), "no user message"),
    (json.dumps({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}),
     "last message is the assistant's"),
    (json.dumps({**GOOD, "metadata": [1]}), '"metadata" must be an object'),
    ("[1, 2]", "must be a JSON object"),
])
def test_bad_rows_name_file_and_line(tmp_path, line, needle):
    path = tmp_path / "train.jsonl"
    path.write_text(json.dumps(GOOD) + "\n\n" + line + "\n")
    with pytest.raises(DatasetError) as err:
        list(read_rows(path))
    assert f"{path}:3" in str(err.value) and needle in str(err.value)


def test_missing_file(tmp_path):
    with pytest.raises(DatasetError, match="does not exist"):
        list(read_rows(tmp_path / "nope.jsonl"))


def test_convert_keeps_the_whole_row(tmp_path):
    src = tmp_path / "train.jsonl"
    rows = [GOOD, {"id": "q7", "messages": [{"role": "user", "content": "x"}], "metadata": {"rubric": {"a": [1]}}}]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert convert(src, tmp_path / "out" / "train.jsonl") == 2
    out = [json.loads(line) for line in (tmp_path / "out" / "train.jsonl").read_text().splitlines()]
    assert [o["prompt"] for o in out] == [r["messages"] for r in rows]
    assert all(o["agent_name"] == "agentrl" for o in out)
    # verl needs identical extra_info keys on every row: metadata of any shape travels as one string
    assert {tuple(sorted(o["extra_info"])) for o in out} == {("agentrl_row", "index")}
    back = [json.loads(o["extra_info"]["agentrl_row"]) for o in out]
    assert back[0]["metadata"] == GOOD["metadata"] and back[1]["metadata"] == rows[1]["metadata"]
    assert back[1]["id"] == "q7" and back[0]["source"] == f"{src}:1"


def test_truncated_row_says_it_is_cut_off(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('{"messages": [{"role": "user", "content": "hi"}]}\n{"messages": [{"role": "user", "con\n')
    with pytest.raises(DatasetError) as err:
        list(read_rows(path))
    text = str(err.value)
    assert f"{path}:2" in text and "ends before" in text and "column 1" not in text
