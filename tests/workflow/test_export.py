"""``agentrl export``: a standalone folder plain transformers loads and generates from; LoRA merged.

verl's checkpoint layout is reproduced from what its FSDP checkpoint manager writes (a full fine-tune:
``actor/huggingface`` is a plain model; LoRA: the same folder holds peft-named tensors, and verl
records rank and alpha in ``lora_train_meta.json``); training a real run here would take minutes.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import torch
import yaml

from agentrl.cli import main


def _run_dir(tmp_path: Path, tiny_demo: dict, step: int = 4) -> tuple[Path, Path]:
    run = tmp_path / "runs" / "t"
    hf = run / "checkpoints" / f"global_step_{step}" / "actor" / "huggingface"
    shutil.copytree(tiny_demo["model_path"], hf)
    (hf / "chat_template.jinja").unlink()  # verl's copy may lack it: export takes the base model's
    (run / "data").mkdir()
    shutil.copy(tiny_demo["val_path"], run / "data" / "train.jsonl")
    (run / "config.yaml").write_text(yaml.safe_dump({"agentrl": {
        "name": "t", "model": tiny_demo["model_path"], "rewards": [{"name": "math", "weight": 1.0}],
        "tools": ["calculator"], "batch_size": 2, "agent": {"tool_parser": "hermes"}}}))
    (run / "metrics.jsonl").write_text("".join(json.dumps({"step": s, "reward_mean": s / 10}) + "\n" for s in (1, 4, 5)))
    (run / "checkpoint_status.json").write_text(json.dumps({"complete": True, "step": step}))
    return run, hf


def _generate(folder: Path) -> list[int]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder)
    ids = tok.apply_chat_template([{"role": "user", "content": "What is 2 + 3?"}], add_generation_prompt=True,
                                  return_tensors="pt", return_dict=True)
    out = model.generate(**ids, max_new_tokens=8, do_sample=False)
    return out[0, ids["input_ids"].shape[1]:].tolist()


def test_export_full_finetune(tmp_path, tiny_demo, capsys):
    run, hf = _run_dir(tmp_path, tiny_demo)
    out = tmp_path / "exported"
    assert main(["export", str(run), str(out)]) == 0
    text = capsys.readouterr().out
    assert f"vllm serve {out} --served-model-name t --enable-auto-tool-choice --tool-call-parser hermes" in text
    assert (out / "chat_template.jinja").is_file() and (out / "tokenizer.json").is_file()
    assert len(_generate(out)) >= 1
    card = (out / "README.md").read_text()
    digest = hashlib.sha256((run / "data" / "train.jsonl").read_bytes()).hexdigest()
    assert digest in card and "name: math" in card and "| reward_mean | 0.4 |" in card  # metrics at step 4, not 5
    info = json.loads((out / "agentrl_export.json").read_text())
    assert info["step"] == 4 and not info["lora_merged"]
    assert main(["export", str(run), str(out)]) == 2  # never overwrites without --force
    assert "not empty" in capsys.readouterr().err


def test_export_merges_a_lora_checkpoint(tmp_path, tiny_demo, capsys):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    run, hf = _run_dir(tmp_path, tiny_demo)
    base = AutoModelForCausalLM.from_pretrained(tiny_demo["model_path"])
    peft_model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in peft_model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)  # a trained adapter: B is no longer zero
    plain = AutoModelForCausalLM.from_pretrained(tiny_demo["model_path"])
    for f in hf.glob("*.safetensors"):
        f.unlink()
    plain.save_pretrained(hf, state_dict=peft_model.state_dict())  # what verl's save_pretrained writes
    (hf.parent / "lora_train_meta.json").write_text(json.dumps({"r": 4, "lora_alpha": 8, "task_type": "CAUSAL_LM"}))
    out = tmp_path / "merged"
    assert main(["export", str(run), str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["lora_merged"] is True
    merged = AutoModelForCausalLM.from_pretrained(out)
    assert not any("lora" in k for k in merged.state_dict())
    x = torch.tensor([[1, 5, 9, 13, 17]])
    with torch.no_grad():
        expected, got, untouched = peft_model(x).logits, merged(x).logits, plain(x).logits
    assert torch.allclose(expected, got, atol=1e-4)
    assert not torch.allclose(untouched, got, atol=1e-3)  # the adapter changed the model
    assert len(_generate(out)) >= 1


def test_export_of_a_folder_that_is_not_a_run(tmp_path, capsys):
    assert main(["export", str(tmp_path), str(tmp_path / "o")]) == 2
    assert "is not a run directory" in capsys.readouterr().err


def test_export_of_a_lora_run_already_merged_in_place(tmp_path, tiny_demo, capsys):
    """A LoRA run whose checkpoint was merged into plain weights when it was saved: copied as it is."""
    run, hf = _run_dir(tmp_path, tiny_demo)
    (hf.parent / "lora_train_meta.json").write_text(json.dumps({"r": 4, "lora_alpha": 8}))
    out = tmp_path / "exported"
    assert main(["export", str(run), str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["lora_merged"] is True
    assert not (hf.parent.parent / "merged").exists()
    assert len(_generate(out)) >= 1


def test_export_config_dtype_is_the_weights_and_verl_leftovers_stay_behind(tmp_path, tiny_demo, capsys):
    """A LoRA checkpoint merged in place, as verl leaves it: float32 weights beside a config.json that says
    bfloat16 (the base model's), and verl's original file kept as peft_model.safetensors.orig."""
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    run, hf = _run_dir(tmp_path, tiny_demo)
    (hf.parent / "lora_train_meta.json").write_text(json.dumps({"r": 4, "lora_alpha": 8}))
    (hf / "peft_model.safetensors.orig").write_bytes((hf / "model.safetensors").read_bytes())
    config = json.loads((hf / "config.json").read_text())
    key = "dtype" if "dtype" in config else "torch_dtype"
    config[key] = "bfloat16"
    (hf / "config.json").write_text(json.dumps(config))
    assert {t.dtype for t in load_file(hf / "model.safetensors").values()} == {torch.float32}
    out = tmp_path / "exported"
    assert main(["export", str(run), str(out)]) == 0
    assert not (out / "peft_model.safetensors.orig").exists()
    assert json.loads((out / "config.json").read_text())[key] == "float32"
    assert AutoModelForCausalLM.from_pretrained(out).dtype == torch.float32
