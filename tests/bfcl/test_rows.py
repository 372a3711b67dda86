"""``agentrl data convert --from bfcl``: bfcl-eval's own rows, read through the installed plugin."""

import json
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from agentrl import plugins
from agentrl.workflow.convert import ConvertError, convert_from

import agentrl_bfcl.plugin
from agentrl_bfcl import bfcl
from agentrl_bfcl.rows import rows, split_of

DATA = Path(__import__("bfcl_eval").__file__).parent / "data"


def _file_rows(category, folder=DATA):
    """The category's rows straight from bfcl-eval's data file, one JSON object a line."""
    return [json.loads(line) for line in (folder / f"BFCL_v4_{category}.json").read_text().splitlines() if line.strip()]


def test_entry_point_registers_the_converter():
    eps = {ep.name: ep for ep in metadata.entry_points(group="agentrl")}
    assert eps["bfcl"].value == "agentrl_bfcl.plugin" and eps["bfcl"].dist.name == "agentrl-bfcl"
    registered = plugins.dataset_converters(plugins.new_plugin_manager(eps["bfcl"].load()))
    assert list(registered) == ["bfcl", "bfcl-answers"] and registered["bfcl"].value is rows


@pytest.mark.parametrize("category", bfcl.SINGLE_TURN)
def test_every_row_of_every_single_turn_category(category):
    source = _file_rows(category)
    made = list(rows(category))
    assert [r["id"] for r in made] == [r["id"] for r in source]
    for row, entry in zip(made, source):
        assert row["messages"] == entry["question"][0]
        names = [t["function"]["name"] for t in row["metadata"]["declared_tools"]]
        assert names == [re.sub(r"\.", "_", f["name"]) for f in entry["function"]]  # as BFCL's FC handlers offer them
        assert all(t["type"] == "function" and t["function"]["parameters"]["type"] == "object"
                   for t in row["metadata"]["declared_tools"])
        assert row["metadata"]["bfcl"]["functions"] == entry["function"]  # unhinted, as BFCL's evaluation reads it
        assert row["metadata"]["bfcl_category"] == category and row["metadata"]["split"] == split_of(row["id"])
        if category in bfcl.RELEVANCE_CATEGORIES:
            assert row["metadata"]["bfcl"]["possible_answer"] is None
    if category not in bfcl.RELEVANCE_CATEGORIES:
        answers = _file_rows(category, DATA / "possible_answer")
        assert [r["metadata"]["bfcl"]["possible_answer"] for r in made] == [a["ground_truth"] for a in answers]


def test_split_by_id_is_a_partition_and_about_a_fifth():
    every = [r["id"] for r in rows("simple_python")]
    train = [r["id"] for r in rows("simple_python:train")]
    held = [r["id"] for r in rows("simple_python:heldout")]
    assert sorted(train + held) == sorted(every) and not set(train) & set(held)
    assert 0.12 < len(held) / len(every) < 0.28
    assert split_of("simple_python_2") == "heldout"  # sha256("simple_python_2") % 5 == 0, fixed forever


@pytest.mark.parametrize("category", bfcl.MULTI_TURN)
def test_every_row_of_every_multi_turn_category(category):
    source = _file_rows(category)
    answers = _file_rows(category, DATA / "possible_answer")
    made = list(rows(category))
    assert [r["id"] for r in made] == [r["id"] for r in source] == [a["id"] for a in answers]
    for row, entry, answer in zip(made, source, answers):
        meta = row["metadata"]
        assert row["messages"] == entry["question"][0]
        assert len(meta["user_turns"]) == len(entry["question"]) - 1 == len(answer["ground_truth"]) - 1
        docs = {f["name"]: f for f in meta["bfcl"]["functions"]}
        held = entry.get("missed_function", {})
        assert set(meta["allowed_tools"]) == set(docs) and not set(docs) & {n for ns in held.values() for n in ns}
        for n, (turn, question) in enumerate(zip(meta["user_turns"], entry["question"][1:]), start=1):
            if str(n) in held:  # BFCL's empty turn: the held-back docs, offered from here on
                assert question == [] and turn["tools"] == held[str(n)]
                assert turn["messages"][0]["content"].endswith("What about now?")
                assert all(f"'name': '{name}'" in turn["messages"][0]["content"] for name in held[str(n)])
            else:
                assert turn == question
        assert meta["bfcl"]["initial_config"] == entry["initial_config"]
        (setup,) = meta["tool_setup"]  # the environment server's state, loaded before the first turn
        assert setup == {"name": "bfcl_load_scenario", "arguments": {
            "id": entry["id"], "initial_config": entry["initial_config"], "involved_classes": entry["involved_classes"],
            "long_context": category == "multi_turn_long_context"}}
        assert meta["bfcl"]["involved_classes"] == entry["involved_classes"]
        assert meta["bfcl"]["ground_truth"] == answer["ground_truth"]
        assert meta["bfcl_category"] == category and meta["split"] == split_of(row["id"])
    assert (category == "multi_turn_miss_func") == any(e.get("missed_function") for e in source)


