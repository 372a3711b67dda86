"""A tiny byte-level BPE tokenizer with a ChatML chat template that supports tools.

The markup follows the Qwen2.5 / hermes convention so verl's ``hermes`` tool parser and its
Qwen continuous-token builder work unchanged:

    <|im_start|>system
    You are a helpful assistant.

    # Tools
    ...
    <tools>
    {"type": "function", "function": {...}}
    </tools>
    ...<|im_end|>
    <|im_start|>user
    What is 37 + 48?<|im_end|>
    <|im_start|>assistant
    <tool_call>
    {"name": "add", "arguments": {"a": 37, "b": 48}}
    </tool_call><|im_end|>
    <|im_start|>user
    <tool_response>
    85
    </tool_response><|im_end|>
    <|im_start|>assistant
    The answer is 85.<|im_end|>

``<|im_start|>``, ``<|im_end|>`` and ``<|endoftext|>`` (pad) are special tokens; the four tool
tags are single added tokens that are *not* special, so they survive
``decode(..., skip_special_tokens=True)`` just like the text the hermes parser searches.
"""

from __future__ import annotations

from collections.abc import Iterable

IM_START, IM_END, PAD = "<|im_start|>", "<|im_end|>", "<|endoftext|>"
TOOL_TAGS = ("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>")
DEFAULT_SYSTEM = "You are a helpful assistant."

# Written for this project; whitespace is controlled with "-" so the output is exact.
CHAT_TEMPLATE = (
    "{%- set ns = namespace(system='" + DEFAULT_SYSTEM + "', start=0) -%}"
    "{%- if messages and messages[0]['role'] == 'system' -%}"
    "{%- set ns.system = messages[0]['content'] -%}{%- set ns.start = 1 -%}"
    "{%- endif -%}"
    "{{- '<|im_start|>system\\n' + ns.system -}}"
    "{%- if tools -%}"
    "{{- '\\n\\n# Tools\\n\\nYou may call functions to help answer. "
    "Their signatures are listed within <tools></tools>:\\n<tools>' -}}"
    "{%- for tool in tools -%}{{- '\\n' + (tool | tojson) -}}{%- endfor -%}"
    "{{- '\\n</tools>\\n\\nTo call a function, reply with a JSON object within <tool_call></tool_call>:\\n"
    "<tool_call>\\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\\n</tool_call>' -}}"
    "{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- for message in messages[ns.start:] -%}"
    "{%- set role = message['role'] -%}"
    "{%- if role == 'tool' -%}"
    "{%- if loop.first or loop.previtem['role'] != 'tool' -%}{{- '<|im_start|>user' -}}{%- endif -%}"
    "{{- '\\n<tool_response>\\n' + (message['content'] | string) + '\\n</tool_response>' -}}"
    "{%- if loop.last or loop.nextitem['role'] != 'tool' -%}{{- '<|im_end|>\\n' -}}{%- endif -%}"
    "{%- elif role == 'assistant' -%}"
    "{{- '<|im_start|>assistant\\n' + (message['content'] or '') -}}"
    "{%- for call in (message['tool_calls'] or []) -%}"
    "{%- set fn = call['function'] if call['function'] is defined else call -%}"
    "{%- if message['content'] or not loop.first -%}{{- '\\n' -}}{%- endif -%}"
    "{%- set args = fn['arguments'] -%}"
    "{{- '<tool_call>\\n{\"name\": \"' + fn['name'] + '\", \"arguments\": ' -}}"
    "{{- args if args is string else (args | tojson) -}}"
    "{{- '}\\n</tool_call>' -}}"
    "{%- endfor -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- else -%}"
    "{{- '<|im_start|>' + role + '\\n' + (message['content'] or '') + '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)


def train_tokenizer(texts: Iterable[str], vocab_size: int = 768):
    """Train byte-level BPE on ``texts`` and wrap it as a PreTrainedTokenizerFast."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    markup = (IM_START, IM_END, PAD, *TOOL_TAGS)

    def plain(text: str) -> str:
        for tag in markup:
            text = text.replace(tag, "\n")
        return text

    core = Tokenizer(models.BPE())
    # Digits one per token (numbers are copied digit by digit), then GPT-2 style byte-level splits.
    core.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=[PAD, IM_START, IM_END],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator((plain(t) for t in texts), trainer=trainer)

    tok = PreTrainedTokenizerFast(
        tokenizer_object=core,
        bos_token=None,
        eos_token=IM_END,
        pad_token=PAD,
        unk_token=None,
        additional_special_tokens=[IM_START, IM_END],
        model_max_length=2048,
        padding_side="left",
        clean_up_tokenization_spaces=False,
    )
    tok.add_tokens(list(TOOL_TAGS), special_tokens=False)
    tok.chat_template = CHAT_TEMPLATE
    return tok


def train_family_tokenizer(texts: Iterable[str], tokens: dict, chat_template: str, vocab_size: int = 768):
    """A tiny byte-level BPE tokenizer with another model family's tokens and chat template.

    ``tokens`` names them as the family's ``tokenizer_config.json`` does: ``special`` (skipped by
    ``decode(skip_special_tokens=True)``), ``added`` (single tokens that are not special, e.g. Qwen's
    ``<tool_call>``), and ``bos``/``eos``/``pad``. The vocabulary is small; the markup is the family's.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    special, added = list(tokens["special"]), list(tokens.get("added") or [])

    def plain(text: str) -> str:
        for tag in sorted(special + added, key=len, reverse=True):
            text = text.replace(tag, "\n")
        return text

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=special,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    core.train_from_iterator((plain(t) for t in texts), trainer=trainer)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core, bos_token=tokens.get("bos"), eos_token=tokens["eos"], pad_token=tokens.get("pad"),
        unk_token=None, additional_special_tokens=special, model_max_length=4096, padding_side="left",
        clean_up_tokenization_spaces=False,
    )
    if added:
        tok.add_tokens(added, special_tokens=False)
    tok.chat_template = chat_template
    return tok
