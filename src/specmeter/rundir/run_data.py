"""A finished (or interrupted) run as every output reads it: the summary, the stored recommendation and
verification beside it, the step-cost model fitted on it, and the request records (parsed as the metrics read them),
from the run directory."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from pydantic import ValidationError

from specmeter.engines.registry import plan_stats
from specmeter.metrics.requests import parse_records
from specmeter.rundir.answer import Answer, read_answer
from specmeter.rundir.store import CALIBRATION, SUMMARY, RunStore, latest_records, load_summary
from specmeter.schemas.plan import Plan
from specmeter.schemas.planner import Calibration
from specmeter.schemas.recommend import Recommendation
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.results import RunSummary

VERIFY_DIR = "verify"
# The tune loop's measurements of Ks the step-cost model proposed: propose/, then propose-2/, ... (store.free_name).
PROPOSE_DIR = "propose"


@dataclass
class RunData:
    run_dir: Path
    summary: RunSummary
    answer: Answer | None = None  # the run's recommendation rounds (a verification run has none)
    verification: RunData | None = None

    @property
    def recommendation(self) -> Recommendation | None:
        """The run's answer: its latest recommendation round."""
        return self.answer.recommendation if self.answer is not None else None

    @property
    def run_id(self) -> str:
        return self.run_dir.name

    @cached_property
    def records(self) -> list[RequestRecord]:
        """The run's request records, one per request (the last written, as a resume leaves them), parsed."""
        return run_records(RunStore(self.run_dir), self.summary.plan)

    @cached_property
    def calibration(self) -> Calibration | None:
        """The step-cost model the sweep fitted on its own points (calibration.json), where it wrote one; a file
        of another schema is no calibration of this run's reports (`specmeter plan` fits again)."""
        try:
            return Calibration.model_validate_json((self.run_dir / CALIBRATION).read_text(encoding="utf-8"))
        except (OSError, ValidationError):
            return None

    @property
    def engine_version(self) -> str | None:
        return next((c.engine_version for c in self.summary.configs if c.engine_version), None)

    @property
    def target_hash(self) -> str | None:
        """The target's weights hash (model.safetensors), or its one hash: which model the numbers are of."""
        target = self.summary.models.get("target", {})
        sha = target.get("sha256") if isinstance(target, dict) else None
        weights = sha.get("model.safetensors") if isinstance(sha, dict) else sha
        return weights if isinstance(weights, str) else None

    def identity(self) -> str:
        """One line that names the run on every plot and page: id, kind, engine, target hash, date."""
        s = self.summary
        parts = [self.run_id, s.plan.kind, self.engine_version or "engine ?"]
        if self.target_hash:
            parts.append(f"target {self.target_hash[:10]}")
        parts.append(s.created_utc[:16].replace("T", " ") + " UTC")
        return " · ".join(parts)


def run_records(store: RunStore, plan: Plan) -> list[RequestRecord]:
    """A run's records, one per request (the last written), with the per-request SD stats parsed by the engine
    of the configuration that served each."""
    return parse_records(latest_records(store.read_records()), plan_stats(plan))


def load_run(run_dir: Path) -> RunData:
    """The run in `run_dir` with its answer (recommendation rounds) and the verification of that answer (else the
    latest verify/ run) when they exist."""
    answer = read_answer(run_dir)
    return RunData(run_dir, load_summary(run_dir), answer, _verification(run_dir, _verified_in(answer)))


def _verified_in(answer: Answer | None) -> str | None:
    """The verification of the answer; for a round not verified yet, that of the round it came from."""
    if answer is None:
        return None
    for r in reversed(answer.rounds):
        if r.recommendation.verified_in is not None:
            return r.recommendation.verified_in
    return None


def _verification(run_dir: Path, named: str | None) -> RunData | None:
    """The verification of the recommendation (the one it names), else the latest: `verify/` (the demo,
    sweep --verify) or `<id>-verify/`, and `-r<n>` after them for the rounds that verified a correction."""
    if named is not None and (run_dir / named / SUMMARY).exists():
        return _verification_run(run_dir / named)
    found = sorted((d for d in run_dir.iterdir() if d.is_dir() and is_verification(d.name)
                    and (d / SUMMARY).exists()), key=lambda d: d.stat().st_mtime)
    return _verification_run(found[-1]) if found else None


def _verification_run(verify_dir: Path) -> RunData:
    """A verification's own run: the table it ran is a round of the run it verified, not an answer of its own."""
    return RunData(verify_dir, load_summary(verify_dir))


def is_verification(name: str) -> bool:
    base = name.rsplit("-r", 1)[0] if name.rsplit("-r", 1)[-1].isdigit() else name
    return base == VERIFY_DIR or base.endswith("-" + VERIFY_DIR)


def _proposal_number(name: str) -> int | None:
    """1 for propose/, n for propose-<n>/, None for any other name."""
    if name == PROPOSE_DIR:
        return 1
    head, sep, tail = name.rpartition("-")
    return int(tail) if sep and head == PROPOSE_DIR and tail.isdigit() and int(tail) > 1 else None


def proposal_dirs(run_dir: Path) -> list[Path]:
    """The run's proposal measurements that wrote a summary, in the order they ran."""
    found = [(n, d) for d in run_dir.iterdir() if d.is_dir() and (n := _proposal_number(d.name)) is not None
             and (d / SUMMARY).exists()]
    return [d for _, d in sorted(found)]

