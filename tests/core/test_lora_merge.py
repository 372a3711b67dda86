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
