"""agentrl.verl.checkpoints: verl's checkpoint layout, read from one place."""

from __future__ import annotations

from agentrl.verl import checkpoints as layout


def test_steps_are_read_from_the_folder_names_in_step_order(tmp_path):
    for name in ("global_step_10", "global_step_2", "global_step_x", "global_step_3.tmp", "other"):
        (tmp_path / name).mkdir()
    assert [s for s, _ in layout.steps(tmp_path)] == [2, 10]
    assert layout.steps(tmp_path / "missing") == []


def test_the_tracker_names_the_latest_complete_step(tmp_path):
    assert layout.latest_step(tmp_path) is None
    layout.mark_latest(tmp_path, 7)
    assert layout.latest_step(tmp_path) == 7
    (tmp_path / layout.TRACKER).write_text("half-writ")
    assert layout.latest_step(tmp_path) is None


def test_a_model_needs_its_config_and_weights(tmp_path):
    hf = layout.hf_dir(tmp_path, 3)
    assert hf == tmp_path / "global_step_3" / "actor" / "huggingface" == layout.hf_of(layout.step_dir(tmp_path, 3))
    hf.mkdir(parents=True)
    (hf / "config.json").write_text("{}")
    assert not layout.has_model(hf)
    (hf / "model.safetensors").write_bytes(b"")
    assert layout.has_model(hf)
