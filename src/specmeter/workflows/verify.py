"""Recommend, verify, and correct until the table holds: the run-directory choreography of the deploy answer.

Verification runs the run's answer (its latest round, rundir.answer) against the baseline and each point's best
static K. Where a static K other than the table's beats it head to head at the batch the engine ran, the table is
corrected from the pooled evidence (analysis.correction) into the next round and, while rounds remain, that
correction is verified in its turn (verify-r<n>/). Each round's states are files of their own, written once and
only after the step that produced them succeeded: a refused or failed verification leaves the run's files as they
were (what it measured stays in its own directory). recommendation.json points at the latest state.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from specmeter.analysis.correction import correct, disagreements, same_table
from specmeter.analysis.identity import table_mismatch
from specmeter.analysis.verify import collapsed_table, ignored_table
from specmeter.common.errors import InputError
from specmeter.config.criteria import Criteria
from specmeter.config.endpoints import normalize_endpoint
from specmeter.config.models import SpecConfig
from specmeter.engines.deploy import sweep_engine, with_deploy_configs
from specmeter.execution.runner import Execution
from specmeter.execution.servers import ServerPool
from specmeter.plans.verify import verify_execution
from specmeter.report.console import VERBOSE, render_recommendation
from specmeter.rundir.answer import ANSWER_DIR, Answer, read_answer, write_round
from specmeter.rundir.lock import writing
from specmeter.rundir.run_data import run_records
from specmeter.rundir.store import REQUESTS, RunStore, atomic_write_text, load_summary, new_run_id
from specmeter.schemas.recommend import Recommendation, VerificationState
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.results import RunSummary
from specmeter.workflows.evidence import answer_evidence
from specmeter.workflows.execute import measure_and_keep, showing, write_page
from specmeter.workflows.recommend import decide, read_recommendation, refuse_other_criteria
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
    every_point: bool = False
    command: list[str] | None = None

    def run(self, rec: Recommendation, rounds: int, number: int, on_disk: bool) -> Recommendation:
        """Verify `rec` as round `number` (`on_disk`: its decided state is written already), correct it where
        verification disagrees, and verify the correction, at most `rounds` times; returns the final answer."""
        pooled = answer_evidence(self.run_dir)  # the sweep, with the Ks the model proposed measured into it
        sweep = pooled.summary
        evidence = (sweep, pooled.records)
        verified: list[tuple[RunSummary, list[RequestRecord]]] = []
        for i in range(1, rounds + 1):
            target = self.first_dir if i == 1 else _free(self.first_dir.with_name(f"{self.first_dir.name}-r{i}"))
            table = rec.best.spec if rec.best is not None else None
            endpoint = self.serve(table) if self.serve is not None and table is not None else None
            if i > 1 and self.serve is not None and endpoint is None:
                self.say("the verified server was attached (--endpoint): relaunch it with the corrected config and "
                         f"`specmeter verify {self.run_dir}` verifies round {number}")
                return rec
            # Every check of the plan (endpoints, configs) before anything is written.
            ex = verify_execution(self.run_dir, sweep, rec, endpoint=endpoint, repeats=self.repeats,
                                  api_key=self.api_key, every_point=self.every_point, futile=pooled.futile,
                                  command=self.command)
            self._execute(ex, target, rec)
            if ex.plan.carried:  # said once it ran: a refused verification prints its one line and nothing else
                proof = " only to prove the config starts and drafts the K it names" if ex.plan.proof else ""
                self.say(f"verification of round {number} ran at {', '.join(p.id for p in ex.plan.points)}{proof}; "
                         f"the sweep's evidence, settled or stopped for futility, stands at "
                         f"{', '.join(ex.plan.carried)} (--every-point runs those too)")
            verify = load_summary(target)
            if (why := table_mismatch(verify)) is not None:  # it verified another config than the table
                raise InputError(f"{why}: it does not run the table, so it verifies nothing; start it with the "
                                 f"table's config (`specmeter recommend {self.run_dir}` prints it) and verify again "
                                 f"(what this measured stays in {target})")
            verified.append((verify, _records(target)))
            done = rec.model_copy(deep=True)
            done.verified_in = str(target.relative_to(self.run_dir)) if target.is_relative_to(self.run_dir) \
                else str(target)
            failures: list[tuple[VerificationState, str | None]] = [("ignored", ignored_table(verify)),
                                                                     ("collapsed", collapsed_table(verify))]
            for state, failed in failures:
                if failed is not None:  # what it measured is not the table the sweep's static Ks stand for
                    done.verification = state
                    self._write(rec, done, number, on_disk)
                    self.say(f"verification of round {number} failed: {failed}")
                    return done
            wrong = disagreements(verify)
            done.verification = "disagreed" if wrong else "held"
            if not wrong:
                self._write(rec, done, number, on_disk)
                self.say(f"verification of round {number}: the table held at every verified point")
                return done
            for line in wrong:
                self.say(f"verification of round {number}: {line}")
            contradicted = f"{ANSWER_DIR}/r{number}-verified.json"
            corrected = with_deploy_configs(correct(evidence, verified, done, contradicted), sweep_engine(sweep.plan))
            if same_table(corrected, done):
                done.verification = "kept"
                self._write(rec, done, number, on_disk)
                self.say("decided again on the pooled evidence of sweep and verification, the table stands")
                return done
            self._write(rec, done, number, on_disk)
            number, on_disk, rec = number + 1, True, corrected
            write_round(self.run_dir, rec, "decided", number)
            self.say(f"corrected table (round {number}): {'; '.join(rec.changes[:1])}; the answer is now round "
                     f"{number} ({self.run_dir / ANSWER_DIR}), round {number - 1} kept as history")
            if rec.best is None or rec.best.spec is None:
                self.say("the corrected answer drafts nothing at any batch size (serve without speculation): there "
                         "is no table left to verify")
                return rec
        self.say(f"the rounds ran out ({rounds}) before a table held: round {number} is not verified yet; "
                 f"`specmeter verify {self.run_dir}` runs it")
        return rec

    def _execute(self, ex: Execution, target: Path, rec: Recommendation) -> None:
        """Measure into `target`; a verification that failed before measuring anything leaves no directory."""
        existed = target.exists()
        try:
            self.execute(ex, target)
        except BaseException:
            if not existed and target.is_dir() and not (target / REQUESTS).exists():
                shutil.rmtree(target, ignore_errors=True)
            raise
        finally:  # a corrected table runs on a server of its own: free this one's memory first
            if self.pool is not None:
                self.pool.stop(ex.plan.configs[-1])
            if target.is_dir():  # the verification's own copy of the table it ran
                atomic_write_text(target / RECOMMENDATION, rec.model_dump_json(indent=2) + "\n")

    def _write(self, decided: Recommendation, verified: Recommendation, number: int, on_disk: bool) -> None:
        """Round `number` after its verification: its decided state first where it is new (a table the user gave,
        or one verified again), then the verified one."""
        if not on_disk:
            write_round(self.run_dir, decided, "decided", number)
        write_round(self.run_dir, verified, "verified", number)


def _free(path: Path) -> Path:
    """`path`, or the first `path`-<i> nobody wrote yet: a verification never writes into another's directory."""
    candidate, i = path, 2
    while candidate.exists():
        candidate, i = path.with_name(f"{path.name}-{i}"), i + 1
    return candidate


