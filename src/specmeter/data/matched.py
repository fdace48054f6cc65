"""Random-token prompts matched to a real workload's measured lengths: the synthetic contrast of
compare-workloads, which shows how much random prompts flatter speculative decoding.

Every request the source configuration completed at the source point becomes one random-token prompt
with the same prompt length (server usage) and a forced output of the same length. The speculation-on
and -off configurations on random data derive from the same records, so they do identical work.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path

from specmeter.common.errors import InputError
from specmeter.data.model import Conversation
from specmeter.schemas.plan import MatchedRandom
from specmeter.schemas.records import RequestRecord

CATEGORY = "random"


def vocab_from_model(model: str | None) -> tuple[int, list[int]]:
    """(vocab_size, special token ids) of a local Hugging Face model directory."""
    path = Path(model) if model else None
    if path is None or not (path / "config.json").exists():
        raise InputError("compare-workloads needs the target's vocabulary: pass --vocab-size (attach mode, a hub id or "
                         "a .gguf file)")
    vocab = json.loads((path / "config.json").read_text(encoding="utf-8")).get("vocab_size")
    if not isinstance(vocab, int) or vocab <= 0:
        raise InputError(f"{path}/config.json: no positive vocab_size; pass --vocab-size")
    special: list[int] = []
    tok = path / "tokenizer.json"
    if tok.exists():
        added = json.loads(tok.read_text(encoding="utf-8")).get("added_tokens") or []
        special = sorted(int(t["id"]) for t in added if isinstance(t, dict) and t.get("special"))
    return vocab, special


def matched_random(spec: MatchedRandom, records: Sequence[RequestRecord]) -> list[Conversation]:
    """Random-token conversations matched to the source configuration's completed requests."""
    banned = set(spec.excluded_token_ids)
    allowed = [t for t in range(spec.vocab_size) if t not in banned]
    src = [r for r in records if r.config_id == spec.source_config and r.point_id == spec.source_point
           and r.repeat == 0 and r.ok and not r.warmup and r.prompt_tokens and r.output_tokens]
    src.sort(key=lambda r: (r.conversation_id, r.turn))
    if not src:
        raise InputError(f"compare-workloads: {spec.source_config} completed no requests at {spec.source_point} "
                         "to match lengths to")
    out: list[Conversation] = []
    for r in src:
        cid = f"random-{r.conversation_id}-t{r.turn}"
        rng = random.Random(f"{spec.seed}:{cid}")
        out.append(Conversation(
            id=cid, category=CATEGORY, turns=[f"<{r.prompt_tokens} random token ids>"], raw_prompt=True,
            prompt_token_ids=[rng.choice(allowed) for _ in range(r.prompt_tokens or 1)],
            max_tokens=r.output_tokens, metadata={"matched_to": f"{r.conversation_id}#{r.turn}"},
        ))
    return out
