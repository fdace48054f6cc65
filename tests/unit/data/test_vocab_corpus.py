"""A corpus for `--top N`: token ids taken as they are, text tokenized with the target's tokenizer, the workload and
request-record formats, directories (text files only), and one-line errors for what cannot be read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specmeter.common.errors import InputError
from specmeter.data.corpus import load_encoder, read_corpus
from specmeter.plans.demo import models_dir


def letters(text: str) -> list[int]:
    """A stand-in tokenizer: one id per letter (a = 0)."""
    return [ord(ch) - ord("a") for ch in text if ch.isalpha()]


def jsonl(path: Path, rows: list[object]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_token_ids_need_no_tokenizer_and_records_name_their_conversations(tmp_path: Path) -> None:
    corpus = jsonl(tmp_path / "requests.jsonl", [
        {"conversation_id": "math-01#2", "output_token_ids": [3, 3, 5], "output_text": "ignored"},
        {"token_ids": [5, 1]},
    ])
    got = read_corpus([corpus], None)
    assert got.tokens == 5 and got.counts[3] == 2 and got.counts[5] == 2 and got.counts[1] == 1
    assert got.conversation_ids == {"math-01#2"}


def test_text_in_every_workload_shape(tmp_path: Path) -> None:
    corpus = jsonl(tmp_path / "c.jsonl", [
        {"text": "ab"}, {"prompt": "c"}, {"turns": ["d", "e"]},
        {"messages": [{"role": "user", "content": "f"}]}, "g",
    ])
    (tmp_path / "plain.txt").write_text("hh", encoding="utf-8")
    got = read_corpus([corpus, tmp_path / "plain.txt"], letters)
    assert got.tokens == 9 and got.counts[7] == 2
    assert got.files == [str(corpus), str(tmp_path / "plain.txt")]


def test_a_directory_reads_its_text_files_only(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text("abc", encoding="utf-8")
    (tmp_path / "notes.md").write_text("d", encoding="utf-8")
    (tmp_path / "weights.bin").write_bytes(b"\x00\xff" * 10)
    (tmp_path / "mod.pyc").write_bytes(b"zz")
    got = read_corpus([tmp_path], letters)
    assert got.tokens == 4 and len(got.files) == 2


def test_the_demo_tokenizer_loads_without_transformers_and_round_trips() -> None:
    encode = load_encoder(str(models_dir() / "demo-target"))
    ids = encode("def add(a, b):\n    return a + b\n")
    assert ids and all(0 <= i < 8192 for i in ids)


@pytest.mark.parametrize(("rows", "encode", "message"), [
    (["not json"], letters, "line 1: not JSON"),
    ([{"other": 1}], letters, "no text in it"),
    ([{"token_ids": ["x"]}], None, "not a list of token ids"),
    ([{"text": "abc"}], None, "needs the target's tokenizer"),
    ([{"token_ids": []}], None, "no tokens found"),
])
def test_unreadable_corpora_are_one_line_errors(tmp_path: Path, rows: list[object], encode: object,
                                                message: str) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    with pytest.raises(InputError) as err:
        read_corpus([path], encode)  # type: ignore[arg-type]
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_missing_corpus_is_named(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"nothing\.txt: no such file"):
        read_corpus([tmp_path / "nothing.txt"], letters)
