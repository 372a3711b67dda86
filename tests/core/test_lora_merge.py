"""A LoRA checkpoint's HF folder is folded into plain weights that equal peft's own merge_and_unload."""

from __future__ import annotations

import torch

from agentrl.lora_merge import merged_state


def test_merged_state_matches_peft_merge_and_unload():
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2)
    model = get_peft_model(Qwen2ForCausalLM(config), LoraConfig(r=4, lora_alpha=16, target_modules="all-linear"))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_()  # peft starts B at 0: make the adapters matter
    peft_names = {k: v.clone() for k, v in model.state_dict().items()}  # what verl writes
    assert any(".base_layer." in k for k in peft_names)
    expected = model.merge_and_unload().state_dict()
    merged = merged_state(peft_names, scale=16 / 4)
    assert set(merged) == set(expected)
    for key, value in expected.items():
        assert torch.allclose(merged[key], value, atol=1e-5), key


def _peft_file(step_folder, seed: int) -> dict:
    """A LoRA step as verl writes it: lora_train_meta.json, then the PEFT-named weights; returns the plain state
    they fold to."""
    import json

    from safetensors.torch import save_file

    torch.manual_seed(seed)
    base, a, b = torch.randn(4, 4), torch.randn(2, 4), torch.randn(4, 2)
    hf = step_folder / "actor" / "huggingface"
    hf.mkdir(parents=True, exist_ok=True)
    (step_folder / "actor" / "lora_train_meta.json").write_text(json.dumps({"r": 2, "lora_alpha": 4}))
    (hf / "config.json").write_text("{}")
    save_file({"base_model.model.layer.q_proj.base_layer.weight": base,
               "base_model.model.layer.q_proj.lora_A.default.weight": a,
               "base_model.model.layer.q_proj.lora_B.default.weight": b}, str(hf / "model.safetensors"))
    return {"layer.q_proj.weight": base + 2.0 * (b @ a)}


def _weights(step_folder) -> dict:
    from safetensors.torch import load_file

    return load_file(str(step_folder / "actor" / "huggingface" / "model.safetensors"))


def test_a_step_saved_again_by_a_resumed_run_is_merged_again(tmp_path):
    """An attempt stopped while verl saved step 2 leaves that folder past the tracker (step 1). The watcher leaves
    it alone; the resumed run trains step 2 again and writes it over; that save is folded in too."""
    from agentrl.metrics import check_checkpoint

    ckpt = tmp_path / "checkpoints"
    first = _peft_file(ckpt / "global_step_1", seed=1)
    _peft_file(ckpt / "global_step_2", seed=2)  # the stopped save: no tracker for it
    (ckpt / "latest_checkpointed_iteration.txt").write_text("1")
    assert check_checkpoint(tmp_path)["step"] == 1
    assert torch.allclose(_weights(ckpt / "global_step_1")["layer.q_proj.weight"], first["layer.q_proj.weight"])
    assert any(".lora_A." in k for k in _weights(ckpt / "global_step_2"))  # not touched past the tracker

    again = _peft_file(ckpt / "global_step_2", seed=3)  # the resumed run's own save of step 2
    (ckpt / "latest_checkpointed_iteration.txt").write_text("2")
    assert check_checkpoint(tmp_path)["step"] == 2
    got = _weights(ckpt / "global_step_2")
    assert set(got) == set(again) and torch.allclose(got["layer.q_proj.weight"], again["layer.q_proj.weight"])


def test_a_file_written_over_an_earlier_merge_is_merged_and_its_original_kept(tmp_path):
    from safetensors.torch import load_file

    from agentrl.lora_merge import merge_lora_checkpoint

    step = tmp_path / "global_step_2"
    _peft_file(step, seed=1)
    assert merge_lora_checkpoint(step / "actor")
    assert not merge_lora_checkpoint(step / "actor")  # merged already: nothing to do
    again = _peft_file(step, seed=2)
    assert merge_lora_checkpoint(step / "actor")
    assert torch.allclose(_weights(step)["layer.q_proj.weight"], again["layer.q_proj.weight"])
    hf = step / "actor" / "huggingface"
    kept = load_file(str(hf / "peft_model.safetensors.orig"))
    assert any(".lora_B." in k for k in kept) and sorted(p.name for p in hf.iterdir()) == [
        "config.json", "model.safetensors", "peft_model.safetensors.orig"]
