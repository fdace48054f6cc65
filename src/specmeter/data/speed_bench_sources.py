"""Fillers that rebuild SPEED-Bench placeholder rows from the public datasets they were drawn from.

A placeholder row keeps, after the placeholder line, a template such as "...{article}..." plus the
source's name (`source`) and the item's key in it (`src_id`). A filler loads the source through
FillContext (which wraps an injectable `datasets.load_dataset`, caches each load and turns access
failures into a per-source report) and returns the user turns.

Only sources whose rebuild is a plain lookup plus the row's own template are covered. The others
(BAMBOO, ChatRAG-Bench, MMLU-Pro, Ada-LEval, RoleBench, CoSER, and HLE in the throughput configs) need
prompt builders that pad to exact o200k token counts or add instructions not held in the row; their
rows are dropped and counted per source. Register a filler with `FILLERS[name] = fn` to cover one.
"""

from __future__ import annotations

import json
import random
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from specmeter.common.errors import RowNotFillable, SourceUnavailable
from specmeter.data.speed_bench import PLACEHOLDER_PREFIX

Row = Mapping[str, Any]
Loader = Callable[..., Any]  # datasets.load_dataset or a stand-in with the same call shape

# Pinned source revisions, so a prepared file does not change when a source is edited upstream.
CODE_CONTESTS_REVISION = "802411c3010cb00d1b05bad57ca77365a3c699d6"
HLE_REVISION = "021a3d71f516a7ac28ceb8d284969902edf1edeb"
OPUS100_REVISION = "805090dc28bf78897da9641cdf08b61287580df9"
LIVECODEBENCH_FILES = [
    "https://huggingface.co/datasets/livecodebench/code_generation_lite/resolve/"
    f"0fe84c3912ea0c4d4a78037083943e8f0c4dd505/{name}.jsonl"
    for name in ("test", "test2", "test3", "test4", "test5", "test6")
]


@dataclass
class FillContext:
    """What a filler may use: the config being prepared, a seed, and cached source loading."""

    config: str
    seed: int
    loader: Loader
    cache: dict[str, Any] = field(default_factory=dict)

    def load(self, source: str, path: str | None = None, **kwargs: Any) -> Sequence[Row]:
        """Load (once) `path` (default: the source name) with loader(path, **kwargs)."""
        key = json.dumps([path or source, kwargs], sort_keys=True, default=str)
        if key not in self.cache:
            try:
                self.cache[key] = self.loader(path or source, **kwargs)
            except Exception as exc:  # any loader failure means the same thing: this source is out of reach
                self.cache[key] = SourceUnavailable(describe_access_failure(source, exc))
        found = self.cache[key]
        if isinstance(found, SourceUnavailable):
            raise found
        return cast(Sequence[Row], found)

    def index(self, source: str, key_field: str, path: str | None = None, **kwargs: Any) -> dict[str, Row]:
        """Load a source and index its items by one field (ids compared as strings)."""
        key = json.dumps(["index", key_field, path or source, kwargs], sort_keys=True, default=str)
        if key not in self.cache:
            self.cache[key] = {str(item[key_field]): item for item in self.load(source, path, **kwargs)}
        return cast(dict[str, Row], self.cache[key])

    def rng(self, row: Row) -> random.Random:
        """A per-row generator: the same row gets the same draws whatever order rows are prepared in."""
        return random.Random(f"{self.seed}:{self.config}:{row.get('question_id')}")


Filler = Callable[[Row, FillContext], list[str]]


def describe_access_failure(source: str, exc: BaseException) -> str:
    """One line naming the source and the fix; gated repositories need the user's own login."""
    text = f"{type(exc).__name__}: {exc}"
    short = text.splitlines()[0][:200]
    page = f"https://huggingface.co/datasets/{source}"
    lowered = text.lower()
    if any(word in lowered for word in ("gated", "401", "403", "authenticat", "unauthorized", "restricted")):
        return (
            f'source "{source}" is gated ({short}); accept its terms at {page}, then log in with '
            "`hf auth login` (older: `huggingface-cli login`) or set HF_TOKEN, and prepare again"
        )
    return (
        f'source "{source}" could not be loaded ({short}); check network access to huggingface.co '
        "(and that HF_DATASETS_OFFLINE / HF_HUB_OFFLINE are unset), then prepare again"
    )


