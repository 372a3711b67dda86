"""`agentrl data convert --to verl`: agentrl's rows as verl's parquet, read back by verl's own RLHFDataset, and
turned back into the same row by the agent loop's reader (agentrl.verl.rows)."""

from __future__ import annotations

import json

from agentrl.cli import main


def test_rows_convert_to_verl_parquet_that_verl_reads_and_agentrl_reads_back(tmp_path, tiny_demo):
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from agentrl.verl.rows import item_of, loop_row

    src = tmp_path / "rows.jsonl"
    rows = [{"messages": [{"role": "user", "content": "What is 2 + 3?"}],
             "metadata": {"expected_answer": "5", "expected_tools": [{"name": "add"}]}},
            {"id": "q-17", "prompt": "What is 4 * 5?", "reference_answer": "20", "tools": ["multiply"]}]  # Agent RFT's shape
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "val.parquet"
    assert main(["data", "convert", str(src), "--to", "verl", "--split", "val", "-o", str(out)]) == 0

    tokenizer = AutoTokenizer.from_pretrained(tiny_demo["model_path"])
    config = OmegaConf.create({"prompt_key": "prompt", "max_prompt_length": 256, "filter_overlong_prompts": False,
                               "cache_dir": str(tmp_path / "cache")})
    dataset = RLHFDataset([str(out)], tokenizer, config)
    assert len(dataset) == 2
    first, second = dataset[0], dataset[1]
    assert first["raw_prompt"] == rows[0]["messages"] and first["reward_model"]["ground_truth"] == "5"
    assert second["extra_info"]["split"] == "val"

    row = loop_row(second["raw_prompt"], second["data_source"], second["reward_model"]["ground_truth"],
                   second["extra_info"])
    assert row["id"] == "q-17" and row["split"] == "val"
    item = item_of(row)
    assert item.metadata.expected_answer == "20" and item.metadata.allowed_tools == ["multiply"]


def test_verl_output_must_be_parquet(tmp_path, capsys):
    src = tmp_path / "rows.jsonl"
    src.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}) + "\n")
    assert main(["data", "convert", str(src), "--to", "verl", "-o", str(tmp_path / "x.jsonl")]) != 0
    assert "OUT.parquet" in capsys.readouterr().err
