"""GSM8K (grade-school math word problems): a common acceptance-length reference in SD papers.

Reads the Hugging Face parquet layout, {path}/main/test-00000-of-00001.parquet, the original release's JSONL
(one {"question", "answer"} object a line, as grade_school_math/data/test.jsonl), a directory holding either, or
either file given directly (parquet by its name or its magic bytes). The reference answer is kept in metadata
(not sent), for anyone checking output quality.
"""

from __future__ import annotations

from pathlib import Path

from specmeter.common.errors import InputError
from specmeter.data._rows import (
    at,
    make_conversation,
    read_jsonl,
    read_parquet_rows,
    require_columns,
    require_text,
)
from specmeter.data.model import Conversation

TEST_FILE = Path("main") / "test-00000-of-00001.parquet"
JSONL_FILES = (Path("test.jsonl"), Path("data") / "test.jsonl", Path("grade_school_math") / "data" / "test.jsonl")
PARQUET_MAGIC = b"PAR1"


def load_gsm8k(path: str | Path) -> list[Conversation]:
    """Load GSM8K test questions as single-turn math prompts, ids gsm8k-<row index>."""
    root = Path(path)
    data_file = _data_file(root)
    if data_file.suffix == ".parquet" or _is_parquet(data_file):
        rows = read_parquet_rows(data_file)
    else:
        rows = [row for _, row in read_jsonl(data_file)]
    if not rows:
        raise InputError(f"{data_file}: no rows found; check that this is the GSM8K test file")
    require_columns(rows, ("question", "answer"), data_file)
    conversations = []
    for index, row in enumerate(rows):
        where = at(data_file, index + 1, "row")
        question = require_text(row["question"], where, "question")
        metadata = {"answer": row["answer"]} if row["answer"] is not None else {}
        conversations.append(
            make_conversation(where, id=f"gsm8k-{index:04d}", category="math", turns=[question], metadata=metadata)
        )
    return conversations


def _data_file(root: Path) -> Path:
    if not root.is_dir():
        return root
    found = next((root / name for name in (TEST_FILE, *JSONL_FILES) if (root / name).is_file()), None)
    if found is None:
        raise InputError(f"{root}: GSM8K test file not found in it ({TEST_FILE} or {JSONL_FILES[0]}); give the "
                         "dataset "
                         "directory or the test file itself (parquet or JSONL)")
    return found


def _is_parquet(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            return fh.read(len(PARQUET_MAGIC)) == PARQUET_MAGIC
    except FileNotFoundError:
        raise InputError(f"{path}: file not found; give the GSM8K directory or its test file") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read it ({exc.strerror}); check the path") from None