def template_of(row: Row) -> str:
    """The text after the placeholder line of the first turn: the row's own prompt template."""
    first = str(row["turns"][0]).lstrip()
    if not first.startswith(PLACEHOLDER_PREFIX):
        raise RowNotFillable("first turn is not a placeholder")
    _, _, rest = first.partition("\n")
    return rest.lstrip("\n")


def fill_template(template: str, **values: Any) -> str:
    """Insert source text into the template; placeholders other than `values` mean a format change."""
    fields = {name for _, name, _, _ in string.Formatter().parse(template) if name}
    roots = {name.split("[")[0].split(".")[0] for name in fields}
    if not roots or not roots <= set(values):
        raise RowNotFillable(f"template expects {sorted(roots) or 'no fields'}, filler provides {sorted(values)}")
    try:
        return template.format(**values)
    except (KeyError, IndexError, ValueError, AttributeError) as exc:
        raise RowNotFillable(f"template does not fit the source item ({exc!r})") from None


def _lookup(items: Mapping[str, Row], key: Any, source: str) -> Row:
    try:
        return items[str(key)]
    except KeyError:
        raise RowNotFillable(f"{key!r} not found in {source}") from None


def _at(items: Sequence[Row], position: str, source: str) -> Row:
    try:
        index = int(position)
        if index < 0:
            raise IndexError
        return items[index]
    except (ValueError, IndexError):
        raise RowNotFillable(f"item {position!r} not found in {source}") from None


def fill_cnn_dailymail(row: Row, ctx: FillContext) -> list[str]:
    source = "abisee/cnn_dailymail"
    item = _lookup(ctx.index(source, "id", name="3.0.0", split="test"), row["src_id"], source)
    return [fill_template(template_of(row), article=item["article"])]


def fill_code_contests(row: Row, ctx: FillContext) -> list[str]:
    source = "deepmind/code_contests"
    items = ctx.index(source, "name", split="test", revision=CODE_CONTESTS_REVISION)
    return [fill_template(template_of(row), question=_lookup(items, row["src_id"], source)["description"])]


def fill_livecodebench(row: Row, ctx: FillContext) -> list[str]:
    source = "livecodebench/code_generation_lite"
    items = ctx.index(source, "question_id", path="json", data_files={"test": LIVECODEBENCH_FILES}, split="test")
    item = _lookup(items, row["src_id"], source)
    return [fill_template(template_of(row), question=item["question_content"], starter_code=item["starter_code"])]


def fill_hle(row: Row, ctx: FillContext) -> list[str]:
    source = "cais/hle"
    if ctx.config != "qualitative":
        raise RowNotFillable("throughput rows from HLE need few-shot padding to an o200k length; not built in")
    items = ctx.index(source, "id", split="test", revision=HLE_REVISION)
    return [str(_lookup(items, row["src_id"], source)["question"])]


def fill_mtbench101(row: Row, ctx: FillContext) -> list[str]:
    # The row's source is the URL of the source JSON file; src_id ends with the item's position in it.
    source = "mtbench101/mt-bench-101"
    items = ctx.load(source, path="json", data_files={"test": str(row["source"])}, split="test")
    item = _at(items, str(row["src_id"]).rsplit("_", 1)[-1], source)
    return [str(turn["user"]) for turn in item["history"]]


def fill_opus100(row: Row, ctx: FillContext) -> list[str]:
    # src_id is "<prefix>_<language pair>_<position>"; the pair is the source config.
    source = "Helsinki-NLP/opus-100"
    parts = str(row["src_id"]).split("_")
    if len(parts) != 3:
        raise RowNotFillable(f"unexpected src_id {row['src_id']!r}")
    items = ctx.load(source, name=parts[1], split="test", revision=OPUS100_REVISION)
    return [fill_template(template_of(row), question=_at(items, parts[2], source)["translation"])]


# Source name (as it appears inside a row's `source` field) -> filler.
FILLERS: dict[str, Filler] = {
    "abisee/cnn_dailymail": fill_cnn_dailymail,
    "deepmind/code_contests": fill_code_contests,
    "livecodebench/code_generation_lite": fill_livecodebench,
    "cais/hle": fill_hle,
    "mtbench101/mt-bench-101": fill_mtbench101,
    "Helsinki-NLP/opus-100": fill_opus100,
}


def find_filler(source: str, fillers: Mapping[str, Filler]) -> tuple[str, Filler] | None:
    """Match a row's source (a name or a URL containing it) to a filler; the longest name wins."""
    for name in sorted(fillers, key=lambda n: (-len(n), n)):
        if name in source:
            return name, fillers[name]
    return None
