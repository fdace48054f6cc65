"""What every stage of the demo pair's training shares: the vocabulary and chat format, time budgets, and
progress lines."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

SEED_DEFAULT = 1234
VOCAB_SIZE = 8192
BOS, EOS, PAD = "<s>", "</s>", "<pad>"
ROLE_TOKENS = ("<|system|>", "<|user|>", "<|assistant|>")
SPECIAL_TOKENS = [BOS, EOS, PAD, *ROLE_TOKENS]

#: Jinja chat template. Every message is ``<|role|>{content}</s>``; the conversation starts with
#: ``<s>`` and a generation prompt is ``<|assistant|>``. The model ends its reply with ``</s>``
#: (the eos token), so servers stop on eos without extra stop tokens. There is deliberately no
#: newline after the markers: with ``<|assistant|>\n`` a weak model confuses the newline after a
#: role marker with the one after ``</s>`` and answers with more role markers.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}{{ '<|system|>' + message['content'] + eos_token }}"
    "{% elif message['role'] == 'user' %}{{ '<|user|>' + message['content'] + eos_token }}"
    "{% elif message['role'] == 'assistant' %}{{ '<|assistant|>' + message['content'] + eos_token }}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}"
)


def log(msg: str) -> None:
    """Print a timestamped progress line and flush (the script is usually run under nohup)."""
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def render_chat(messages: Sequence[dict[str, str]], add_generation_prompt: bool) -> str:
    """Render ``messages`` exactly like :data:`CHAT_TEMPLATE` does (checked in ``main``)."""
    parts = [BOS]
    for m in messages:
        parts.append(f"<|{m['role']}|>{m['content']}{EOS}")
    if add_generation_prompt:
        parts.append("<|assistant|>")
    return "".join(parts)


@dataclass
class Budget:
    """Stop after ``steps`` optimizer steps if given, else after ``seconds`` of wall time."""

    seconds: float
    steps: int | None
    start: float = field(default_factory=time.monotonic)

    def progress(self, step: int) -> float:
        if self.steps:
            return step / self.steps
        return (time.monotonic() - self.start) / self.seconds

    def done(self, step: int) -> bool:
        if self.steps is not None and step >= self.steps:
            return True
        return time.monotonic() - self.start >= self.seconds
