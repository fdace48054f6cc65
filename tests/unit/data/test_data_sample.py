"""The packaged sample workload: the 11 SPEED-Bench categories, loadable offline."""

from __future__ import annotations

from collections import Counter

from specmeter.data.sample import load_sample

SPEED_BENCH_CATEGORIES = {
    "coding", "humanities", "math", "multilingual", "qa", "rag",
    "reasoning", "roleplay", "stem", "summarization", "writing",
}


def test_sample_covers_every_category_equally() -> None:
    counts = Counter(c.category for c in load_sample())
    assert set(counts) == SPEED_BENCH_CATEGORIES
    assert set(counts.values()) == {7}


def test_sample_ids_are_unique_and_prefixed_by_category() -> None:
    conversations = load_sample()
    assert len({c.id for c in conversations}) == len(conversations)
    assert all(c.id.startswith(c.category + "-") for c in conversations)


def test_sample_has_some_multi_turn_conversations_of_two_or_three_turns() -> None:
    multi = [c for c in load_sample() if c.multi_turn]
    assert 10 <= len(multi) <= 20
    assert all(2 <= len(c.turns) <= 3 for c in multi)


def test_passage_categories_carry_a_passage_of_modest_length() -> None:
    for conversation in load_sample():
        if conversation.category in ("rag", "summarization"):
            instruction, _, passage = conversation.turns[0].partition("\n\n")
            assert instruction and 80 <= len(passage.split()) <= 200, conversation.id


def test_multilingual_prompts_use_several_scripts() -> None:
    texts = [c.turns[0] for c in load_sample() if c.category == "multilingual"]
    non_ascii = [t for t in texts if any(ord(ch) > 127 for ch in t)]
    cjk = [t for t in texts if any("\u3040" <= ch <= "\u9fff" for ch in t)]
    assert len(non_ascii) >= 5 and cjk


def test_sample_is_chat_text_not_raw_tokens() -> None:
    assert all(not c.raw_prompt and c.prompt_token_ids is None for c in load_sample())
