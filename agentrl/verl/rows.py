"""verl's dataset rows and agentrl's, both ways.

verl's rows (GSM8K's preprocessing writes these): ``prompt`` (chat messages), ``data_source``,
``reward_model.ground_truth``, ``extra_info`` (``split``, ``index``, ...). agentrl's rows carry themselves whole in
``extra_info.agentrl_row`` (``agentrl.dataset.convert``). Either way the agent loop and ``compute_score`` get the
same row (``agentrl.dataset.loop_record``'s shape) and the same ``item``:

- ``ground_truth`` → ``item.metadata.expected_answer`` (what the presets read) and ``item.reference_answer``
  (what OpenAI grader templates read), unless ``extra_info`` has its own;
- ``extra_info`` → ``item.metadata``; ``data_source`` → ``item.data_source``;
- ``extra_info.split`` of ``val``, ``validation`` or ``test`` marks a validation row in rollouts.jsonl.

    write_parquet(rows, "data/train.parquet")     # `agentrl data convert FILE --to verl -o OUT.parquet`
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

from agentrl.trajectory import Record, make_item

# keys verl adds to extra_info before calling the reward function; they are not the row's metadata
_VERL_KEYS = ("num_turns", "rollout_reward_scores")
_VALIDATION_SPLITS = ("val", "validation", "test")


def plain(value: Any) -> Any:
    """Hydra's DictConfig/ListConfig and numpy's arrays and scalars as plain Python values."""
    try:
        from omegaconf import DictConfig, ListConfig, OmegaConf

        if isinstance(value, (DictConfig, ListConfig)):
            return OmegaConf.to_container(value, resolve=True)
    except ImportError:  # pragma: no cover - omegaconf comes with verl
        pass
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):  # numpy arrays and scalars
        return plain(value.tolist())
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def loop_row(prompt: Any, data_source: Any, ground_truth: Any, extra_info: Any) -> dict:
    """One of verl's rows as the agent loop reads it (``agentrl.dataset.loop_record``'s shape)."""
    extra = plain(extra_info) or {}
    if isinstance(extra.get("agentrl_row"), str):  # a row agentrl converted: the whole row travels with it
        return json.loads(extra["agentrl_row"])
    metadata = {k: v for k, v in extra.items() if k not in _VERL_KEYS}
    ground_truth = plain(ground_truth)
    if ground_truth is not None and ground_truth != "":
        metadata.setdefault("expected_answer", ground_truth)
    fields: dict[str, Any] = {"data_source": data_source}
    reference = metadata.get("reference_answer", metadata.get("expected_answer"))
    if reference is not None:
        fields["reference_answer"] = reference
    split = str(extra.get("split") or "train").lower()
    return {"messages": [dict(m) for m in plain(prompt) or []], "metadata": metadata,
            "id": f"{data_source}:{extra['index']}" if "index" in extra else str(data_source),
            "source": str(data_source), "split": "val" if split in _VALIDATION_SPLITS else "train",
            "fields": fields}


def item_of(row: dict) -> Record:
    """The ``item`` rewards see for a row in ``loop_record``'s shape."""
    return make_item(row["messages"], row.get("metadata"), **row.get("fields", {}), id=row["id"],
                     source=row.get("source"))


def verl_rows(rows: Iterable[tuple[Path, int, dict]], split: str = "train") -> list[dict]:
    """agentrl's checked rows ``(file, line, row)`` in verl's shape: GSM8K's columns, with the whole row in
    ``extra_info.agentrl_row`` so nothing of it is lost (rows a verl user's own loop reads see ``prompt``,
    ``reward_model.ground_truth`` = ``metadata.expected_answer`` and ``extra_info.split``)."""
    from agentrl.dataset import loop_record

    out = []
    for src, lineno, row in rows:
        record = loop_record(src, lineno, row, split=split)
        expected = (row.get("metadata") or {}).get("expected_answer", row.get("reference_answer", ""))
        out.append({
            "prompt": row["messages"],
            "data_source": str(row.get("data_source", "agentrl")),
            "ability": str(row.get("ability", "agent")),
            "reward_model": {"style": "rule", "ground_truth": "" if expected is None else str(expected)},
            "extra_info": {"index": len(out), "split": split,
                           "agentrl_row": json.dumps(record)},
        })
    return out


def write_parquet(rows: list[dict], path: str | Path) -> int:
    """Write rows as one parquet file (what ``data.train_files`` names); returns the row count."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(pa.Table.from_pylist(rows), tmp)
    tmp.replace(path)
    return len(rows)
