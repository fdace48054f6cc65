"""`specmeter recommend`: the run's answer, the best K per engine batch-size range, rendered for the engine the
sweep ran. The first call decides it from the sweep (round 1); later calls show the latest round (verified,
corrected or kept) with the earlier ones as history. Deciding again on other criteria is explicit (`--again`) and
writes a new round; it never replaces one."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from specmeter.analysis.by_length import per_length
from specmeter.analysis.proposed import judged
from specmeter.analysis.recommend import recommend as decide_table
from specmeter.common.errors import InputError
from specmeter.config.criteria import AnswerRound, Criteria, check_indifference
from specmeter.config.files import build_model
from specmeter.config.flags import flagged
from specmeter.engines.deploy import sweep_engine, with_deploy_configs
from specmeter.report.console import QUIET, VERBOSE, render_recommendation, render_rounds
from specmeter.report.recommendation import answer_document
from specmeter.rundir.answer import Answer, Round, next_round, read_answer, write_round
from specmeter.rundir.lock import writing
from specmeter.rundir.store import load_summary
from specmeter.schemas.recommend import Recommendation
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.results import RunSummary
from specmeter.workflows.evidence import answer_evidence
from specmeter.workflows.execute import write_page
from specmeter.workflows.terminal import Terminal


def differences(criteria: Criteria, rec: Recommendation) -> list[tuple[str, str, str]]:
    """The criteria given that differ from those `rec` was decided with: (flag, given, rec's)."""
    flags = {name: flag.name for name, _info, flag in flagged(Criteria)} | {"slo": "--slo"}
    given = [(flags[name], getattr(criteria, name), getattr(rec, name)) for name in Criteria.model_fields]
    return [(flag, _show(mine), _show(theirs)) for flag, mine, theirs in given if mine is not None and mine != theirs]


def _show(value: object) -> str:
    if isinstance(value, BaseModel):
        return ",".join(f"{k}={v:g}" for k, v in value.model_dump(exclude_none=True).items())
    return str(value)


def refuse_other_criteria(run_dir: Path, answer: Answer, criteria: Criteria, command: str) -> None:
    """A run with an answer is not decided again by accident: criteria other than its answer's need --again."""
    differ = differences(criteria, answer.recommendation)
    if differ:
        n = answer.latest.number
        was = ", ".join(f"{name} {theirs}" for name, _, theirs in differ)
        flags = " ".join(f"{name} {mine}" for name, mine, _ in differ)
        raise InputError(f"{run_dir}: its answer, round {n} (verification {answer.latest.verification}), was decided "
                         f"with {was}; `specmeter recommend {run_dir} {flags} --again` decides a new round {n + 1} "
                         "(the earlier rounds stay as history)" + (", then verify it" if command == "verify" else ""))


def decide(run_dir: Path, criteria: Criteria) -> Recommendation:
    """Recommend from a run directory, on the sweep with the Ks the step-cost model proposed pooled in, and render
    it for the engine the sweep ran (nothing is written)."""
    evidence = answer_evidence(run_dir)
    plan = evidence.summary.plan
    engine = sweep_engine(plan)
    check_indifference(criteria.indifference, plan.min_gain if criteria.min_gain is None else criteria.min_gain)

    def one(part: RunSummary, recs: Sequence[RequestRecord]) -> Recommendation:
        table = decide_table(part, recs, objective=criteria.objective or "throughput", slo=criteria.slo,
                             max_num_seqs=criteria.max_num_seqs, source_run=str(run_dir),
                             min_gain=criteria.min_gain, indifference=criteria.indifference)
        return with_deploy_configs(table, engine)
    rec = per_length(evidence.summary, evidence.records, one)  # an input-length axis: a table per length
    rec.proposed = [judged(p, rec) for p in evidence.proposed]
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


def recommend(run_dir: Path, criteria: Criteria, term: Terminal, ask: AnswerRound | None = None) -> Recommendation:
    """The command: the run's answer (decided as round 1 where there is none, or as a new round with --again),
    with its evidence, what to deploy and the earlier rounds (or the JSON); a new round joins the run's page."""
    load_summary(run_dir)  # a damaged run is refused by every command, also where only its answer is shown
    current = read_answer(run_dir)
    ask = ask or AnswerRound()
    if ask.round is not None:
        if current is None:
            raise InputError(f"--round {ask.round}: {run_dir} has no recommendation yet; `specmeter recommend "
                             f"{run_dir}` decides round 1")
        shown = current.at(ask.round)
        show_answer(current, term, shown=shown)
        return shown.recommendation
    if current is not None and not ask.again:
        refuse_other_criteria(run_dir, current, criteria, "recommend")
        show_answer(current, term)
        return current.recommendation
    with writing(run_dir, "specmeter recommend"):
        return _decide_round(run_dir, criteria, term, current)


def _decide_round(run_dir: Path, criteria: Criteria, term: Terminal, current: Answer | None) -> Recommendation:
    """A new round of the run's answer, decided, written and shown."""
    rec = decide(run_dir, criteria)
    number = next_round(run_dir)
    if current is not None:
        differ = differences(criteria, current.recommendation)
        rec.changes = [f"decided again after round {current.latest.number} (verification "
                       f"{current.latest.verification}), with "
                       + (", ".join(f"{name} {mine}" for name, mine, _ in differ) or "the same criteria")]
    write_round(run_dir, rec, "decided", number)
    write_page(run_dir, term)
    answer = read_answer(run_dir)
    assert answer is not None  # just written
    show_answer(answer, term)
    return rec


def show_answer(answer: Answer, term: Terminal, shown: Round | None = None) -> None:
    """The answer (or the round asked for) first, then the earlier rounds; under --json one document."""
    if term.json_out:
        term.emit(answer_document(answer, shown))
        return
    # The command is asked for the table and why: its evidence shows unless -q asks for the answer alone.
    render_recommendation((shown or answer.latest).recommendation, term.answer,
                          verbosity=QUIET if term.quiet else VERBOSE)
    if not term.quiet:
        render_rounds(answer, term.answer, shown)
