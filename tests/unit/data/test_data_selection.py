"""Stratified selection, input-length buckets and the output-length policy."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from specmeter.common.errors import InputError
from specmeter.data.model import Conversation
from specmeter.data.sample import load_sample
from specmeter.data.selection import OutputPolicy, bucket_by_input_length, select, stratified_quotas


def make(category_sizes: dict[str, int]) -> list[Conversation]:
    return [
        Conversation(id=f"{c}-{i}", category=c, turns=[f"prompt {c} {i}"])
        for c, n in category_sizes.items() for i in range(n)
    ]


sizes_strategy = st.dictionaries(st.sampled_from("abcdefghijkl"), st.integers(1, 40), min_size=1)


@given(sizes=sizes_strategy, data=st.data())
def test_quotas_are_proportional_and_cover_every_category(sizes: dict[str, int], data: st.DataObject) -> None:
    total = data.draw(st.integers(1, sum(sizes.values())))
    quotas = stratified_quotas(sizes, total)
    assert sum(quotas.values()) == total
    assert all(0 < quotas[c] <= sizes[c] for c in quotas)
    if total >= len(sizes):
        assert set(quotas) == set(sizes)
        spare, remaining = sum(sizes.values()) - len(sizes), total - len(sizes)
        for c in sizes:  # one each, then the rest within one item of its proportional share
            share = remaining * (sizes[c] - 1) / spare if spare else 0
            assert abs(quotas[c] - 1 - share) < 1
        for a in sizes:  # a bigger category never gets fewer than a smaller one minus rounding
            for b in sizes:
                if sizes[a] >= sizes[b]:
                    assert quotas[a] >= quotas[b] - 1


@given(sizes=sizes_strategy, data=st.data())
def test_select_is_a_deterministic_subset_without_repeats(sizes: dict[str, int], data: st.DataObject) -> None:
    conversations = make(sizes)
    n = data.draw(st.integers(1, len(conversations)))
    seed = data.draw(st.integers(0, 5))
    chosen = select(conversations, n, seed=seed)
    assert chosen == select(conversations, n, seed=seed)
    assert len(chosen) == n and len({c.id for c in chosen}) == n
    assert {c.id for c in chosen} <= {c.id for c in conversations}
    assert Counter(c.category for c in chosen) == stratified_quotas(sizes, n, seed)


def test_prefix_of_a_selection_covers_every_category() -> None:
    conversations = load_sample()
    categories = {c.category for c in conversations}
    chosen = select(conversations, 30, seed=4)
    assert {c.category for c in chosen[: len(categories)]} == categories


def test_category_filter_and_unknown_category() -> None:
    conversations = make({"coding": 5, "math": 3, "rag": 2})
    assert {c.category for c in select(conversations, categories=["math", "rag"])} == {"math", "rag"}
    assert select(conversations) == conversations
    with pytest.raises(InputError) as caught:
        select(conversations, categories=["math", "poetry"])
    message = str(caught.value)
    assert "poetry" in message and all(c in message for c in ("coding", "math", "rag"))


def test_asking_for_more_than_available_or_nothing_is_an_error() -> None:
    conversations = make({"a": 2})
    with pytest.raises(InputError, match="exceeds"):
        select(conversations, 3)
    with pytest.raises(InputError):
        select(conversations, 0)


def words(text: str) -> int:
    return len(text.split())


def test_buckets_group_by_first_request_length() -> None:
    conversations = [
        Conversation(id="short", turns=["one two"]),
        Conversation(id="mid", turns=["one two three four five", "a long second turn " * 50]),
        Conversation(id="sys", system="be kind", turns=["one two three"]),
        Conversation(id="ids", turns=["label"], raw_prompt=True, prompt_token_ids=[1] * 7),
        Conversation(id="huge", turns=["w " * 100]),
    ]
    buckets = bucket_by_input_length(conversations, words, [(5, 10), (0, 5)])
    assert list(buckets) == [(5, 10), (0, 5)]
    assert [c.id for c in buckets[(0, 5)]] == ["short"]
    assert [c.id for c in buckets[(5, 10)]] == ["mid", "sys", "ids"]
    for (lo, hi), members in buckets.items():
        assert all(lo <= c.metadata["input_tokens"] < hi for c in members)


def test_overlapping_or_empty_buckets_are_rejected() -> None:
    with pytest.raises(InputError, match="overlap"):
        bucket_by_input_length([], words, [(0, 10), (5, 20)])
    with pytest.raises(InputError):
        bucket_by_input_length([], words, [(10, 10)])


def test_output_policy() -> None:
    capped = Conversation(id="c", turns=["x"], max_tokens=50)
    natural = OutputPolicy(mode="natural", max_tokens=200)
    fixed = OutputPolicy(mode="fixed", max_tokens=200)
    assert natural.warning() is None
    assert "ignore_eos" in fixed.warning() and "acceptance" in fixed.warning()
    assert natural.request_fields(capped) == {"max_tokens": 50}
    # Fixed mode forces the item's own length when the workload sets one, else the policy's.
    assert fixed.request_fields(capped) == {"max_tokens": 50, "min_tokens": 50, "ignore_eos": True}
    free = Conversation(id="f", turns=["x"])
    assert fixed.request_fields(free) == {"max_tokens": 200, "min_tokens": 200, "ignore_eos": True}
    assert natural.request_fields(free) == {"max_tokens": 200}
    with pytest.raises(ValueError):
        OutputPolicy(max_tokens=0)
