"""SD metric math (metrics/sd.py) against hand-computed vectors and REFERENCE §1 identities."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from specmeter.engines.base import counts_from_steps
from specmeter.metrics.sd import sum_counts
from specmeter.schemas.sd import SDCounts, conditional_rates

# ---- hand-computed vectors ----------------------------------------------------------------------


def test_fixed_k_hand_vector() -> None:
    # K=3, four steps accepting 3, 1, 0, 2 tokens.
    c = counts_from_steps([3, 1, 0, 2], [3, 3, 3, 3])
    assert c.num_steps == 4
    assert c.num_draft_tokens == 12
    assert c.num_accepted_tokens == 6
    # position 0 accepted by steps with a>=1 (3,1,2), position 1 by a>=2 (3,2), position 2 by a>=3 (3).
    assert c.accepted_per_pos == [3, 2, 1]
    assert c.drafted_per_pos == [4, 4, 4]
    assert c.histogram == [1, 1, 1, 1]
    assert c.acceptance_length == pytest.approx(1 + 6 / 4)  # 2.5
    assert c.acceptance_rate == pytest.approx(6 / 12)  # 0.5
    assert c.mean_draft_length == pytest.approx(3.0)
    assert c.per_position_rate == pytest.approx([0.75, 0.5, 0.25])
    # c_0 = 0.75, c_1 = 0.5/0.75, c_2 = 0.25/0.5
    assert c.conditional_rate == pytest.approx([0.75, 2 / 3, 0.5])
    assert c.histogram_fraction == pytest.approx([0.25, 0.25, 0.25, 0.25])


def test_sdcounts_built_directly_hand_vector() -> None:
    c = SDCounts(
        source="counters", num_steps=10, num_draft_tokens=40, num_accepted_tokens=17,
        accepted_per_pos=[8, 5, 3, 1], histogram=[2, 3, 2, 2, 1],
    )
    assert c.acceptance_length == pytest.approx(2.7)
    assert c.acceptance_rate == pytest.approx(17 / 40)
    assert c.per_position_rate == pytest.approx([0.8, 0.5, 0.3, 0.1])
    assert c.conditional_rate == pytest.approx([0.8, 0.5 / 0.8, 0.3 / 0.5, 0.1 / 0.3])
    assert c.histogram_fraction == pytest.approx([0.2, 0.3, 0.2, 0.2, 0.1])
    # AL = 1 + sum a_i = 1 + sum j h_j for this consistent vector
    assert c.acceptance_length == pytest.approx(1 + sum(c.per_position_rate))
    assert c.acceptance_length == pytest.approx(1 + sum(j * h for j, h in enumerate(c.histogram_fraction or [])))


def test_empty_counts_give_none_not_division_errors() -> None:
    c = SDCounts(source="counters", num_steps=0, num_draft_tokens=0, num_accepted_tokens=0)
    assert c.acceptance_length is None
    assert c.acceptance_rate is None
    assert c.mean_draft_length is None
    assert c.per_position_rate == []
    assert c.conditional_rate == []
    assert c.histogram_fraction is None
    assert SDCounts(source="per_request", num_steps=0, num_draft_tokens=0, num_accepted_tokens=0,
                    histogram=[0, 0]).histogram_fraction is None


def test_conditional_rates_zero_previous_gives_zero() -> None:
    assert conditional_rates([0.5, 0.0, 0.0]) == [0.5, 0.0, 0.0]
    assert conditional_rates([]) == []
    assert conditional_rates([1.0, 1.0]) == [1.0, 1.0]


# ---- REFERENCE test vector: iid alpha=0.8, K=4 -> AL=3.3616, AR=0.5904 --------------------------


def test_reference_vector_from_exact_expected_counts() -> None:
    steps, k, alpha = 10000, 4, 0.8
    per_pos = [round(steps * alpha ** (i + 1)) for i in range(k)]  # 8000, 6400, 5120, 4096
    assert per_pos == [8000, 6400, 5120, 4096]
    accepted = sum(per_pos)  # a step accepting j tokens contributes to j positions
    c = SDCounts(
        source="counters", num_steps=steps, num_draft_tokens=steps * k, num_accepted_tokens=accepted,
        accepted_per_pos=per_pos,
    )
    assert c.acceptance_length == pytest.approx(3.3616, abs=1e-12)
    assert c.acceptance_rate == pytest.approx(0.5904, abs=1e-12)
    assert c.per_position_rate == pytest.approx([0.8, 0.64, 0.512, 0.4096])
    assert c.conditional_rate == pytest.approx([alpha] * k)
    # Histogram of the same process: h_j = alpha^j (1 - alpha) for j < K, h_K = alpha^K.
    hist = [per_pos[j - 1] - per_pos[j] if j > 0 else steps - per_pos[0] for j in range(k)] + [per_pos[-1]]
    c2 = c.model_copy(update={"histogram": hist})
    assert c2.histogram_fraction == pytest.approx([0.2, 0.16, 0.128, 0.1024, 0.4096])
    assert 1 + sum(j * h for j, h in enumerate(c2.histogram_fraction or [])) == pytest.approx(3.3616)


# ---- dynamic K / drafted-0 steps / validation ---------------------------------------------------


def test_steps_with_nothing_drafted_are_skipped() -> None:
    with_misses = counts_from_steps([2, 0, 1, 0], [3, 0, 3, 0])
    without = counts_from_steps([2, 1], [3, 3])
    assert with_misses == without
    assert with_misses.num_steps == 2
    assert with_misses.acceptance_length == pytest.approx(1 + 3 / 2)


def test_all_steps_drafted_nothing() -> None:
    c = counts_from_steps([0, 0], [0, 0])
    assert c.num_steps == 0 and c.acceptance_length is None and c.acceptance_rate is None


def test_dynamic_k_per_position_uses_drafted_per_pos() -> None:
    # Steps drafted 4, 2, 2, 4; accepted 4, 2, 1, 0.
    c = counts_from_steps([4, 2, 1, 0], [4, 2, 2, 4])
    assert c.num_steps == 4
    assert c.num_draft_tokens == 12
    assert c.num_accepted_tokens == 7
    assert c.drafted_per_pos == [4, 4, 2, 2]
    assert c.accepted_per_pos == [3, 2, 1, 1]
    # Unbiased: each position over the steps that drafted it.
    assert c.per_position_rate == pytest.approx([3 / 4, 2 / 4, 1 / 2, 1 / 2])
    assert c.mean_draft_length == pytest.approx(3.0)
    assert c.histogram == [1, 1, 1, 0, 1]
    # AL itself is always 1 + accepted / steps
    assert c.acceptance_length == pytest.approx(1 + 7 / 4)


def test_per_position_without_drafted_per_pos_uses_all_steps() -> None:
    c = SDCounts(source="counters", num_steps=4, num_draft_tokens=12, num_accepted_tokens=7,
                 accepted_per_pos=[3, 2, 1, 1])
    assert c.per_position_rate == pytest.approx([0.75, 0.5, 0.25, 0.25])


def test_per_position_zero_drafted_denominator_is_zero_rate() -> None:
    c = SDCounts(source="per_request", num_steps=2, num_draft_tokens=2, num_accepted_tokens=0,
                 accepted_per_pos=[0, 0], drafted_per_pos=[2, 0])
    assert c.per_position_rate == [0.0, 0.0]


def test_accepted_more_than_drafted_is_rejected() -> None:
    with pytest.raises(ValidationError, match="exceed drafted"):
        SDCounts(source="counters", num_steps=1, num_draft_tokens=3, num_accepted_tokens=4)
    with pytest.raises(ValueError, match="accepted 4 of 3"):
        counts_from_steps([4], [3])
    with pytest.raises(ValueError):
        counts_from_steps([-1], [3])


def test_negative_fields_rejected() -> None:
    with pytest.raises(ValidationError):
        SDCounts(source="counters", num_steps=-1, num_draft_tokens=0, num_accepted_tokens=0)
    with pytest.raises(ValidationError):
        SDCounts(source="counters", num_steps=1, num_draft_tokens=1, num_accepted_tokens=0, accepted_per_pos=[-1])


def test_step_list_length_mismatch() -> None:
    with pytest.raises(ValueError, match="per_step_accepted has 2 entries"):
        counts_from_steps([1, 1], [3])


def test_sum_counts() -> None:
    a = counts_from_steps([3, 1], [3, 3])
    b = counts_from_steps([0, 2, 2], [3, 3, 3])
    total = sum_counts([a, b])
    assert (total.num_steps, total.num_draft_tokens, total.num_accepted_tokens) == (5, 15, 8)
    assert total.accepted_per_pos == [4, 3, 1]
    assert total.drafted_per_pos == [5, 5, 5]
    assert total.histogram == [1, 1, 2, 1]
    # SDCounts.__add__ (sum_counts with the left operand's source) left with the move to schemas.sd: pooling
    # with an explicit source, in either order, gives the same counts
    pooled = sum_counts([b, a], source="counters")
    assert pooled.source == "counters"
    assert pooled.model_dump(exclude={"source"}) == total.model_dump(exclude={"source"})
    # Optional lists stay None when any part lacks them.
    no_hist = SDCounts(source="counters", num_steps=1, num_draft_tokens=3, num_accepted_tokens=1,
                       accepted_per_pos=[1])
    mixed = sum_counts([a, no_hist])
    assert mixed.histogram is None and mixed.drafted_per_pos is None
    assert mixed.accepted_per_pos == [3, 1, 1]
    empty = sum_counts([])
    assert empty.num_steps == 0 and empty.acceptance_length is None


# ---- property tests: identities from REFERENCE §1 -----------------------------------------------


@st.composite
def fixed_k_steps(draw: st.DrawFn) -> tuple[int, list[int]]:
    k = draw(st.integers(1, 8))
    accepted = draw(st.lists(st.integers(0, k), min_size=1, max_size=60))
    return k, accepted


@st.composite
def dynamic_steps(draw: st.DrawFn) -> tuple[list[int], list[int]]:
    drafted = draw(st.lists(st.integers(0, 8), min_size=0, max_size=60))
    accepted = [draw(st.integers(0, k)) for k in drafted]
    return accepted, drafted


@settings(max_examples=200, deadline=None)
@given(fixed_k_steps())
def test_identities_fixed_k(case: tuple[int, list[int]]) -> None:
    k, accepted = case
    c = counts_from_steps(accepted, [k] * len(accepted))
    al = c.acceptance_length
    assert al is not None and c.acceptance_rate is not None
    assert al == pytest.approx(1 + sum(accepted) / len(accepted))
    assert al == pytest.approx(1 + sum(c.per_position_rate))
    assert c.acceptance_rate == pytest.approx((al - 1) / k)
    hf = c.histogram_fraction
    assert hf is not None and math.isclose(sum(hf), 1.0)
    assert al == pytest.approx(1 + sum(j * h for j, h in enumerate(hf)))
    # Per-position rates are non-increasing and within [0, 1]; conditional rates in [0, 1].
    rates = c.per_position_rate
    assert all(0.0 <= r <= 1.0 for r in rates)
    assert all(x >= y for x, y in itertools.pairwise(rates))
    assert all(0.0 <= r <= 1.0 + 1e-12 for r in c.conditional_rate)
    # product of conditional rates up to i gives back a_i
    prod = 1.0
    for a_i, c_i in zip(rates, c.conditional_rate):
        if a_i == 0:
            break
        prod *= c_i
        assert prod == pytest.approx(a_i)


@settings(max_examples=200, deadline=None)
@given(dynamic_steps())
def test_identities_dynamic_k(case: tuple[list[int], list[int]]) -> None:
    accepted, drafted = case
    c = counts_from_steps(accepted, drafted)
    kept = [(a, k) for a, k in zip(accepted, drafted) if k > 0]
    assert c.num_steps == len(kept)
    assert c.num_draft_tokens == sum(k for _, k in kept)
    assert c.num_accepted_tokens == sum(a for a, _ in kept)
    assert sum(c.accepted_per_pos) == c.num_accepted_tokens
    assert sum(c.drafted_per_pos or []) == c.num_draft_tokens
    if c.histogram is not None:
        assert sum(c.histogram) == c.num_steps
        assert sum(j * h for j, h in enumerate(c.histogram)) == c.num_accepted_tokens
    for i, rate in enumerate(c.per_position_rate):
        assert c.drafted_per_pos is not None
        drafted_i = sum(1 for _, k in kept if k > i)
        accepted_i = sum(1 for a, _ in kept if a > i)
        assert rate == pytest.approx(accepted_i / drafted_i if drafted_i else 0.0)
    if c.num_steps:
        assert c.acceptance_length == pytest.approx(1 + c.num_accepted_tokens / c.num_steps)
        hf = c.histogram_fraction
        assert hf is not None
        assert c.acceptance_length == pytest.approx(1 + sum(j * h for j, h in enumerate(hf)))


@settings(max_examples=200, deadline=None)
@given(st.lists(dynamic_steps(), min_size=1, max_size=8))
def test_sum_of_per_request_counts_equals_pooled_steps(requests: list[tuple[list[int], list[int]]]) -> None:
    per_request = [counts_from_steps(a, d) for a, d in requests]
    pooled = counts_from_steps([x for a, _ in requests for x in a], [x for _, d in requests for x in d])
    summed = sum_counts(per_request)

    assert summed.num_steps == pooled.num_steps
    assert summed.num_draft_tokens == pooled.num_draft_tokens
    assert summed.num_accepted_tokens == pooled.num_accepted_tokens
    assert summed.accepted_per_pos == pooled.accepted_per_pos
    # sum_counts reports "no per-position detail" (None) where there are no positions at all.
    assert (summed.drafted_per_pos or []) == pooled.drafted_per_pos
    assert summed.histogram == pooled.histogram
    assert summed.acceptance_length == pooled.acceptance_length
    assert summed.per_position_rate == pytest.approx(pooled.per_position_rate)