def test_unknown_categories_fail_before_anything_is_written(tmp_path):
    plugins.reset_plugin_manager(plugins.new_plugin_manager(agentrl_bfcl.plugin))
    try:
        with pytest.raises(ConvertError, match=r"unknown BFCL category 'simple'.*simple_python"):
            convert_from("bfcl", "simple", str(tmp_path / "x.jsonl"))
        with pytest.raises(ConvertError, match=r"unknown BFCL category 'multi_turn'.*multi_turn_base"):
            convert_from("bfcl", "multi_turn", str(tmp_path / "x.jsonl"))
        with pytest.raises(ConvertError, match=r"'web_search_base' is not supported by agentrl-bfcl: .*SerpAPI.*"
                                               r"supported categories are simple_python, simple_java, simple_javascript"):
            convert_from("bfcl", "web_search_base", str(tmp_path / "x.jsonl"))
        with pytest.raises(ConvertError, match="simple_python:train or simple_python:heldout"):
            convert_from("bfcl", "simple_python:test", str(tmp_path / "x.jsonl"))
        with pytest.raises(plugins.PluginError, match="Did you mean 'bfcl'"):
            convert_from("bfc", "simple_python", str(tmp_path / "x.jsonl"))
        assert not (tmp_path / "x.jsonl").exists()
    finally:
        plugins.reset_plugin_manager()


def test_every_bfcl_category_is_supported_or_refused_with_its_reason():
    from bfcl_eval.constants.category_mapping import ALL_CATEGORIES

    supported = bfcl.SINGLE_TURN + bfcl.MULTI_TURN
    assert sorted(supported + tuple(bfcl.UNSUPPORTED)) == sorted(ALL_CATEGORIES)  # bfcl-eval's own list
    assert not set(supported) & set(bfcl.UNSUPPORTED)


@pytest.mark.parametrize("category", ["simple_java", "simple_javascript"])
def test_java_and_javascript_rows_offer_every_argument_as_source_text(category):
    hint = {"simple_java": "Java 8 SDK syntax.", "simple_javascript": "JavaScript syntax."}[category]
    documented = set()
    for row in rows(category):
        for tool in row["metadata"]["declared_tools"]:
            assert tool["function"]["description"].endswith("Note that the provided function is in " + hint)
            assert {p["type"] for p in tool["function"]["parameters"]["properties"].values()} == {"string"}
        documented |= {p["type"] for f in row["metadata"]["bfcl"]["functions"]
                       for p in f["parameters"]["properties"].values()}
    # the checker reads the documented types, which the rows keep for it
    assert {"simple_java": {"boolean", "long", "HashMap", "ArrayList", "Array"},
            "simple_javascript": {"Boolean", "dict", "array", "float"}}[category] <= documented


def test_the_command_line_writes_checked_rows(tmp_path):
    out = tmp_path / "bfcl" / "live_simple_heldout.jsonl"
    agentrl = Path(sys.executable).parent / "agentrl"
    done = subprocess.run([agentrl, "data", "convert", "--from", "bfcl", "live_simple:heldout", "-o", out],
                          capture_output=True, text=True, check=True)
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert f"converted {len(written)} rows from bfcl live_simple:heldout" in done.stdout
    assert written and all(r["metadata"]["split"] == "heldout" for r in written)
    check = subprocess.run([agentrl, "data", "check", out], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    listed = subprocess.run([agentrl, "plugins"], capture_output=True, text=True, check=True).stdout
    assert re.search(r"converter\s+bfcl\s+bfcl\s+agentrl-bfcl", listed)
    for kind, name in (("reward", "bfcl_ast"), ("reward", "bfcl_multi_turn"), ("tool server", "bfcl")):
        assert re.search(rf"{kind}\s+{name}\s+bfcl\s+agentrl-bfcl", listed), (kind, name)
