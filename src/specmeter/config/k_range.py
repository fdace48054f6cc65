"""A range of draft lengths, `LO-HI`: the Ks a drafter may take, of which a sweep measures a spread and the tune
loop's step-cost model proposes the rest (`num_speculative_tokens: 1-6` in a sweep file, `--propose-k 1-6`)."""

from __future__ import annotations

FORM = "the lowest and highest K like 1-6"


def parse_k_range(text: str) -> tuple[int, int]:
    """`LO-HI` (or one K: `3`) as (LO, HI); ValueError says what is wrong with it."""
    low, sep, high = text.replace(" ", "").partition("-")
    if not low.isdigit() or (sep and not high.isdigit()):
        raise ValueError(f"{text!r}: not LOW-HIGH whole numbers; give {FORM}")
    bounds = (int(low), int(high) if sep else int(low))
    if not 1 <= bounds[0] <= bounds[1]:
        raise ValueError(f"{text}: K runs from 1, and LOW is at most HIGH; give {FORM}")
    return bounds


def measured_spread(k_range: tuple[int, int]) -> list[int]:
    """The Ks of a range a sweep measures: two, at its quartiles (1-5 gives 2 and 4, 1-6 gives 2 and 5), or its ends
    when it is three Ks wide or less. Two Ks fix the step-cost model's per-K slope for the drafter; inside the range
    rather than at its ends, since the best K seldom sits at an end, and the model interpolates more truly than it
    extrapolates. The other Ks are the proposals' to take."""
    low, high = k_range
    if high - low <= 2:
        return sorted({low, high})
    inset = int((high - low) / 4 + 0.5)  # half up: 1-6 gives 2 and 5
    return [low + inset, high - inset]
