"""A finished (or interrupted) run as every output reads it: the summary, the stored recommendation and
verification beside it, and the request records (parsed as the metrics read them), from the run directory."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from specmeter.engines.registry import plan_stats
from specmeter.errors import InputError, stored_file_message
from specmeter.metrics.requests import parse_records
from specmeter.schemas.plan import Plan
from specmeter.schemas.recommend import Recommendation
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.results import RunSummary
from specmeter.store import SUMMARY, RunStore, latest_records, load_summary

RECOMMENDATION = "recommendation.json"
VERIFY_DIR = "verify"


@dataclass
class RunData:
    run_dir: Path
    summary: RunSummary
    recommendation: Recommendation | None = None
    verification: RunData | None = None

    @property
    def run_id(self) -> str:
        return self.run_dir.name

    @cached_property
    def records(self) -> list[RequestRecord]:
        """The run's request records, one per request (the last written, as a resume leaves them), parsed."""
        return run_records(RunStore(self.run_dir), self.summary.plan)

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
    """The run in `run_dir` with its recommendation.json and its verify/ run when they exist."""
    summary = load_summary(run_dir)
    rec_path = run_dir / RECOMMENDATION
    recommendation = None
    if rec_path.exists():
        try:
            recommendation = Recommendation.model_validate_json(rec_path.read_text(encoding="utf-8"))
        except ValueError as exc:
            fix = f"fix it, or run `specmeter recommend {run_dir}` again to decide it anew"
            raise InputError(stored_file_message(rec_path, exc, "a recommendation", fix, Recommendation)) from exc
    named = recommendation.verified_in if recommendation is not None else None
    return RunData(run_dir, summary, recommendation, _verification(run_dir, named))


def _verification(run_dir: Path, named: str | None) -> RunData | None:
    """The verification of the recommendation (the one it names), else the latest: `verify/` (the demo,
    sweep --verify) or `<id>-verify/`, and `-r<n>` after them for the rounds that verified a correction."""
    if named is not None and (run_dir / named / SUMMARY).exists():
        return load_run(run_dir / named)
    found = sorted((d for d in run_dir.iterdir() if d.is_dir() and is_verification(d.name)
                    and (d / SUMMARY).exists()), key=lambda d: d.stat().st_mtime)
    return load_run(found[-1]) if found else None


def is_verification(name: str) -> bool:
    base = name.rsplit("-r", 1)[0] if name.rsplit("-r", 1)[-1].isdigit() else name
    return base == VERIFY_DIR or base.endswith("-" + VERIFY_DIR)
