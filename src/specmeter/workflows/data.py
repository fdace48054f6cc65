"""`specmeter data prepare`: a hub dataset fetched once (with network), filled, and written as JSONL plus a
manifest, so every benchmark after it runs offline."""

from __future__ import annotations

from pathlib import Path

from specmeter.common.errors import InputError
from specmeter.data.speed_bench import DEFAULT_REVISION
from specmeter.data.speed_bench_prepare import prepare
from specmeter.workflows.terminal import Terminal


def prepare_dataset(dataset: str, config: str, revision: str | None, out: Path, seed: int, term: Terminal) -> None:
    if dataset != "speed-bench":
        raise InputError(f"data prepare: unknown dataset {dataset!r}; available: speed-bench")
    report = prepare(config, revision=revision or DEFAULT_REVISION, out_dir=out, seed=seed)
    for line in report.lines():
        term.out.print(line, highlight=False)
    term.out.print(f"prepared into [cyan]{out}[/]; run: specmeter run --dataset speed-bench --dataset-path {out}")
