"""compare-workloads: the same engine config on a real workload and on random tokens of matched
input/output lengths, so users see how much synthetic prompts flatter speculative decoding.

Matching: every request the SD phase completed on the real workload becomes one random-token prompt
with the same prompt length (server usage) and a forced output of the same length (ignore_eos).
Both random phases (SD and speculation off) derive from the same records, so they do identical work.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from pathlib import Path

from specmeter.config import EngineSpec, LoadSpec, SpecConfig
from specmeter.data.model import Conversation
from specmeter.errors import InputError
from specmeter.load.records import RequestRecord
from specmeter.runner import BASELINE, SD, PhasePlan

RANDOM = "random"
KIND = "compare-workloads"


def vocab_from_model(model: str | None) -> tuple[int, list[int]]:
    """(vocab_size, special token ids) of a local Hugging Face model directory."""
    path = Path(model) if model else None
    if path is None or not (path / "config.json").exists():
        raise InputError("compare-workloads needs the target's vocabulary: pass --vocab-size (attach mode or hub id)")
    vocab = json.loads((path / "config.json").read_text(encoding="utf-8")).get("vocab_size")
    if not isinstance(vocab, int) or vocab <= 0:
        raise InputError(f"{path}/config.json: no positive vocab_size; pass --vocab-size")
    special: list[int] = []
    tok = path / "tokenizer.json"
    if tok.exists():
        added = json.loads(tok.read_text(encoding="utf-8")).get("added_tokens") or []
        special = sorted(int(t["id"]) for t in added if isinstance(t, dict) and t.get("special"))
    return vocab, special


def matched_random(
    source_phase: str, level: int, vocab_size: int, exclude: Sequence[int], seed: int
) -> Callable[[list[RequestRecord]], list[Conversation]]:
    """A `derive` function: random-token conversations matched to one phase's completed requests."""
    banned = set(exclude)
    allowed = [t for t in range(vocab_size) if t not in banned]

    def derive(records: list[RequestRecord]) -> list[Conversation]:
        src = [r for r in records if r.phase == source_phase and r.concurrency == level and r.ok and not r.warmup
               and r.prompt_tokens and r.output_tokens]
        src.sort(key=lambda r: (r.conversation_id, r.turn))
        if not src:
            raise InputError(f"compare-workloads: phase {source_phase} completed no requests to match lengths to")
        out: list[Conversation] = []
        for r in src:
            cid = f"random-{r.conversation_id}-t{r.turn}"
            rng = random.Random(f"{seed}:{cid}")
            out.append(Conversation(
                id=cid, category=RANDOM, turns=[f"<{r.prompt_tokens} random token ids>"], raw_prompt=True,
                prompt_token_ids=[rng.choice(allowed) for _ in range(r.prompt_tokens or 1)],
                max_tokens=r.output_tokens, metadata={"matched_to": f"{r.conversation_id}#{r.turn}"},
            ))
        return out

    return derive


def compare_phases(engine: EngineSpec, spec: SpecConfig, load: LoadSpec, vocab_size: int,
                   exclude: Sequence[int], baseline_endpoint: str | None = None) -> list[PhasePlan]:
    """SD on real, SD on matched random (same server), then the same two with speculation off
    (launch mode, or attach mode with a speculation-off server at baseline_endpoint)."""
    if not spec.enabled:
        raise InputError("compare-workloads needs a speculative config (--spec) to compare")
    forced = load.model_copy(update={"ignore_eos": True})
    derive = matched_random(SD, load.concurrency[0], vocab_size, exclude, load.seed)
    off = SpecConfig()
    phases = [
        PhasePlan(SD, spec, engine, workload="main", server_name=SD),
        PhasePlan(f"{SD}:{RANDOM}", spec, engine, workload=RANDOM, derive=derive, load=forced, server_name=SD),
    ]
    base_engine = engine if engine.launch else (
        engine.model_copy(update={"endpoint": baseline_endpoint}) if baseline_endpoint else None)
    if base_engine is not None:
        phases += [
            PhasePlan(BASELINE, off, base_engine, workload="main", server_name=BASELINE),
            PhasePlan(f"{BASELINE}:{RANDOM}", off, base_engine, workload=RANDOM, derive=derive, load=forced,
                      server_name=BASELINE),
        ]
    return phases
