"""GSM8K, MT-Bench / Spec-Bench, sonnet and random-token loaders on small files built here."""

from __future__ import annotations

from pathlib import Path

import pytest
from data_fixtures import write_jsonl, write_parquet

from specmeter.common.errors import InputError
from specmeter.data.gsm8k import TEST_FILE, load_gsm8k
from specmeter.data.mtbench import load_question_file
from specmeter.data.random_tokens import load_random
from specmeter.data.sonnet import INSTRUCTION, load_sonnet


def words(text: str) -> int:
    """A stand-in tokenizer: one token per whitespace-separated word."""
    return len(text.split())


# ---------------------------------------------------------------- GSM8K

GSM_ROWS = [
    {"question": "Tom has 3 apples and buys 2 more. How many?", "answer": "3 + 2 = 5\n#### 5"},
    {"question": "A box holds 4 pens. How many pens in 3 boxes?", "answer": "4 * 3 = 12\n#### 12"},
]


def test_gsm8k_from_dataset_directory_and_direct_file(tmp_path: Path) -> None:
    write_parquet(tmp_path / TEST_FILE, GSM_ROWS)
    from_dir = load_gsm8k(tmp_path)
    from_file = load_gsm8k(tmp_path / TEST_FILE)
    assert from_dir == from_file
    assert [c.turns[0] for c in from_dir] == [r["question"] for r in GSM_ROWS]
    assert all(c.category == "math" for c in from_dir)
    assert [c.metadata["answer"] for c in from_dir] == [r["answer"] for r in GSM_ROWS]
    assert len({c.id for c in from_dir}) == len(GSM_ROWS)


@pytest.mark.parametrize("place", ["test.jsonl", "grade_school_math/data/test.jsonl"])
def test_gsm8k_original_jsonl_reads_as_the_parquet_layout(tmp_path: Path, place: str) -> None:
    write_parquet(tmp_path / "hf" / TEST_FILE, GSM_ROWS)
    (tmp_path / "orig" / place).parent.mkdir(parents=True)
    write_jsonl(tmp_path / "orig" / place, GSM_ROWS)
    from_parquet = load_gsm8k(tmp_path / "hf")
    assert load_gsm8k(tmp_path / "orig") == from_parquet
    assert load_gsm8k(tmp_path / "orig" / place) == from_parquet


def test_gsm8k_jsonl_errors_name_the_line(tmp_path: Path) -> None:
    broken = tmp_path / "test.jsonl"
    broken.write_text('{"question": "q", "answer": "a"}\n{"question": \n', encoding="utf-8")
    with pytest.raises(InputError, match=r"test\.jsonl line 2"):
        load_gsm8k(broken)
    wrong = write_jsonl(tmp_path / "wrong.jsonl", [{"prompt": "x", "answer": "y"}])
    with pytest.raises(InputError, match="question"):
        load_gsm8k(wrong)


def test_gsm8k_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not found"):
        load_gsm8k(tmp_path)
    bad = write_parquet(tmp_path / "bad.parquet", [{"prompt": "x", "answer": "y"}])
    with pytest.raises(InputError, match="question"):
        load_gsm8k(bad)
    blank = write_parquet(tmp_path / "blank.parquet", [GSM_ROWS[0], {"question": " ", "answer": "1"}])
    with pytest.raises(InputError, match=r'blank.parquet row 2: field "question"'):
        load_gsm8k(blank)
    not_parquet = tmp_path / "text.parquet"
    not_parquet.write_text("hello", encoding="utf-8")
    with pytest.raises(InputError, match="parquet"):
        load_gsm8k(not_parquet)


# ---------------------------------------------------------------- MT-Bench / Spec-Bench


@pytest.mark.parametrize("name", ["mt-bench", "spec-bench"])
def test_question_files(tmp_path: Path, name: str) -> None:
    path = write_jsonl(tmp_path / "question.jsonl", [
        {"question_id": 81, "category": "writing", "turns": ["Write a travel blog post.", "Rewrite it in limericks."]},
        {"question_id": 82, "category": "translation", "turns": ["Translate: bonjour"], "reference": ["hello"]},
    ])
    conversations = load_question_file(tmp_path, name=name)  # a directory holding question.jsonl
    assert conversations == load_question_file(path, name=name)
    assert [c.id for c in conversations] == [f"{name}-81", f"{name}-82"]
    assert conversations[0].multi_turn and conversations[1].category == "translation"
    assert conversations[1].metadata["reference"] == ["hello"]


