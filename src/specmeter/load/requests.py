"""Turn a conversation turn (plus the model's own earlier replies) into an OpenAI request body."""

from __future__ import annotations

from typing import Any

from specmeter.config.models import LoadSpec
from specmeter.data.model import Conversation
from specmeter.data.selection import output_policy
from specmeter.load.client import RequestSpec


def build_request(
    conv: Conversation,
    turn: int,
    history: list[str],
    load: LoadSpec,
    model: str,
) -> RequestSpec:
    """The request for `conv.turns[turn]`; `history` holds the model's replies to turns 0..turn-1."""
    body: dict[str, Any] = {
        "model": model,
        **output_policy(load).request_fields(conv),
        **load.request_fields(),
        "stream": True,
        # continuous usage gives cumulative completion_tokens per chunk: exact tokens per chunk.
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    if load.temperature > 0:
        body["seed"] = load.seed
    if conv.prompt_token_ids is not None:
        body["prompt"] = conv.prompt_token_ids
        return RequestSpec("/v1/completions", body)
    if conv.raw_prompt or load.api == "completions":
        body["prompt"] = _plain_transcript(conv, turn, history) if turn else conv.turns[0]
        return RequestSpec("/v1/completions", body)
    messages: list[dict[str, str]] = []
    if conv.system:
        messages.append({"role": "system", "content": conv.system})
    for i in range(turn):
        messages.append({"role": "user", "content": conv.turns[i]})
        messages.append({"role": "assistant", "content": history[i]})
    messages.append({"role": "user", "content": conv.turns[turn]})
    body["messages"] = messages
    return RequestSpec("/v1/chat/completions", body)


def _plain_transcript(conv: Conversation, turn: int, history: list[str]) -> str:
    """Multi-turn history for the completions API, where there is no chat template."""
    parts = [f"{conv.system}\n"] if conv.system else []
    for i in range(turn):
        parts.append(f"User: {conv.turns[i]}\nAssistant: {history[i]}\n")
    parts.append(f"User: {conv.turns[turn]}\nAssistant:")
    return "".join(parts)