def _records(run_dir: Path) -> list[RequestRecord]:
    return run_records(RunStore(run_dir), load_summary(run_dir).plan)


@dataclass(frozen=True)
class VerifyRequest:
    """What to verify and how: the run's answer (decided by `criteria` when it has none yet), or the `given`
    recommendation.json as a new round; at most `rounds` verification rounds; `endpoint` attaches to a server
    already running the table."""

    criteria: Criteria = field(default_factory=Criteria)
    given: Path | None = None
    rounds: int = 1
    repeats: int | None = None
    every_point: bool = False  # also the points whose decisions the sweep settled
    endpoint: str | None = None
    api_key: str | None = None
    verify_dir: Path | None = None  # default: a new verify-<timestamp> directory inside the run directory
    # The demo and `sweep --verify`: the sweep's decided table is its answer, written as round 1 before it is
    # verified, and a recommendation to serve without speculation is that answer, not an error; `specmeter
    # verify` asked for a config to run and says there is none.
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
    proposals: list[RunSummary] = field(default_factory=list)  # the runs that measured proposed Ks

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
        if self.proposals:
            parts["proposals"] = [json.loads(p.model_dump_json()) for p in self.proposals]
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
    """Verify the run's answer (deciding round 1 where it has none, or taking the given table as a new round),
    correct it where verification disagrees, verifying the correction while `req.rounds` remain; `answer`
    collects what came of it. The caller shows the run directory when it ends (`showing`): the answer first."""
    rec, number, on_disk = _to_verify(run_dir, req)
    if req.off_is_an_answer and not on_disk:  # the sweep's own answer stands whatever verification does
        write_round(run_dir, rec, "decided", number)
        on_disk = True
    if not term.json_out:  # -v: the table about to be verified, before verification may correct it
        render_recommendation(rec, term.detail, verbosity=VERBOSE, title=f"Round {number}, to verify")
    answer.recommendation = rec
    if rec.best is None or rec.best.spec is None:
        if not req.off_is_an_answer:
            raise InputError(f"{run_dir}: round {number} drafts nothing at any batch size (serve without "
                             "speculation): there is no speculative config to verify")
        term.note.print("[yellow]nothing to verify: no K clearly beats the baseline at any measured point, so the "
                       "answer is to serve without speculation; more rounds (load.max_rounds) or longer outputs "
                       "narrow the intervals if the speedups looked close[/]")
        write_page(run_dir, term)  # the sweep's page now shows the recommendation
        return
    first_dir = req.verify_dir or run_dir / new_run_id("verify")
    if first_dir.exists() and any(first_dir.iterdir()):
        raise InputError(f"--verify-dir {first_dir}: exists and is not empty; a verification writes a directory of "
                         "its own: give a new path, or leave --verify-dir out")

    def verify_round(ex: Execution, target: Path) -> None:
        measure_and_keep(ex, target, term, answer.verifications.append, pool, show=False)

    loop = VerifyLoop(run_dir=run_dir, execute=verify_round,
                      say=lambda line: term.human.print(f"[bold]{line}[/]", highlight=False),
                      first_dir=first_dir, pool=pool,
                      serve=None if req.endpoint is None else _attached(req.endpoint, rec), repeats=req.repeats,
                      api_key=req.api_key, every_point=req.every_point, command=req.command)
    final = loop.run(rec, req.rounds, number, on_disk)
    write_page(run_dir, term)  # the run's page now shows the answer and its verification
    answer.recommendation = final


