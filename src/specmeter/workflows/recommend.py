"""`specmeter recommend`: the best K per engine batch-size range from a sweep's run directory, rendered for
the engine the sweep ran and written beside it as recommendation.json."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from specmeter.analysis.by_length import per_length
from specmeter.analysis.recommend import recommend as decide_table
from specmeter.config_files import build_model
from specmeter.engines.deploy import render, sweep_engine
from specmeter.errors import InputError
from specmeter.report.console import render_recommendation
from specmeter.run_data import run_records
from specmeter.schemas.recommend import SLO, Objective, Recommendation
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.results import RunSummary
from specmeter.store import RunStore, atomic_write_text, load_summary
from specmeter.workflows.execute import write_page
from specmeter.workflows.terminal import Terminal


@dataclass(frozen=True)
class Criteria:
    """How the table is decided: the objective, goodput's bounds, where the last range ends (None: the
    run's max_num_seqs) and what a costlier configuration must win by (None: the sweep's)."""

    objective: Objective = "throughput"
    slo: SLO | None = None
    max_num_seqs: int | None = None
    min_gain: float | None = None

    @classmethod
    def from_flags(cls, objective: str, slo: str | None, max_num_seqs: int | None = None,
                   min_gain: float | None = None) -> Criteria:
        """--objective, --slo ttft_ms=500,tpot_ms=50, --max-num-seqs and --min-gain, checked."""
        if objective not in ("throughput", "tpot", "goodput"):
            raise InputError(f"--objective {objective!r}: choose throughput, tpot or goodput")
        if max_num_seqs is not None and max_num_seqs < 1:
            raise InputError(f"--max-num-seqs {max_num_seqs}: the engine's batch limit is at least 1, e.g. "
                             "--max-num-seqs 256 (or leave it out to read it from the run)")
        return cls(cast(Objective, objective), parse_slo(slo), max_num_seqs, check_min_gain(min_gain))


def check_min_gain(value: float | None) -> float | None:
    if value is not None and not 0.0 <= value < 1.0:
        raise InputError(f"--min-gain {value}: give a fraction in [0, 1), e.g. 0.01 for 1%")
    return value


def parse_slo(text: str | None) -> SLO | None:
    """--slo ttft_ms=500,tpot_ms=50 as an SLO (None: not given); a malformed one is a one-line error."""
    if text is None:
        return None
    raw: dict[str, Any] = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if not sep:
            raise InputError(f"--slo: expected KEY=VALUE pairs like ttft_ms=500,tpot_ms=50, got {item!r}")
        raw[key.strip()] = value.strip()
    slo: SLO = build_model(SLO, raw, "--slo")
    return slo


def decide(run_dir: Path, criteria: Criteria) -> Recommendation:
    """Recommend from a run directory, render it for the engine the sweep ran, and write recommendation.json
    beside it."""
    summary = load_summary(run_dir)
    records = run_records(RunStore(run_dir), summary.plan)
    engine = sweep_engine(summary.plan)

    def one(part: RunSummary, recs: Sequence[RequestRecord]) -> Recommendation:
        return render(decide_table(part, recs, objective=criteria.objective, slo=criteria.slo,
                                   max_num_seqs=criteria.max_num_seqs, source_run=str(run_dir),
                                   min_gain=criteria.min_gain), engine)
    rec = per_length(summary, records, one)  # an input-length axis: a table per length
    atomic_write_text(run_dir / "recommendation.json", rec.model_dump_json(indent=2) + "\n")
    return rec


def read_recommendation(path: Path) -> Recommendation:
    """A recommendation.json the user gives (e.g. one they edited), validated."""
    raw: Any
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"{path}: cannot read it ({exc.strerror}); give the recommendation.json that "
                         "`specmeter recommend` wrote") from exc
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from exc
    rec: Recommendation = build_model(Recommendation, raw, str(path))
    return rec


def recommend(run_dir: Path, criteria: Criteria, term: Terminal) -> Recommendation:
    """The command: decide, show the evidence and what to deploy (or the JSON), and put it on the run's page."""
    rec = decide(run_dir, criteria)
    if term.json_out:
        term.emit(rec.model_dump_json(indent=2))
    else:
        render_recommendation(rec, term.out)
    write_page(run_dir, term)
    return rec
