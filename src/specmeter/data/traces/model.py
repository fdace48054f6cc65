"""The one row every trace reader produces, and the trace that holds a file's rows.

A row is one request: when it arrived and how long it was, with whatever else its format records (prefix block
hashes, conversation links, the model, the kind of request, the text where the trace carries it). Fields a format
does not have stay None, so the replay reads every format the same way.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

TraceFormatName = Literal["mooncake", "bailian", "burstgpt", "azure"]


class TraceRow(BaseModel):
    """One request of a trace."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    line: int = Field(ge=1, description="The file's line the request was read from (a CSV record's last line).")
    arrival_s: float = Field(ge=0, description="Seconds from the trace's first arrival (after a window, from the "
                             "window's start).")
    input_length: int | None = Field(default=None, ge=0, description="Prompt tokens; None only where a Mooncake "
                                     "row carries its prompt as text_input or messages instead.")
    output_length: int = Field(ge=0, description="Generated tokens (0 in BurstGPT marks a failed request).")
    hash_ids: list[int] | None = Field(default=None, description="Prefix block hashes, one per block of the trace's "
                                       "block_tokens: equal ids at the same position mean the same prompt prefix.")
    chat_id: int | None = Field(default=None, ge=0, description="Bailian: this request's chat id.")
    parent_chat_id: int | None = Field(default=None, ge=-1, description="Bailian: the chat this one follows, an "
                                       "earlier row's chat_id; -1 starts a conversation.")
    turn: int | None = Field(default=None, ge=1, description="Bailian: the request's turn in its conversation.")
    session_id: str | None = Field(default=None, description="BurstGPT's Session ID (conversation log only) or an "
                                   "AIPerf Mooncake row's session_id: the rows of one conversation.")
    model: str | None = Field(default=None, description="BurstGPT: the model called (ChatGPT, GPT-4).")
    log_type: str | None = Field(default=None, description="BurstGPT: Conversation log or API log.")
    request_type: str | None = Field(default=None, description="Bailian's type: text, search, image or file.")
    text_input: str | None = Field(default=None, description="AIPerf's Mooncake extension: the prompt as text.")
    messages: list[dict[str, Any]] | None = Field(default=None, description="AIPerf's Mooncake extension: the "
                                                  "prompt as an OpenAI chat list.")


class Trace(BaseModel):
    """A trace file's requests in arrival order, with what a replay needs to know of the file itself."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str = Field(description="The file it was read from, as refusals name it.")
    format: TraceFormatName
    block_tokens: int | None = Field(default=None, ge=1, description="Tokens per hash_ids block: 512 in Mooncake, "
                                     "16 in Bailian; None where the format has no hashes.")
    rows: list[TraceRow] = Field(min_length=1)

    @property
    def span_s(self) -> float:
        """Seconds from the first arrival (or the window's start) to the last."""
        return self.rows[-1].arrival_s
