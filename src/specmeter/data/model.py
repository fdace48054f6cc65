"""The one workload model every dataset loader produces.

A Conversation is a list of user turns (one request per turn; later turns carry the model's own
earlier replies as history), a category for per-category acceptance, and free metadata.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator


class Conversation(BaseModel):
    """One benchmark item: one or more user turns sent in order to the same chat."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(description="Stable identifier, unique within a workload.")
    category: str = Field(default="default", description="Category used for per-category results.")
    phase: str | None = Field(default=None, description="The phase of a phase-shift workload it is sent in.")
    turns: list[str] = Field(min_length=1, description="User turns, in order.")
    system: str | None = Field(default=None, description="Optional system prompt.")
    # Completions-style prompts (random tokens, sonnet) are sent as raw text, not chat messages.
    raw_prompt: bool = Field(default=False, description="Send turns[0] to /v1/completions as-is.")
    prompt_token_ids: list[int] | None = Field(
        default=None, description="Exact prompt token ids (random-token workloads)."
    )
    max_tokens: int | None = Field(default=None, description="Per-item output cap, if the source sets one.")
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("turns")
    @classmethod
    def _turns_not_blank(cls, turns: list[str]) -> list[str]:
        for i, turn in enumerate(turns):
            if not isinstance(turn, str) or not turn.strip():
                raise ValueError(f"turn {i} is empty")
        return turns

    @property
    def multi_turn(self) -> bool:
        return len(self.turns) > 1
