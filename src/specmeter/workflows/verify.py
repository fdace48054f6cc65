"""Recommend, verify, and correct until the table holds: the run-directory choreography of the deploy answer.

Round 1 verifies the recommendation the sweep gave. Where a static K other than the table's beats it head to
head at the batch the engine ran, the table is corrected from the pooled evidence (analysis.correction), the
contradicted table is kept beside it as recommendation-r<n>.json, and, while rounds remain, the corrected table
is verified in its turn (verify-r<n>/). recommendation.json always holds the latest answer and says whether it
held; the report's first screen shows it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from specmeter.analysis.correction import correct, disagreements, same_table
from specmeter.config import SpecConfig
from specmeter.endpoints import normalize_endpoint
from specmeter.engines.deploy import render, sweep_engine
from specmeter.errors import InputError
from specmeter.plans.verify import verify_execution
from specmeter.report.console import render_recommendation
from specmeter.run_data import run_records
from specmeter.runner import Execution
from specmeter.schemas.recommend import Recommendation
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.results import RunSummary
from specmeter.servers import ServerPool
from specmeter.store import RunStore, atomic_write_text, load_summary, new_run_id
from specmeter.workflows.execute import measure_and_keep, write_page
from specmeter.workflows.recommend import Criteria, decide, read_recommendation
from specmeter.workflows.terminal import Terminal

RECOMMENDATION = "recommendation.json"


@dataclass
class VerifyLoop:
    """What the loop needs from its caller: how to execute a plan into a directory, and where to say things."""

    run_dir: Path
    execute: Callable[[Execution, Path], None]
    say: Callable[[str], None]
    first_dir: Path
    pool: ServerPool | None = None
    # Attach mode: the endpoint of a server already running a table (None: specmeter launches the table).
    serve: Callable[[SpecConfig], str | None] | None = None
    repeats: int | None = None
    api_key: str | None = None
    command: list[str] | None = None

    def run(self, rec: Recommendation, rounds: int) -> Recommendation:
        """Verify `rec`, correct it where verification disagrees, and verify the correction, at most `rounds`
        times; returns the final answer (also written to recommendation.json)."""
        sweep = load_summary(self.run_dir)
        evidence = (sweep, _records(self.run_dir))
        verified: list[tuple[RunSummary, list[RequestRecord]]] = []
        for i in range(1, rounds + 1):
            target = self.first_dir if i == 1 else self.first_dir.with_name(f"{self.first_dir.name}-r{i}")
            target.mkdir(parents=True, exist_ok=True)
            atomic_write_text(target / RECOMMENDATION, rec.model_dump_json(indent=2) + "\n")
            table = rec.best.spec if rec.best is not None else None
            endpoint = self.serve(table) if self.serve is not None and table is not None else None
            if i > 1 and self.serve is not None and endpoint is None:
                self.say("the verified server was attached (--endpoint): relaunch it with the corrected config and "
                         "verify again")
                return rec
            ex = verify_execution(self.run_dir, sweep, rec, endpoint=endpoint, repeats=self.repeats,
                                  api_key=self.api_key, command=self.command)
            try:
                self.execute(ex, target)
            finally:  # a corrected table runs on a server of its own: free this one's memory first
                if self.pool is not None:
                    self.pool.stop(ex.plan.configs[-1])
            verify = load_summary(target)
            verified.append((verify, _records(target)))
            rec.verified_in = str(target.relative_to(self.run_dir)) if target.is_relative_to(self.run_dir) \
                else str(target)
            wrong = disagreements(verify)
            rec.verification = "disagreed" if wrong else "held"
            if not wrong:
                self._write(rec)
                self.say(f"verification round {i}: the table held at every verified point")
                return rec
            for line in wrong:
                self.say(f"verification round {i}: {line}")
            archived = f"recommendation-r{rec.round}.json"
            corrected = render(correct(evidence, verified, rec, archived), sweep_engine(sweep.plan))
            if same_table(corrected, rec):
                rec.verification = "kept"
                self._write(rec)
                self.say("decided again on the pooled evidence of sweep and verification, the table stands")
                return rec
            atomic_write_text(self.run_dir / archived, rec.model_dump_json(indent=2) + "\n")
            rec = corrected
            self._write(rec)
            self.say(f"corrected table (round {rec.round}): {'; '.join(rec.changes[:1])}; written to "
                     f"{self.run_dir / RECOMMENDATION}, the contradicted one kept as {archived}")
            if rec.best is None or rec.best.spec is None:
                self.say("the corrected answer drafts nothing at any batch size (serve without speculation): there "
                         "is no table left to verify")
                return rec
        self.say(f"the rounds ran out ({rounds}) before a table held: the corrected table is not verified yet; "
                 f"`specmeter verify {self.run_dir} --recommendation {self.run_dir / RECOMMENDATION}` runs it")
        return rec

    def _write(self, rec: Recommendation) -> None:
        atomic_write_text(self.run_dir / RECOMMENDATION, rec.model_dump_json(indent=2) + "\n")


def _records(run_dir: Path) -> list[RequestRecord]:
    return run_records(RunStore(run_dir), load_summary(run_dir).plan)


@dataclass(frozen=True)
class VerifyRequest:
    """What to verify and how: decide the table by `criteria`, or take the `given` recommendation.json; at most
    `rounds` verification rounds; `endpoint` attaches to a server already running the table."""

    criteria: Criteria = field(default_factory=Criteria)
    given: Path | None = None
    rounds: int = 1
    repeats: int | None = None
    endpoint: str | None = None
    api_key: str | None = None
    verify_dir: Path | None = None  # default: a new verify-<timestamp> directory inside the run directory
    # The demo and `sweep --verify`: a recommendation to serve without speculation is the sweep's answer, not
    # an error; `specmeter verify` asked for a config to run and says there is none.
    off_is_an_answer: bool = False
    command: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:  # a malformed --endpoint is refused before anything is decided or written
        try:
            normalize_endpoint(self.endpoint)
        except ValueError as exc:
            raise InputError(f"--endpoint: {exc}") from None


@dataclass
class DeployAnswer:
    """What a recommend -> verify workflow produced, as far as it got: under --json, its one document."""

    sweep: RunSummary | None = None
    recommendation: Recommendation | None = None
    verifications: list[RunSummary] = field(default_factory=list)

    def keep_sweep(self, summary: RunSummary) -> None:
        self.sweep = summary

    def document(self) -> str:
        # Each part as pydantic writes it (inf and nan as null), then one object around them.
        parts: dict[str, object] = {}
        if self.sweep is not None:
            parts["sweep"] = json.loads(self.sweep.model_dump_json())
        if self.recommendation is not None:
            parts["recommendation"] = json.loads(self.recommendation.model_dump_json())
        parts["verifications"] = [json.loads(v.model_dump_json()) for v in self.verifications]
        return json.dumps(parts, indent=2)


@contextmanager
def answering(answer: DeployAnswer, term: Terminal) -> Iterator[DeployAnswer]:
    """Under --json, the answer is printed once at the end, also when a run stops or an error ends it early."""
    try:
        yield answer
    finally:
        if term.json_out and (answer.sweep is not None or answer.recommendation is not None):
            term.emit(answer.document())


def recommend_and_verify(run_dir: Path, req: VerifyRequest, term: Terminal, pool: ServerPool | None,
                         answer: DeployAnswer) -> None:
    """Recommend (or read a recommendation), run its dynamic config, and correct it where verification
    disagrees, verifying the correction while `req.rounds` remain; `answer` collects what came of it."""
    if req.given is None:
        rec = decide(run_dir, req.criteria)
        if not term.json_out:
            render_recommendation(rec, term.out)
    else:
        rec = read_recommendation(req.given)
    answer.recommendation = rec
    if req.off_is_an_answer and (rec.best is None or rec.best.spec is None):
        term.err.print("[yellow]nothing to verify: no K clearly beats the baseline at any measured point, so the "
                       "answer is to serve without speculation; more rounds (load.max_rounds) or longer outputs "
                       "narrow the intervals if the speedups looked close[/]")
        write_page(run_dir, term)  # the sweep's page now shows the recommendation
        return

    def verify_round(ex: Execution, target: Path) -> None:
        measure_and_keep(ex, target, term, answer.verifications.append, pool)

    loop = VerifyLoop(run_dir=run_dir, execute=verify_round,
                      say=lambda line: term.human.print(f"[bold]{line}[/]", highlight=False),
                      first_dir=req.verify_dir or run_dir / new_run_id("verify"), pool=pool,
                      serve=None if req.endpoint is None else _attached(req.endpoint, rec), repeats=req.repeats,
                      api_key=req.api_key, command=req.command)
    try:
        final = loop.run(rec, req.rounds)
    finally:  # the sweep's page now shows the recommendation and what of the verification finished
        write_page(run_dir, term)
    answer.recommendation = final
    if not term.json_out:
        render_recommendation(final, term.out, final=True)


def verify(run_dir: Path, req: VerifyRequest, term: Terminal) -> None:
    """The command: recommend -> verify -> correct on a finished sweep; under --json one document with the
    final recommendation and every verification's summary."""
    with answering(DeployAnswer(), term) as answer:
        recommend_and_verify(run_dir, req, term, None, answer)


def _attached(endpoint: str, rec: Recommendation) -> Callable[[SpecConfig], str | None]:
    """--endpoint runs the table given; a corrected table has no server until the user starts one."""
    first = rec.best.spec if rec.best is not None else None
    return lambda spec: endpoint if spec == first else None
