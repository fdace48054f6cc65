"""How much of the target's own output a pruned draft vocabulary covers, and the acceptance ceiling it implies.

A drafter that proposes only tokens of its vocabulary V can have drafted position i of a step accepted only if the
target's next i + 1 tokens are all in V. Over the baseline's outputs (the target alone, the tokens it emits), the
ceiling of position i is therefore the share of decoding positions t whose tokens t..t+i all lie in V: the
unconditional per-position rate (a_i) a perfect drafter with V could reach, and 1 + their sum its AL.

Conventions. Decoding positions are the output tokens after the first (the first comes from prefill, before any
step drafts). A window that runs past the end of an output counts only the tokens inside it (the target's tokens
beyond are unknown), so ceilings never fall for want of data and stay upper bounds. Coverage counts every output
token. Intervals resample conversations (a conversation's turns and repeats are not independent), with the
expanded percentile bootstrap the speedups use.

Every decoding position counts alike, while a real drafter's steps start where its last step ended; so the
ceiling is over the text, not over the steps a given drafter happened to take.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from specmeter.analysis.paired import paired_ratio_of_means
from specmeter.schemas.vocab import Estimate, VocabCoverage

ALL = "all"


@dataclass(frozen=True)
class Stream:
    """One request's output token ids, with what groups it: its conversation (the resampled unit) and category."""

    conversation: str
    category: str
    ids: np.ndarray


def workload_conversation(conversation_id: str) -> str:
    """The workload's own conversation id: a point that cycles its workload sends `<id>#<pass>` copies of the
    same prompt, which are one conversation to resample (and, at temperature 0, one output to count)."""
    base, sep, tail = conversation_id.rpartition("#")
    return base if sep and tail.isdigit() else conversation_id


def inside(ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Per token: whether it is in the draft vocabulary (ids beyond the mask are not)."""
    out = np.zeros(ids.size, dtype=bool)
    known = (ids >= 0) & (ids < mask.size)
    out[known] = mask[ids[known]]
    return out


def in_vocab_run(flags: np.ndarray, k: int) -> np.ndarray:
    """Per position t: how many tokens from t on are in the vocabulary before the first that is not, capped at
    k + 1; a run that reaches the end of the output counts as k + 1 (nothing after it can fail)."""
    outside = np.flatnonzero(~flags)
    t = np.arange(flags.size)
    # The first position at or after t whose token is outside (a sentinel past any window where none is).
    first_out = np.append(outside, flags.size + k + 1)[np.searchsorted(outside, t)]
    result: np.ndarray = np.minimum(first_out - t, k + 1)
    return result


def stream_counts(ids: np.ndarray, mask: np.ndarray, k: int) -> np.ndarray:
    """[tokens, tokens in the vocabulary, decoding positions, windows all in for position 0 .. k-1]."""
    flags = inside(ids, mask)
    run = in_vocab_run(flags, k)[1:]  # decoding positions: every output token after the first
    ok = [int(np.count_nonzero(run > i)) for i in range(k)]
    return np.array([ids.size, int(np.count_nonzero(flags)), run.size, *ok], dtype=float)


def _estimate(num: np.ndarray, den: np.ndarray) -> Estimate:
    if not den.size or den.sum() <= 0:
        return Estimate(value=None)
    value, ci = paired_ratio_of_means(num, den)
    return Estimate(value=value, low=ci[0] if ci else None, high=ci[1] if ci else None)


def coverage(name: str, streams: Sequence[Stream], mask: np.ndarray, k: int) -> VocabCoverage:
    """Coverage, per-position ceilings and the AL ceiling of `streams` (one category, or all) under `mask`."""
    by_conv: dict[str, np.ndarray] = {}
    for s in streams:
        row = stream_counts(s.ids, mask, k)
        by_conv[s.conversation] = by_conv[s.conversation] + row if s.conversation in by_conv else row
    table = np.array(list(by_conv.values()), dtype=float).reshape(len(by_conv), 3 + k)
    tokens, in_vocab, positions, ok = table[:, 0], table[:, 1], table[:, 2], table[:, 3:]
    return VocabCoverage(
        category=name, conversations=len(by_conv), requests=len(streams), tokens=int(tokens.sum()),
        coverage=_estimate(in_vocab, tokens),
        ceiling=[_estimate(ok[:, i], positions) for i in range(k)],
        al_ceiling=_estimate(positions + ok.sum(axis=1), positions),
    )


def coverage_by_category(streams: Sequence[Stream], mask: np.ndarray, k: int) -> tuple[VocabCoverage,
                                                                                       list[VocabCoverage]]:
    """All streams, then each category's (in name order)."""
    cats = sorted({s.category for s in streams})
    return (coverage(ALL, streams, mask, k),
            [coverage(c, [s for s in streams if s.category == c], mask, k) for c in cats])


def explained_share(ceiling: float | None, measured: float | None) -> float | None:
    """(1 - ceiling) / (1 - measured): of the steps that did not accept a position, the share whose target
    tokens the vocabulary could not have drafted. None where nothing was rejected or a side is unknown."""
    if ceiling is None or measured is None or measured >= 1.0:
        return None
    return (1.0 - ceiling) / (1.0 - measured)

