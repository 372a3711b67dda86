"""bfcl-eval's own modules, reached without its model registry or any provider SDK.

    from agentrl_bfcl.bfcl import ast_checker, MODEL
    ast_checker(functions, [{"math_factorial": {"number": 5}}], possible_answer, Language.PYTHON, "simple_python", MODEL)

bfcl-eval's AST checker (``bfcl_eval.eval_checker.ast_eval.ast_checker``) imports ``MODEL_CONFIG_MAPPING`` from
``bfcl_eval.constants.model_config``, which imports a handler for every model on the leaderboard and through them
every provider SDK (anthropic, cohere, mistralai, google-genai, ...). The checker reads one field of it:
``MODEL_CONFIG_MAPPING[model_name].underscore_to_dot``, whether the model's tool names had "." replaced by "_".
So before the checker is imported, :func:`_stand_in_model_config` puts a module of that name in ``sys.modules``
holding one entry, :data:`MODEL` (``underscore_to_dot=True``: agentrl offers BFCL's functions under names with
"." replaced by "_", exactly as bfcl-eval's OpenAI-style function-calling handlers do). The same entry carries
what bfcl-eval's runner (``eval_runner.runner``: handler, score files, leaderboard CSVs) reads of a model, so
that runner scores an exported agentrl eval file as one more local model (:mod:`agentrl_bfcl.runner`). Where the real module is
already imported (the SDKs are installed and something imported it), the entry is added to its mapping instead.
Nothing else of bfcl-eval is replaced: the checker, the data loaders and ``convert_to_tool`` are its own code.
"""

from __future__ import annotations

import functools
import sys
import types
from dataclasses import dataclass

MODEL = "agentrl-FC"  # the model name the checker is given; "_" in it would read as "/" (convert_func_name)
_MODEL_CONFIG = "bfcl_eval.constants.model_config"

# BFCL v4's single-turn categories this plugin converts and scores (relevance and irrelevance included);
# simple_java and simple_javascript rows take every argument as Java / JavaScript source in a string
# (bfcl-eval's checker reads it back with its own type converters: see :func:`language`)
AST_CATEGORIES = ("simple_python", "simple_java", "simple_javascript", "multiple", "parallel", "parallel_multiple",
                  "live_simple", "live_multiple", "live_parallel", "live_parallel_multiple")
RELEVANCE_CATEGORIES = ("irrelevance", "live_irrelevance", "live_relevance")
SINGLE_TURN = AST_CATEGORIES + RELEVANCE_CATEGORIES
MULTI_TURN = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context")
# bfcl-eval's other categories (its ALL_CATEGORIES), and why this plugin does not convert them
_WEB = "its rows need a live web search engine (BFCL's runner calls SerpAPI with a key)"
_MEMORY = ("its rows are agentic: each is asked after a prerequisite conversation that fills a memory backend "
           "(the vector one needs sentence-transformers and faiss)")
UNSUPPORTED = {
    "web_search_base": _WEB, "web_search_no_snippet": _WEB,
    "memory_kv": _MEMORY, "memory_vector": _MEMORY, "memory_rec_sum": _MEMORY,
    "format_sensitivity": ("BFCL leaves it out of its scores (NON_SCORING_CATEGORY): it re-asks 200 rows of the "
                           "other categories in 26 prompt formats meant for prompting models, not function calling"),
}


class BfclMissing(ImportError):
    """bfcl-eval is not installed (or not the version this plugin reads)."""


@dataclass(frozen=True)
class _Config:
    """bfcl-eval's ModelConfig for :data:`MODEL`: the field its AST checker reads (``underscore_to_dot``), and
    those its runner reads (``eval_runner.get_handler``: the handler, model name and FC mode; the leaderboard
    CSV: display name, url, org, license, prices), as bfcl-eval would list a local Hermes-format FC model."""

    underscore_to_dot: bool = True
    model_name: str = MODEL
    display_name: str = "agentrl eval file (FC)"
    url: str = "https://github.com/agentrl"
    org: str = "agentrl"
    license: str = "apache-2.0"
    input_price: float | None = None
    output_price: float | None = None
    is_fc_model: bool = True

    @property
    def model_handler(self):
        """bfcl-eval's Hermes-format FC handler (``QwenFCHandler``): it decodes the ``<tool_call>`` blocks that
        :mod:`agentrl_bfcl.runner` writes; imported when the runner asks, not when the checker is reached."""
        from bfcl_eval.model_handler.local_inference.qwen_fc import QwenFCHandler

        return QwenFCHandler


def _stand_in_model_config() -> None:
    module = sys.modules.get(_MODEL_CONFIG)
    if module is None:
        module = types.ModuleType(_MODEL_CONFIG, "agentrl-bfcl's stand-in for bfcl-eval's model registry "
                                                 "(see agentrl_bfcl.bfcl)")
        module.MODEL_CONFIG_MAPPING = {}
        sys.modules[_MODEL_CONFIG] = module
    module.MODEL_CONFIG_MAPPING.setdefault(MODEL, _Config())


@functools.cache  # once it passes (a failure raises and is not cached)
def require() -> None:
    """Raise :class:`BfclMissing` with the install line unless bfcl-eval 2026.3.23 is importable."""
    from importlib import metadata

    try:
        version = metadata.version("bfcl-eval")
    except metadata.PackageNotFoundError:
        raise BfclMissing("bfcl-eval is not installed; install it without its dependencies (its pins would "
                          "replace numpy and pull every provider SDK): pip install --no-deps bfcl-eval==2026.3.23") from None
    if version != "2026.3.23":
        raise BfclMissing(f"bfcl-eval {version} is installed; agentrl-bfcl reads 2026.3.23's data and checker: "
                          "pip install --no-deps bfcl-eval==2026.3.23")
    _stand_in_model_config()


def language(category: str):
    """The source language of ``category``'s functions, bfcl-eval's ``Language``: JAVA (value "java") for
    simple_java, JAVASCRIPT ("javascript") for simple_javascript, PYTHON for every other category (bfcl-eval's
    runner picks it the same way, with ``is_java`` / ``is_js``)."""
    require()
    from bfcl_eval.constants.enums import Language
    from bfcl_eval.utils import is_java, is_js

    return (Language.JAVA if is_java(category) else Language.JAVASCRIPT if is_js(category) else Language.PYTHON)


def ast_checker(*args, **kwargs):
    """bfcl-eval's ``ast_checker`` (same arguments), imported past its model registry."""
    require()
    from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker as check

    return check(*args, **kwargs)
