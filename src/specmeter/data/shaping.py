"""Input length as a sweep axis (workload.input_len: [N, ...]): the prompts of one length, built to it.

Three sources can be shaped to a length:
- sonnet: poem lines cut to exactly N tokens of the request the server is sent, counted with the target's tokenizer:
  a raw completion's text with the BOS the tokenizer adds (what /v1/completions encodes), or, with the loader's
  `chat: true`, the whole chat-templated request (template tokens and generation prompt included). So N is the
  request's prompt tokens as the engine counts them (`prompt_tokens` in its usage).
- random: exactly N random token ids, sent as token ids (nothing added).
- speed-bench: the prepared throughput_<k>k config for N = k x 1000 or k x 1024. SPEED-Bench sized those prompts in
  tiktoken o200k tokens, not the target's, so they are about N; each request records what the engine counted.
Every other dataset has prompts of their own length: a range (`input_len: "LO:HI"`) filters them instead.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from specmeter.common.errors import InputError
from specmeter.data.model import Conversation
from specmeter.data.random_tokens import load_random
from specmeter.data.sonnet import load_sonnet
from specmeter.data.speed_bench import CONFIGS, load_speed_bench

SHAPED = ("sonnet", "random", "speed-bench")
TokenCounter = Callable[[str], int]


def load_tokenizer(tokenizer: str | None, why: str) -> Any:
    """The target's own tokenizer (a local path or a cached hub id); `why` names what needs it."""
    if not tokenizer:
        raise InputError(f"{why} needs the target's tokenizer: pass --tokenizer PATH (launch mode uses --model)")
    if tokenizer.lower().endswith(".gguf"):  # transformers reads a GGUF's vocabulary only with the gguf package
        raise InputError(f"{why} counts tokens with the target's Hugging Face tokenizer, and {tokenizer} is a .gguf "
                         "file: pass the model's Hugging Face directory or hub id as --tokenizer (in a sweep file: "
                         "workload.tokenizer)")
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise InputError(f"{why} needs `transformers` to read the tokenizer; pip install transformers") from None
    try:
        return AutoTokenizer.from_pretrained(tokenizer)
    except Exception as exc:
        raise InputError(f"tokenizer {tokenizer!r} could not be loaded ({type(exc).__name__}); "
                         "check --tokenizer") from exc


def request_token_counter(tokenizer: str | None, chat: bool, why: str = "sonnet") -> TokenCounter:
    """Tokens of the request a prompt text becomes: the chat template's whole request (chat), or the completion
    prompt with the special tokens the tokenizer adds (raw), as the server encodes them."""
    tok = load_tokenizer(tokenizer, why)
    if not chat:
        return lambda text: len(tok.encode(text))

    def templated(text: str) -> int:
        ids = tok.apply_chat_template([{"role": "user", "content": text}], tokenize=True, add_generation_prompt=True)
        return len(ids["input_ids"] if isinstance(ids, Mapping) else ids)
    return templated


def context_length(tokenizer: str | None) -> int | None:
    """max_position_embeddings from the target's config.json, when the tokenizer is a local model directory."""
    config = Path(tokenizer or "") / "config.json"
    if not tokenizer or not config.is_file():
        return None
    value = json.loads(config.read_text(encoding="utf-8")).get("max_position_embeddings")
    return int(value) if isinstance(value, int) else None


def check_lengths(lengths: list[int], dataset: str, tokenizer: str | None, max_tokens: int,
                  max_model_len: int | None = None) -> None:
    """Fail before any server starts on a length the dataset cannot be shaped to or the target cannot hold."""
    if dataset not in SHAPED:
        raise InputError(f"workload.input_len: {dataset} prompts cannot be shaped to a length (sonnet, random and "
                         "speed-bench can); to keep its prompts in a range write input_len: 'LO:HI'")
    limit = max_model_len or context_length(tokenizer)
    for n in lengths:
        if limit is not None and n + max_tokens > limit:
            raise InputError(f"workload.input_len: {n} input + {max_tokens} output tokens (load.max_tokens) exceed "
                             f"the target's context of {limit} tokens; lower input_len or load.max_tokens")


def shaped_conversations(dataset: str, path: str | None, options: dict[str, Any], length: int,
                         tokenizer: str | None) -> list[Conversation]:
    """The conversations of one input length (check_lengths first)."""
    for key in ("input_len", "config", "count_tokens"):
        if key in options:
            raise InputError(f"workload.options.{key}: workload.input_len sets it for each length; drop the option")
    if dataset == "random":
        return load_random(input_len=length, **options)
    if not path:
        raise InputError(f"workload.path: {dataset} needs a path to shape prompts from")
    if dataset == "sonnet":
        counter = request_token_counter(tokenizer, bool(options.get("chat")), "workload.input_len")
        return load_sonnet(path, counter, input_len=length, **options)
    return load_speed_bench(path, config=speed_bench_config(length))


def speed_bench_config(length: int) -> str:
    """throughput_<k>k for N = k x 1000 or k x 1024."""
    for config in CONFIGS:
        if config.startswith("throughput_"):
            k = int(config.removeprefix("throughput_").removesuffix("k"))
            if length in (k * 1000, k * 1024):
                return config
    sizes = ", ".join(c.removeprefix("throughput_") for c in CONFIGS if c.startswith("throughput_"))
    raise InputError(f"workload.input_len: SPEED-Bench has no throughput config of {length} tokens; choose one "
                     f"of {sizes} (k x 1000 or k x 1024)")