def _to_verify(run_dir: Path, req: VerifyRequest) -> tuple[Recommendation, int, bool]:
    """The table to verify, its round number, and whether that round's decided state is on disk already. Reads
    and decides only: nothing is written here."""
    current = read_answer(run_dir)
    latest = current.latest.number if current is not None else 0
    if req.given is not None:
        rec = read_recommendation(req.given)
        rec.verification, rec.verified_in, rec.corrects = "not run", None, None
        rec.changes = [f"given: {req.given}", *rec.changes]
        return rec, latest + 1, False
    if current is None:
        return decide(run_dir, req.criteria), 1, False
    refuse_other_criteria(run_dir, current, req.criteria, "verify")
    if current.latest.stage == "decided":
        return current.recommendation, latest, True
    again = _unverified(current)
    again.changes = [f"round {latest}'s table, verified again"]
    return again, latest + 1, False


def _unverified(answer: Answer) -> Recommendation:
    rec = answer.recommendation.model_copy(deep=True)
    rec.verification, rec.verified_in, rec.corrects = "not run", None, None
    return rec


def verify(run_dir: Path, req: VerifyRequest, term: Terminal) -> None:
    """The command: recommend -> verify -> correct on a finished sweep; under --json one document with the
    final recommendation and every verification's summary."""
    with writing(run_dir, "specmeter verify"), answering(DeployAnswer(), term) as answer, showing(run_dir, term):
        recommend_and_verify(run_dir, req, term, None, answer)


def _attached(endpoint: str, rec: Recommendation) -> Callable[[SpecConfig], str | None]:
    """--endpoint runs the table given; a corrected table has no server until the user starts one."""
    first = rec.best.spec if rec.best is not None else None
    return lambda spec: endpoint if spec == first else None