@pytest.mark.parametrize(("row", "field"), [
    ({"category": "x", "turns": ["a"]}, "question_id"),
    ({"question_id": 2, "turns": ["a"]}, "category"),
    ({"question_id": 2, "category": "x", "turns": []}, "turns"),
    ({"question_id": 2, "category": "x", "turns": ["a", 3]}, "turns"),
    ({"question_id": True, "category": "x", "turns": ["a"]}, "question_id"),
])
def test_question_file_malformed_rows(tmp_path: Path, row: dict, field: str) -> None:
    path = write_jsonl(tmp_path / "question.jsonl", [{"question_id": 1, "category": "x", "turns": ["fine"]}, row])
    with pytest.raises(InputError, match=rf'question.jsonl line 2: field "{field}"'):
        load_question_file(path)


def test_question_file_duplicate_ids_and_unknown_set(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "question.jsonl", [{"question_id": 1, "category": "x", "turns": ["a"]}] * 2)
    with pytest.raises(InputError, match="line 2"):
        load_question_file(path)
    with pytest.raises(InputError, match="mt-bench"):
        load_question_file(path, name="alpaca")  # type: ignore[arg-type]


# ---------------------------------------------------------------- sonnet

POEM = [f"Line {i} of a poem that speaks of {word} and light" for i, word in
        enumerate(["summer", "winter", "rivers", "stones", "cities", "gardens", "ships", "songs"] * 3)]


@pytest.fixture
def poem(tmp_path: Path) -> Path:
    path = tmp_path / "sonnet.txt"
    path.write_text("\n".join(POEM) + "\n\n", encoding="utf-8")
    return path


def test_sonnet_prompts_have_exactly_the_length_and_use_poem_lines(poem: Path) -> None:
    conversations = load_sonnet(poem, words, input_len=60, num_prompts=5, seed=3)
    assert len(conversations) == 5 and len({c.id for c in conversations}) == 5
    for conversation in conversations:
        text = conversation.turns[0]
        assert text.startswith(INSTRUCTION)
        *whole, cut = text[len(INSTRUCTION):].split("\n")
        assert whole and set(whole) <= set(POEM) and len(whole) == len(set(whole))
        assert any(line.startswith(cut) for line in POEM)  # the tail: the start of a poem line
        assert words(text) == conversation.metadata["input_tokens"] == 60
        assert conversation.raw_prompt


@pytest.mark.parametrize("length", [15, 16, 57, 300])
def test_sonnet_reaches_every_length_exactly_even_past_the_poem(poem: Path, length: int) -> None:
    """A length longer than every line together repeats lines in the tail; never a shorter prompt."""
    for conversation in load_sonnet(poem, words, input_len=length, num_prompts=2):
        assert words(conversation.turns[0]) == length


def test_sonnet_refuses_a_length_no_cut_reaches(poem: Path) -> None:
    """A tokenizer that only ever adds tokens two at a time past the instruction cannot give an odd length."""
    def pairs(text: str) -> int:
        body = text.removeprefix(INSTRUCTION)
        return words(INSTRUCTION) + 2 * len(body.split()) if text.startswith(INSTRUCTION) else words(text)
    with pytest.raises(InputError, match="exactly 21 tokens"):
        load_sonnet(poem, pairs, input_len=21, num_prompts=1)


def test_sonnet_is_deterministic_per_seed_and_can_be_chat(poem: Path) -> None:
    assert load_sonnet(poem, words, 60, 4, seed=1) == load_sonnet(poem, words, 60, 4, seed=1)
    assert not load_sonnet(poem, words, 60, 1, chat=True)[0].raw_prompt


def test_sonnet_errors(poem: Path, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="too short"):
        load_sonnet(poem, words, input_len=5)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n \n", encoding="utf-8")
    with pytest.raises(InputError, match="no text lines"):
        load_sonnet(empty, words)


# ---------------------------------------------------------------- random tokens


def test_random_prompts_have_exact_length_in_range_and_are_seeded() -> None:
    conversations = load_random(num_prompts=4, input_len=32, vocab_size=50, seed=7, low=5, exclude={10, 11})
    assert conversations == load_random(num_prompts=4, input_len=32, vocab_size=50, seed=7, low=5, exclude={10, 11})
    for conversation in conversations:
        ids = conversation.prompt_token_ids
        assert ids is not None and len(ids) == 32
        assert all(5 <= t < 50 and t not in (10, 11) for t in ids)
        assert conversation.raw_prompt and conversation.category == "random"
        assert conversation.metadata["synthetic"] is True


def test_random_rejects_impossible_settings() -> None:
    with pytest.raises(InputError):
        load_random(num_prompts=0)
    with pytest.raises(InputError, match="no token ids"):
        load_random(vocab_size=3, exclude={0, 1, 2})
