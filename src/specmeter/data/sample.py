"""The built-in sample workload: 77 short prompts across the 11 SPEED-Bench categories.

Written for this project (not taken from any dataset) so that a first run works offline, with no
download and no licence to accept. It exercises per-category acceptance and multi-turn replay; it is a
smoke test of the pipeline, not a substitute for SPEED-Bench when comparing drafters.
"""

from __future__ import annotations

from importlib import resources

from specmeter.data.jsonl import load_jsonl_text
from specmeter.data.model import Conversation

SAMPLE_RESOURCE = "sample_workload.jsonl"


def load_sample() -> list[Conversation]:
    """Load the packaged sample set (same row format as the custom JSONL loader, with turns)."""
    text = resources.files("specmeter.data").joinpath(SAMPLE_RESOURCE).read_text(encoding="utf-8")
    return load_jsonl_text(text, source=SAMPLE_RESOURCE)
