"""The lossless check: at temperature 0 a correct speculative decoder emits exactly the tokens the
target emits alone, so each candidate's outputs are compared with the baseline's, request by request."""

from __future__ import annotations

from collections.abc import Sequence

from specmeter.schemas.plan import PlannedConfig
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.results import LosslessCheck, Mismatch

MAX_LISTED = 50


def first_difference(a: Sequence[object], b: Sequence[object]) -> int | None:
    """Index of the first differing element (the shorter length when one is a prefix); None if equal."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def lossless_check(config: PlannedConfig, baseline: PlannedConfig, records: Sequence[RequestRecord]) -> LosslessCheck:
    """Compare every request both configurations completed (same point, repeat, conversation, turn).

    Token ids when the engine returned them on both sides; otherwise the text (first_diff then counts
    characters). Multi-turn: a later turn whose history already differs is compared all the same, and
    usually differs too."""
    def ok(config_id: str) -> dict[tuple[str, int, str, int], RequestRecord]:
        return {(r.point_id, r.repeat, r.conversation_id, r.turn): r for r in records
                if r.config_id == config_id and r.ok and not r.warmup}

    cand, base = ok(config.id), ok(baseline.id)
    keys = sorted(cand.keys() & base.keys())
    use_ids = bool(keys) and all(cand[k].output_token_ids is not None and base[k].output_token_ids is not None
                                 for k in keys)
    mismatches: list[Mismatch] = []
    for key in keys:
        c, b = cand[key], base[key]
        a_seq: Sequence[object] = (c.output_token_ids or []) if use_ids else c.output_text
        b_seq: Sequence[object] = (b.output_token_ids or []) if use_ids else b.output_text
        diff = first_difference(a_seq, b_seq)
        if diff is not None:
            mismatches.append(Mismatch(point_id=key[0], repeat=key[1], conversation_id=key[2], turn=key[3],
                                       first_diff=diff, candidate_len=len(a_seq), baseline_len=len(b_seq)))
    return LosslessCheck(
        config_id=config.id, baseline_id=baseline.id, basis="token ids" if use_ids else "text",
        compared=len(keys), matched=len(keys) - len(mismatches),
        match_rate=(len(keys) - len(mismatches)) / len(keys) if keys else None,
        mismatches=mismatches[:MAX_LISTED],
    )
