"""`specmeter data prepare speed-bench`: fetch SPEED-Bench at a pinned revision and make it benchmarkable.

Rows that already hold text are kept as they are. Placeholder rows are rebuilt by the per-source fillers
(speed_bench_sources) or dropped, with a count per source and the reason (a gated source names the login
step). A placeholder row that an earlier run of the same revision already filled is taken from the
existing output, so re-running without access to a gated source keeps what was prepared before.

Output is deterministic: one JSONL per config (rows sorted by question_id, keys sorted), independent of
the order configs are prepared in, and manifest.json with the revision and counts (no timestamps).
The project never ships the data: users fetch it themselves under the NVIDIA Evaluation Dataset License.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from specmeter.common.errors import InputError, RowNotFillable, SourceUnavailable
from specmeter.data.speed_bench import (
    CONFIGS,
    DATASET,
    DEFAULT_REVISION,
    SPLIT,
    check_config,
    is_placeholder,
    prepared_file_name,
)
from specmeter.data.speed_bench_sources import (
    FILLERS,
    FillContext,
    Filler,
    Loader,
    describe_access_failure,
    find_filler,
)

MANIFEST = "manifest.json"
MANIFEST_FORMAT = 1
NO_FILLER = (
    "no built-in filler for this source; its rows were dropped (register one in "
    "specmeter.data.speed_bench_sources.FILLERS, or prepare the data with NVIDIA's specdec_bench and load that file)"
)


@dataclass
class ConfigReport:
    """What happened to one config's rows."""

    config: str
    revision: str
    file: str
    rows_in: int = 0
    rows_written: int = 0
    kept: int = 0  # rows that already held text
    reused: int = 0  # placeholder rows taken from an earlier prepared file of the same revision
    filled: Counter[str] = field(default_factory=Counter)
    dropped: Counter[str] = field(default_factory=Counter)
    dropped_categories: Counter[str] = field(default_factory=Counter)
    problems: dict[str, str] = field(default_factory=dict)  # source -> first reason, with the fix
    sha256: str = ""

    def to_manifest(self) -> dict[str, Any]:
        return {
            "revision": self.revision,
            "file": self.file,
            "sha256": self.sha256,
            "rows_in": self.rows_in,
            "rows_written": self.rows_written,
            "kept": self.kept,
            "reused": self.reused,
            "filled": dict(sorted(self.filled.items())),
            "dropped": dict(sorted(self.dropped.items())),
            "dropped_categories": dict(sorted(self.dropped_categories.items())),
            "problems": dict(sorted(self.problems.items())),
        }

    def lines(self) -> list[str]:
        """Human summary: one line for the config, one per source that lost rows."""
        out = [
            f"{self.config}: wrote {self.rows_written} of {self.rows_in} rows to {self.file} "
            f"({self.kept} as published, {sum(self.filled.values())} filled from sources, {self.reused} reused, "
            f"{sum(self.dropped.values())} dropped)"
        ]
        for source, count in sorted(self.dropped.items()):
            out.append(f"  dropped {count} from {source}: {self.problems.get(source, NO_FILLER)}")
        if self.dropped_categories:
            per_category = ", ".join(f"{c} {n}" for c, n in sorted(self.dropped_categories.items()))
            out.append(f"  dropped rows per category: {per_category} (per-category results cover fewer items)")
        return out


@dataclass
class PrepareReport:
    out_dir: Path
    configs: dict[str, ConfigReport] = field(default_factory=dict)

    def lines(self) -> list[str]:
        return [line for report in self.configs.values() for line in report.lines()]


def prepare(
    config: str,
    revision: str = DEFAULT_REVISION,
    out_dir: str | Path = "speed_bench",
    seed: int = 0,
    loader: Loader | None = None,
    fillers: Mapping[str, Filler] | None = None,
) -> PrepareReport:
    """Prepare one config (or "all") into out_dir. `loader` replaces datasets.load_dataset (tests, mirrors)."""
    configs = list(CONFIGS) if config == "all" else [check_config(config)]
    load = loader or _datasets_loader()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    report = PrepareReport(out_dir=out)
    cache: dict[str, Any] = {}  # source loads shared across configs
    for name in configs:
        rows = _load_config(load, name, revision)
        ctx = FillContext(config=name, seed=seed, loader=load, cache=cache)
        report.configs[name] = _prepare_config(rows, ctx, revision, out, FILLERS if fillers is None else fillers)
    _update_manifest(out, report.configs.values())
    return report


def _datasets_loader() -> Loader:
    try:
        from datasets import load_dataset
    except ImportError:
        raise InputError(
            "preparing SPEED-Bench needs the datasets package; run pip install 'specmeter[data]'"
        ) from None
    return cast(Loader, load_dataset)


