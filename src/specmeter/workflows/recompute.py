"""`specmeter report RUN --recompute`: every point's results and the run's decisions derived again from the files
the run stored (captures/ and requests.jsonl), by this specmeter's metrics, and written back to summary.json.

So an old run gains new metrics, and anyone can re-audit the counter reconciliation from the files alone. A
point with no capture (measured by specmeter 0.1.0, or never finished) keeps the results it has, and says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from specmeter.analysis.decide import analyze
from specmeter.engines.registry import get_engine
from specmeter.results.summarize import summarize_point
from specmeter.rundir.run_data import is_verification, run_records
from specmeter.rundir.store import SUMMARY, RunStore, load_summary
from specmeter.schemas.plan import Role


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
    """Recompute the run in `run_dir` and the verification runs inside it; one `Recomputed` per run directory."""
    out = [_recompute_one(run_dir)]
    for sub in sorted(run_dir.iterdir()):
        if sub.is_dir() and is_verification(sub.name) and (sub / SUMMARY).exists():
            out.append(_recompute_one(sub))
    return out


def _recompute_one(run_dir: Path) -> Recomputed:
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
            result.points[i] = summarize_point(capture, records, plan.point(stored.point_id), get_engine(kind).stats,
                                               expect_sd=config.role is Role.candidate, spec=config.spec,
                                               load=plan.load_for(config))
            done.points += 1
    if summary.analysis is not None:
        summary.analysis = analyze(summary, run_records(store, plan))
    store.write_summary(summary)
    return done
