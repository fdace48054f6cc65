"""How much of the target's own output a pruned draft vocabulary covers, and the acceptance ceiling it implies.

A drafter that proposes only tokens of its vocabulary V can have drafted position i of a step accepted only if the
target's tokens at positions 0..i of that step are all in V. The ceiling is what a perfect drafter restricted to V
reaches on the baseline's outputs (the target alone, the tokens it emits): at each step it drafts the target's own
next tokens up to the first outside V (at most K), all are accepted, the target adds its token, and the next step
starts after it. Its unconditional per-position rates (a_i: steps accepting at least i + 1 / steps) and its AL
(1 + their sum) are the ceiling. No drafter restricted to V emits more tokens per step: from any position the
perfect one reaches at least as far, step after step.

Why steps and not every position alike: a token outside V is usually the step's own correction token (the target
emits it after the rejection), and the next step starts after it. Text alternating in-V and out-of-V tokens gives
a perfect K = 1 drafter AL 2, every step accepted, while only half of all positions start an in-V window: the share
of positions would be no ceiling (a real drafter could beat it). So the ceiling depends on K, and is computed per K.

Conventions. The first output token comes from prefill: steps start at the second. Tokens past the end of an output
are unknown and count as draftable (the last step accepts up to K, as engines count it past a max-tokens cut), so
the ceiling stays an upper bound. Coverage counts every output token. Intervals resample conversations (a
conversation's turns and repeats are not independent), with the expanded percentile bootstrap the speedups use.
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


def perfect_steps(run: np.ndarray, k: int) -> np.ndarray:
    """Steps of the perfect drafter restricted to the vocabulary, by accepted count: hist[a] = steps that accepted
    exactly a. `run` is in_vocab_run(...) of the output; steps start at position 1."""
    hist = np.zeros(k + 1, dtype=np.int64)
    t = 1
    while t < run.size:
        accepted = min(k, int(run[t]))
        hist[accepted] += 1
        t += accepted + 1
    return hist


def stream_counts(ids: np.ndarray, mask: np.ndarray, k: int) -> np.ndarray:
    """[tokens, tokens in the vocabulary, perfect drafter's steps, its steps accepting position 0 .. k-1]."""
    flags = inside(ids, mask)
    hist = perfect_steps(in_vocab_run(flags, k), k)
    at_least = np.cumsum(hist[::-1])[::-1]  # at_least[a] = steps that accepted a or more
    return np.array([ids.size, int(np.count_nonzero(flags)), int(hist.sum()), *at_least[1:]], dtype=float)


def _estimate(num: np.ndarray, den: np.ndarray) -> Estimate:
    if not den.size or den.sum() <= 0:
        return Estimate(value=None)
    value, ci = paired_ratio_of_means(num, den)
    return Estimate(value=value, low=ci[0] if ci else None, high=ci[1] if ci else None)


def coverage(name: str, streams: Sequence[Stream], mask: np.ndarray, k: int) -> VocabCoverage:
    """Coverage, the per-position ceilings and the AL ceiling at K = k of `streams` (one category, or all) under
    `mask`."""
    by_conv: dict[str, np.ndarray] = {}
    for s in streams:
        row = stream_counts(s.ids, mask, k)
        by_conv[s.conversation] = by_conv[s.conversation] + row if s.conversation in by_conv else row
    table = np.array(list(by_conv.values()), dtype=float).reshape(len(by_conv), 3 + k)
    tokens, in_vocab, steps, accepted = table[:, 0], table[:, 1], table[:, 2], table[:, 3:]
    return VocabCoverage(
        category=name, conversations=len(by_conv), requests=len(streams), tokens=int(tokens.sum()),
        coverage=_estimate(in_vocab, tokens),
        ceiling=[_estimate(accepted[:, i], steps) for i in range(k)],
        al_ceiling=_estimate(steps + accepted.sum(axis=1), steps),
    )


def coverage_by_category(streams: Sequence[Stream], mask: np.ndarray, k: int) -> tuple[VocabCoverage,
                                                                                       list[VocabCoverage]]:
    """All streams, then each category's (in name order)."""
    cats = sorted({s.category for s in streams})
    return (coverage(ALL, streams, mask, k),
            [coverage(c, [s for s in streams if s.category == c], mask, k) for c in cats])


def explained_share(ceiling: float | None, measured: float | None) -> float | None:
    """(1 - ceiling) / (1 - measured): of the measured rejection rate, the part that even a perfect drafter with
    the vocabulary would have. None where nothing was rejected or a side is unknown."""
    if ceiling is None or measured is None or measured >= 1.0:
        return None
    return (1.0 - ceiling) / (1.0 - measured)

