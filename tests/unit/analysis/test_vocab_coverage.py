"""The coverage and acceptance-ceiling arithmetic of `specmeter vocab` on constructed token streams and maps:
hand-worked steps of the perfect drafter, the edges (full and empty vocabulary), a step-by-step definition it must
equal, and what must hold whatever the stream (rates fall with position, AL rises with the vocabulary)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specmeter.analysis.vocab import (
    ALL,
    Stream,
    coverage,
    coverage_by_category,
    explained_share,
    stream_counts,
    workload_conversation,
)

VOCAB = 16


def mask_of(ids: set[int], size: int = VOCAB) -> np.ndarray:
    out = np.zeros(size, dtype=bool)
    out[list(ids)] = True
    return out


def stream(ids: list[int], conversation: str = "c", category: str = "x") -> Stream:
    return Stream(conversation, category, np.asarray(ids, dtype=np.int64))


def brute_force(ids: list[int], allowed: set[int], k: int) -> tuple[int, list[int]]:
    """The definition, one step at a time: from the second token on, a perfect drafter restricted to `allowed`
    drafts the target's next tokens while they are in it (tokens past the end count as in it), at most k, all
    accepted; the target adds its own token and the next step starts after it. (steps, steps accepting >= i+1)"""
    steps, at_least, t = 0, [0] * k, 1
    while t < len(ids):
        accepted = 0
        while accepted < k and (t + accepted >= len(ids) or ids[t + accepted] in allowed):
            accepted += 1
        steps += 1
        for i in range(accepted):
            at_least[i] += 1
        t += accepted + 1
    return steps, at_least


def test_hand_worked_steps() -> None:
    # tokens:      0  1  2  3  4        (9 is outside the vocabulary)
    ids = [1, 2, 9, 3, 4]
    tokens, inside, steps, *accepted = stream_counts(np.asarray(ids), mask_of({1, 2, 3, 4}), 3)
    assert (tokens, inside) == (5, 4)
    # Step 1 starts at token 1: drafts 2, cannot draft 9 -> accepts 1, the target emits 9. Step 2 starts at token 3:
    # drafts 3 and 4 and runs past the end -> accepts 3.
    assert steps == 2 and accepted == [2, 1, 1]
    assert (steps, accepted) == brute_force(ids, {1, 2, 3, 4}, 3)


def test_an_outside_token_costs_nothing_when_it_falls_on_the_targets_own_token() -> None:
    # Out, in, out, in ...: only half the decoding positions hold a draftable token, yet at K = 1 every step drafts
    # the in token, has it accepted, and the target emits the out token itself: AL 2, the most K = 1 allows.
    ids = [9] + [1, 9] * 30
    one = coverage("x", [stream(ids)], mask_of({1}), 1)
    assert one.ceiling[0].value == 1.0 and one.al_ceiling.value == pytest.approx(2.0)
    assert one.coverage.value == pytest.approx(30 / 61)
    # At K = 3 with two draftable tokens between outside ones, every step accepts exactly 2: AL 3 of 4.
    three = coverage("x", [stream([9] + [1, 2, 9] * 20)], mask_of({1, 2}), 3)
    assert [e.value for e in three.ceiling] == [1.0, 1.0, 0.0] and three.al_ceiling.value == pytest.approx(3.0)


def test_the_first_token_is_no_decoding_position() -> None:
    # Only the first (prefill) token is outside: coverage counts it, no ceiling does.
    cover = coverage("x", [stream([9, 1, 2, 3])], mask_of({1, 2, 3}), 2)
    assert cover.coverage.value == pytest.approx(3 / 4)
    assert [e.value for e in cover.ceiling] == [1.0, 1.0]


def test_full_vocabulary_reaches_k_plus_one_and_empty_reaches_one() -> None:
    streams = [stream([1, 2, 3, 4, 5], "a"), stream([6, 7, 8], "b")]
    full = coverage(ALL, streams, np.ones(VOCAB, dtype=bool), 4)
    assert full.coverage.value == 1.0 and all(e.value == 1.0 for e in full.ceiling)
    assert full.al_ceiling.value == pytest.approx(5.0)
    empty = coverage(ALL, streams, np.zeros(VOCAB, dtype=bool), 4)
    assert empty.coverage.value == 0.0 and all(e.value == 0.0 for e in empty.ceiling)
    assert empty.al_ceiling.value == pytest.approx(1.0)


def test_ids_beyond_the_mask_are_outside() -> None:
    cover = coverage("x", [stream([1, 40, 2])], mask_of({1, 2}), 1)
    assert cover.coverage.value == pytest.approx(2 / 3)


token_lists = st.lists(st.integers(0, VOCAB - 1), min_size=1, max_size=40)


@settings(max_examples=150, deadline=None)
@given(streams=st.lists(token_lists, min_size=1, max_size=5), allowed=st.sets(st.integers(0, VOCAB - 1)),
       extra=st.sets(st.integers(0, VOCAB - 1)), k=st.integers(1, 6))
def test_equals_the_definition_falls_with_position_and_rises_with_the_vocabulary(
        streams: list[list[int]], allowed: set[int], extra: set[int], k: int) -> None:
    for ids in streams:
        counts = stream_counts(np.asarray(ids), mask_of(allowed), k)
        assert (int(counts[2]), list(counts[3:])) == brute_force(ids, allowed, k)
    made = [stream(ids, f"c{i}") for i, ids in enumerate(streams)]
    small = coverage(ALL, made, mask_of(allowed), k)
    large = coverage(ALL, made, mask_of(allowed | extra), k)
    values = [e.value for e in small.ceiling]
    if all(v is not None for v in values):
        assert all(a >= b for a, b in itertools.pairwise(values))  # type: ignore[operator]
        assert small.al_ceiling.value == pytest.approx(1 + sum(values))  # type: ignore[arg-type]
        # A larger vocabulary never needs more steps for the same text: its AL ceiling is at least as high.
        assert large.al_ceiling.value is not None and small.al_ceiling.value is not None
        assert large.al_ceiling.value >= small.al_ceiling.value - 1e-12
    assert small.coverage.value is not None and large.coverage.value is not None
    assert large.coverage.value >= small.coverage.value


def test_a_conversation_is_one_unit_and_intervals_hold_the_estimate() -> None:
    rng = np.random.default_rng(3)
    streams = [stream(list(rng.integers(0, VOCAB, 30)), f"conv{i}", "even" if i % 2 else "odd") for i in range(10)]
    streams.append(stream([1, 2, 3], "conv0", "odd"))  # a second turn of conv0
    overall, cats = coverage_by_category(streams, mask_of(set(range(8))), 3)
    assert overall.conversations == 10 and overall.requests == 11
    assert [c.category for c in cats] == ["even", "odd"]
    assert sum(c.tokens for c in cats) == overall.tokens
    for e in [overall.coverage, *overall.ceiling, overall.al_ceiling]:
        assert e.low is not None and e.high is not None and e.value is not None
        assert e.low <= e.value <= e.high
    one = coverage("x", [stream([1, 2, 3], "only"), stream([4, 5], "only")], mask_of({1, 2}), 2)
    assert one.conversations == 1 and one.coverage.low is None  # one conversation: no interval


def test_explained_share() -> None:
    # Measured a_i 0.6 (40% rejected) under a ceiling of 0.9 (10% forced): a quarter of the rejections.
    assert explained_share(0.9, 0.6) == pytest.approx(0.25)
    assert explained_share(1.0, 0.6) == 0.0
    assert explained_share(0.5, 1.0) is None  # nothing rejected
    assert explained_share(None, 0.5) is None


def test_cycled_copies_are_one_workload_conversation() -> None:
    assert workload_conversation("coding-02#3") == "coding-02"
    assert workload_conversation("coding-02") == "coding-02"
    assert workload_conversation("a#b") == "a#b"
