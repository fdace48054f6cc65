"""How many tokens a launched server's KV cache holds, read from what the engine logged while it started: the
memory a comparison's two sides had for their batches (analysis/capacity.py flags sides that differ).

- vLLM (kv_cache_utils.update_kv_cache_capacity): "GPU KV cache size: 58,240 tokens, Maximum concurrency for
  2,048 tokens per request: 28.44x" ("CPU ..." on its CPU build, "GPU + host ..." with host offload);
- SGLang (its scheduler's start line): "max_total_num_tokens=123456, chunked_prefill_size=...";
- llama.cpp (llama_context): "n_ctx         = 4096": the context every slot shares. The library logs it only at
  verbosity 4 (specmeter asks for that where llama-server has a GPU); at the default the server's own start line
  says it: "load_model: initializing, n_slots = 64, n_ctx_slot = 1024, kv_unified = 'false'", each slot a context
  of its own (slots x per slot), or with a unified cache one pool that any slot may fill.
TensorRT-LLM logs its cache in bytes and blocks, not tokens: not read (None).
"""

from __future__ import annotations

import re
from pathlib import Path

from specmeter.engines.server_log import LAUNCH_HEADER

# Per engine, the lines that give the capacity, in order of preference.
_PATTERNS = {
    "vllm": (re.compile(r"\b[A-Z]+(?: \+ host)? KV cache size: (?P<n>[\d,]+) tokens"),),
    "sglang": (re.compile(r"\bmax_total_num_tokens=(?P<n>\d+)"),),
    "llamacpp": (re.compile(r"\bn_ctx\s*=\s*(?P<n>\d+)"),
                 re.compile(r"\bn_slots = (?P<slots>\d+), n_ctx_slot = (?P<per>\d+), kv_unified = '(?P<unified>\w+)'")),
}
_READ_BYTES = 4 << 20  # the line comes while the server starts, long before a run's requests fill the log


def kv_capacity(kind: str, text: str) -> int | None:
    """KV cache tokens from an engine's start log: the first line that gives them after the last launch in it (a
    resume appends a new start; llama.cpp logs the draft's context after the target's)."""
    start = max(text.rfind(LAUNCH_HEADER), 0)
    for pattern in _PATTERNS.get(kind, ()):
        found = pattern.search(text, start)
        if found is None:
            continue
        if "n" in found.groupdict():
            return int(found.group("n").replace(",", ""))
        per = int(found.group("per"))
        return per if found.group("unified") == "true" else int(found.group("slots")) * per
    return None


def kv_capacity_from_log(kind: str, path: Path) -> int | None:
    try:
        with path.open("r", encoding="utf-8", errors="replace") as fh:
            return kv_capacity(kind, fh.read(_READ_BYTES))
    except OSError:
        return None