def _load_config(load: Loader, config: str, revision: str) -> list[dict[str, Any]]:
    try:
        dataset = load(DATASET, name=config, revision=revision, split=SPLIT)
    except Exception as exc:  # gated, offline, unknown revision: all mean "cannot start", with a fix
        raise InputError(f"{DATASET} config {config}: {describe_access_failure(DATASET, exc)}") from None
    rows = [dict(row) for row in dataset]
    where = f"{DATASET} config {config} at revision {revision}"
    for number, row in enumerate(rows, start=1):
        for key in ("question_id", "turns", "source"):
            if key not in row:
                raise InputError(f"{where} row {number}: missing field {key!r}; check the revision")
    ids = Counter(str(row["question_id"]) for row in rows)
    repeated = sorted(qid for qid, n in ids.items() if n > 1)
    if repeated:
        raise InputError(f"{where}: question_id repeats ({', '.join(repeated[:5])}); check the revision")
    return rows


def _prepare_config(
    rows: list[dict[str, Any]], ctx: FillContext, revision: str, out: Path, fillers: Mapping[str, Filler]
) -> ConfigReport:
    path = out / prepared_file_name(ctx.config)
    report = ConfigReport(config=ctx.config, revision=revision, file=path.name, rows_in=len(rows))
    previous = _previously_filled(out, ctx.config, revision)
    written: list[dict[str, Any]] = []
    for row in sorted(rows, key=lambda r: str(r["question_id"])):
        row["question_id"] = str(row["question_id"])
        if not is_placeholder(row["turns"]):
            report.kept += 1
            written.append(row)
            continue
        if row["question_id"] in previous:
            report.reused += 1
            written.append(previous[row["question_id"]])
            continue
        filled = _fill(row, ctx, fillers, report)
        if filled is not None:
            written.append(filled)
    report.rows_written = len(written)
    payload = "".join(json.dumps(row, sort_keys=True, ensure_ascii=False) + "\n" for row in written)
    report.sha256 = hashlib.sha256(payload.encode("utf-8")).hexdigest()
    _atomic_write(path, payload)
    return report


def _fill(
    row: dict[str, Any], ctx: FillContext, fillers: Mapping[str, Filler], report: ConfigReport
) -> dict[str, Any] | None:
    """Rebuild one placeholder row, or count it as dropped under its source with the reason."""
    source = str(row.get("source") or "unknown source")
    match = find_filler(source, fillers)
    name = match[0] if match else source
    reason: str | None = None
    if match is None:
        reason = NO_FILLER
    else:
        try:
            turns = match[1](row, ctx)
            if not turns or not all(isinstance(t, str) and t.strip() for t in turns) or is_placeholder(turns):
                raise RowNotFillable("filler returned no usable text")
        except SourceUnavailable as exc:
            reason = str(exc)
        except RowNotFillable as exc:
            reason = f"row {row['question_id']}: {exc}"
        except Exception as exc:  # a source whose layout changed must not abort hours of preparation
            reason = (
                f"row {row['question_id']}: filler failed ({type(exc).__name__}: {exc}); "
                "the source layout may have changed"
            )
    if reason is not None:
        report.dropped[name] += 1
        report.dropped_categories[str(row.get("category", "unknown"))] += 1
        report.problems.setdefault(name, reason)
        return None
    report.filled[name] += 1
    return {**row, "turns": list(turns)}


def _previously_filled(out: Path, config: str, revision: str) -> dict[str, dict[str, Any]]:
    """Rows of an earlier output of the same revision, to keep what a previous run could fetch."""
    manifest = _read_manifest(out)
    entry = manifest.get("configs", {}).get(config, {})
    path = out / prepared_file_name(config)
    if entry.get("revision") != revision or not path.is_file():
        return {}
    rows: dict[str, dict[str, Any]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            return {}  # a damaged earlier output is simply not reused
        if isinstance(row, dict) and "question_id" in row and not is_placeholder(row.get("turns")):
            rows[str(row["question_id"])] = row
    return rows


def _read_manifest(out: Path) -> dict[str, Any]:
    try:
        data = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) and isinstance(data.get("configs"), dict) else {}


def _update_manifest(out: Path, reports: Iterable[ConfigReport]) -> None:
    manifest = _read_manifest(out)
    configs = dict(manifest.get("configs", {}))
    for report in reports:
        configs[report.config] = report.to_manifest()
    document = {"dataset": DATASET, "split": SPLIT, "format": MANIFEST_FORMAT, "configs": dict(sorted(configs.items()))}
    _atomic_write(out / MANIFEST, json.dumps(document, sort_keys=True, ensure_ascii=False, indent=2) + "\n")


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
