"""`specmeter report RUN --recompute`: every point's results and the run's decisions derived again from the files
the run stored (captures/ and requests.jsonl), by this specmeter's metrics, and written back to summary.json.

So an old run gains new metrics, and anyone can re-audit the counter reconciliation from the files alone. A
point with no capture (measured by specmeter 0.1.0, or never finished) keeps the results it has, and says so.
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from specmeter.analysis.decide import analyze
from specmeter.common.errors import InputError
from specmeter.engines.registry import get_engine
from specmeter.results.summarize import summarize_point
from specmeter.rundir.lock import writing
from specmeter.rundir.run_data import is_verification, run_records
from specmeter.rundir.store import SUMMARY, RunStore, load_summary
from specmeter.schemas.plan import Role
from specmeter.schemas.results import RunSummary
from specmeter.workflows.evidence import require_records


@dataclass
class Recomputed:
    """What `recompute` did to one run directory."""

    run_dir: Path
    points: int = 0  # point results derived again from their captures
    kept: list[str] = field(default_factory=list)  # "config/point rN" of points left as stored (no capture)

    def line(self) -> str:
        kept = (f"; {len(self.kept)} kept as stored (no capture: measured by specmeter 0.1.0 or never finished, "
                f"e.g. {self.kept[0]})" if self.kept else "")
        return f"{self.run_dir}: {self.points} point results recomputed from their captures{kept}"


def recompute(run_dir: Path) -> list[Recomputed]:
    """Recompute the run in `run_dir` and the verification runs inside it; one `Recomputed` per run directory.
    Every directory is derived before any summary.json is written, so a refusal leaves them all as they were."""
    dirs = [run_dir, *(sub for sub in sorted(run_dir.iterdir())
                       if sub.is_dir() and is_verification(sub.name) and (sub / SUMMARY).exists())]
    for d in dirs:
        load_summary(d)  # a damaged summary is named before the records are
        require_records(d, "report --recompute")
    with ExitStack() as held:  # no other command writes these runs while they are derived and rewritten
        for d in dirs:
            held.enter_context(writing(d, "specmeter report --recompute"))
        derived = [_recompute_one(d) for d in dirs]
        for _, store, summary in derived:
            store.write_summary(summary)
    return [done for done, _, _ in derived]


def _recompute_one(run_dir: Path) -> tuple[Recomputed, RunStore, RunSummary]:
    store = RunStore(run_dir)
    summary = load_summary(run_dir)
    plan = summary.plan
    records = store.read_records()
    done = Recomputed(run_dir)
    for result in summary.configs:
        config = plan.config(result.config_id)
        kind = config.engine.kind
        for i, stored in enumerate(result.points):
            capture = store.read_capture(result.config_id, stored.point_id, stored.repeat)
            if kind is None or capture is None or not capture.finished:
                done.kept.append(f"{result.config_id}/{stored.point_id} r{stored.repeat}")
                continue
            point = summarize_point(capture, records, plan.point(stored.point_id), get_engine(kind).stats,
                                    expect_sd=config.role is Role.candidate, spec=config.spec,
                                    load=plan.load_for(config))
            if point.latency.num_ok < stored.latency.num_ok:  # never replace a result with less
                raise InputError(f"{store.requests_path}: holds {point.latency.num_ok} finished requests of "
                                 f"{result.config_id}/{stored.point_id} r{stored.repeat}, summary.json counted "
                                 f"{stored.latency.num_ok}; the records are incomplete, so nothing was "
                                 "recomputed: restore requests.jsonl from a copy of the run")
            result.points[i] = point
            done.points += 1
    if summary.analysis is not None:
        summary.analysis = analyze(summary, run_records(store, plan))
    return done, store, summary
