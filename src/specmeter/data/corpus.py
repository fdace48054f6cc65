"""A token-id corpus for building a draft vocabulary: how often each target token id occurs in some text.

`--corpus` takes text files, JSONL files and directories of them (their .txt, .text, .md, .rst, .py and .jsonl
files). A JSONL line gives token ids as they are
(`token_ids`, or `output_token_ids` as in a run's requests.jsonl) or text to tokenize with the target's
tokenizer (`text`, `output_text`, `prompt`, `turns`, `messages`: the workload formats); any other file is one
text. Which conversations a corpus of request records came from is kept: a map built from the very outputs it is
then measured on is in-sample (circular), and the vocab command says so.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from specmeter.common.errors import InputError

Encode = Callable[[str], list[int]]
TEXT_KEYS = ("text", "output_text", "prompt")
# What a directory contributes: text and source files (not compiled files, archives or model weights beside them).
DIRECTORY_SUFFIXES = frozenset({".txt", ".text", ".md", ".rst", ".py", ".jsonl"})
ID_KEYS = ("token_ids", "output_token_ids")


@dataclass
class CorpusCounts:
    """counts[id] = occurrences of target token id `id` over the corpus."""

    counts: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    tokens: int = 0
    roots: list[str] = field(default_factory=list)  # the paths given
    files: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # files that are not UTF-8 text
    conversation_ids: set[str] = field(default_factory=set)  # where lines were request records

    def add(self, ids: Sequence[int]) -> None:
        arr = np.asarray(ids, dtype=np.int64)
        if arr.size == 0:
            return
        if int(arr.min()) < 0:
            raise ValueError(f"negative token id {int(arr.min())}")
        found = np.bincount(arr)
        if found.size > self.counts.size:
            self.counts = np.concatenate([self.counts, np.zeros(found.size - self.counts.size, dtype=np.int64)])
        self.counts[:found.size] += found
        self.tokens += int(arr.size)

    def describe(self) -> str:
        files = f"{len(self.files)} files, " if len(self.files) != len(self.roots) else ""
        return f"{', '.join(self.roots)} ({files}{self.tokens} tokens)"


def load_encoder(tokenizer: str) -> Encode:
    """The target's tokenizer as text -> ids (no special tokens): `tokenizers` on a local tokenizer.json (fast to
    load), else transformers' AutoTokenizer (a hub id in the local cache, or a directory without tokenizer.json)."""
    file = Path(tokenizer) / "tokenizer.json"
    if file.is_file():
        try:
            from tokenizers import Tokenizer
        except ImportError:
            pass
        else:
            tok = Tokenizer.from_file(str(file))
            return lambda text: list(tok.encode(text, add_special_tokens=False).ids)
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise InputError(f"--tokenizer {tokenizer}: reading it needs `tokenizers` (for a tokenizer.json) or "
                         "`transformers`; pip install tokenizers") from None
    try:
        hf = AutoTokenizer.from_pretrained(tokenizer)
    except Exception as exc:
        raise InputError(f"--tokenizer {tokenizer!r} could not be loaded ({type(exc).__name__}); give the target "
                         "model's directory") from exc
    return lambda text: list(hf.encode(text, add_special_tokens=False))


def read_corpus(paths: Sequence[Path], encode: Encode | None) -> CorpusCounts:
    """Token counts over every file in `paths` (directories: their text files, in name order).

    `encode` is needed only for text; a corpus of token ids needs no tokenizer."""
    out = CorpusCounts(roots=[str(p) for p in paths])
    for path in paths:
        if not path.exists():
            raise InputError(f"--corpus {path}: no such file or directory")
        files = (sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in DIRECTORY_SUFFIXES)
                 if path.is_dir() else [path])
        for file in files:
            _read_file(file, encode, out)
    if out.tokens == 0:
        raise InputError(f"--corpus {', '.join(map(str, paths))}: no tokens found; give text, JSONL with text or "
                         "token_ids, or a directory of them")
    return out


def _read_file(file: Path, encode: Encode | None, out: CorpusCounts) -> None:
    try:
        text = file.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        out.skipped.append(str(file))
        return
    except OSError as exc:
        raise InputError(f"--corpus {file}: cannot be read ({exc.strerror})") from None
    before = out.tokens
    if file.suffix.lower() == ".jsonl":
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                _add_line(file, number, line, encode, out)
    elif text.strip():
        out.add(_encode(file, encode, text))
    if out.tokens > before:
        out.files.append(str(file))


def _add_line(file: Path, number: int, line: str, encode: Encode | None, out: CorpusCounts) -> None:
    try:
        row: Any = json.loads(line)
    except ValueError:
        raise InputError(f"--corpus {file} line {number}: not JSON; a .jsonl corpus needs one object per line "
                         "(text, prompt, turns, messages or token_ids)") from None
    if isinstance(row, str):
        out.add(_encode(file, encode, row))
        return
    if not isinstance(row, dict):
        raise InputError(f"--corpus {file} line {number}: a JSON {type(row).__name__}, not an object or a string")
    if isinstance(row.get("conversation_id"), str):
        out.conversation_ids.add(row["conversation_id"])
    for key in ID_KEYS:
        ids = row.get(key)
        if isinstance(ids, list):
            try:
                out.add([int(t) for t in ids])
            except (TypeError, ValueError) as exc:
                raise InputError(f"--corpus {file} line {number}: {key} is not a list of token ids ({exc})") from None
            return
    texts = list(_texts(row))
    if not texts and not any(k in row for k in (*TEXT_KEYS, "turns", "messages")):
        raise InputError(f"--corpus {file} line {number}: no text in it; give text, prompt, turns, messages or "
                         "token_ids")
    for text in texts:
        out.add(_encode(file, encode, text))


def _texts(row: dict[str, Any]) -> Iterator[str]:
    for key in TEXT_KEYS:
        if isinstance(row.get(key), str) and row[key]:
            yield row[key]
            return
    for turn in row.get("turns") or []:
        if isinstance(turn, str) and turn:
            yield turn
    for message in row.get("messages") or []:
        if isinstance(message, dict) and isinstance(message.get("content"), str) and message["content"]:
            yield message["content"]


def _encode(file: Path, encode: Encode | None, text: str) -> list[int]:
    if encode is None:
        raise InputError(f"--corpus {file}: holds text, which needs the target's tokenizer; pass --tokenizer "
                         "(default: the run's target model, when it is a local directory)")
    return encode(text)
