"""The tune loop's proposals: after the sweep and its calibration, before the answer's round 1 is decided, the
step-cost model proposes the draft lengths the sweep did not run where it predicts they beat the K chosen
(predict.proposals). At most `budget` of them, the largest predicted edge first, run head to head on the sweep's
servers into the run's propose/ directory (plans.propose). The answer is then decided on the sweep and the
proposals pooled (workflows.evidence), where a proposed K enters the table only through the head-to-head walk
every K goes through.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from specmeter.common.errors import InputError
from specmeter.config.criteria import Criteria
from specmeter.config.tune import DEFAULT_BUDGET
from specmeter.execution.servers import ServerPool
from specmeter.plans.propose import propose_execution
from specmeter.plans.verify import best_static
from specmeter.predict.observations import drafter_key, request_mix
from specmeter.predict.predict import Predictor
from specmeter.predict.profiles import drafter_profiles
from specmeter.predict.proposals import Proposal, inside_zone, proposals, ranked
from specmeter.report.recommendation import predicted_text, proposal_lines
from specmeter.rundir.run_data import PROPOSE_DIR
from specmeter.rundir.store import free_name
from specmeter.schemas.planner import Calibration
from specmeter.schemas.proposal import Contest
from specmeter.schemas.recommend import Recommendation
from specmeter.schemas.results import RunSummary
from specmeter.workflows.evidence import answer_evidence
from specmeter.workflows.execute import measure_and_keep
from specmeter.workflows.recommend import decide
from specmeter.workflows.terminal import Terminal

# One proposed K: the model's best bet, measured. On the demo (K 2 and 4 at three loads) it is one more server
# start and, at the points it could win, the sweep's rounds again with one configuration more; each further K
# costs about as much again, for a smaller predicted edge.


@dataclass(frozen=True)
class ProposeRequest:
    """How many proposed Ks to measure at most (0: none), within which Ks (None: each drafter's K range in the sweep
    file, else its measured span widened by one on each side), decided by which criteria, and how their points run
    (`repeats` None: adaptive)."""

    budget: int = DEFAULT_BUDGET
    k_range: tuple[int, int] | None = None
    criteria: Criteria = field(default_factory=Criteria)
    repeats: int | None = None
    api_key: str | None = None
    command: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.budget < 0:
            raise InputError(f"--propose {self.budget}: give the most proposed Ks to measure, at least 0 (0: none), "
                             f"e.g. --propose {DEFAULT_BUDGET}")
        if self.k_range is not None and not 1 <= self.k_range[0] <= self.k_range[1]:
            raise InputError(f"--propose-k {self.k_range[0]}-{self.k_range[1]}: give the Ks a proposal may take as "
                             "LOW-HIGH with 1 <= LOW <= HIGH, e.g. --propose-k 1-6")


def found_proposals(summary: RunSummary, run: str, cal: Calibration, rec: Recommendation,
                    k_range: tuple[int, int] | None) -> tuple[list[Proposal], list[Proposal], str]:
    """Every proposal the model makes over `rec`'s drafters: those worth measuring, ranked, those predicted inside
    the indifference zone (inside_zone), and why there are none where so."""
    if summary.plan.workload.lengths:
        return [], [], "an input-length axis has a table per length, and proposals are made for one table"
    mix = request_mix(summary)
    if mix is None:
        return [], [], "no completed request to read prompt and output lengths from"
    predictor = Predictor.calibrated(cal, mix)
    profiles = drafter_profiles(summary, run)
    found: list[Proposal] = []
    for d in rec.drafters:
        family = [summary.plan.config(cid) for cid in d.candidates]
        # A tree's acceptance and cost are not a chain's, and an attached server cannot be relaunched at another K.
        if not family or any(c.spec.drafts_tree or not c.engine.launch or c.node_group for c in family):
            continue
        key = drafter_key(family[0].spec)
        if key in profiles and key in predictor.model.drafters:  # --propose-k over the sweep file's K range
            found += proposals(predictor, key, profiles[key], d, [c.k for c in family], min_gain=rec.min_gain,
                               k_range=k_range or next((c.k_range for c in family if c.k_range), None))
    measure, ties = inside_zone(found, rec.indifference)
    return ranked(measure), ties, "no unmeasured K is predicted to beat the K chosen at any measured point"


def tie_text(ties: list[Proposal], zone: float) -> str:
    """The proposals set aside inside the indifference zone, e.g. 'proposals inside the 3% indifference zone, not
    measured: draft_model demo-draft K=5 at c1 (+1.8% over K=4) (...)'."""
    def over(c: Contest) -> str:
        return f"at {'/'.join(c.point_ids)} ({c.edge - 1:+.1%} over " + (
            f"K={c.incumbent_k})" if c.incumbent_k else "speculation off)")

    where = "; ".join(f"{p.drafter} K={p.k} " + ", ".join(map(over, p.contests)) for p in ties)
    return (f"proposals inside the {zone:.0%} indifference zone, not measured: {where} (as predicted, a tie: either "
            "K is right; a narrower --indifference measures them)")


def propose(run_dir: Path, cal: Calibration | None, req: ProposeRequest, term: Terminal, pool: ServerPool | None,
            keep: Callable[[RunSummary], None] = lambda _: None) -> None:
    """Measure the best proposals of the model calibrated on the run's sweep (`cal`) head to head into the run's
    next propose directory; `keep` receives that run's summary. Nothing is measured without a calibration."""
    if req.budget == 0 or cal is None:
        return
    summary = answer_evidence(run_dir).summary  # the sweep, with any K measured before as one of its own
    rec = decide(run_dir, req.criteria)
    found, ties, why = found_proposals(summary, str(run_dir), cal, rec, req.k_range)
    if ties:
        term.human.print(f"[dim]{tie_text(ties, rec.indifference or 0.0)}[/]", highlight=False)
    if not found:
        if not ties:
            term.human.print(f"[dim]proposals: none; {why}[/]", highlight=False)
        return
    chosen = found[:req.budget]
    target = free_name(run_dir / PROPOSE_DIR)
    ex = propose_execution(run_dir, summary, rec, chosen, repeats=req.repeats, api_key=req.api_key,
                           command=req.command)
    for p in ex.plan.proposed:
        term.human.print(f"[bold]proposed by the step-cost model, measured head to head in {target.name}/: "
                         f"{predicted_text(p)}[/]", highlight=False)
    if len(found) > len(chosen):
        term.human.print(f"[dim]proposals over the budget (--propose {req.budget}), not measured: "
                         + "; ".join(f"K={p.k} of {p.drafter} (+{p.edge - 1:.1%})" for p in found[len(chosen):])
                         + "[/]", highlight=False)
    needed: set[str] = set()
    try:
        measure_and_keep(ex, target, term, keep, pool, show=False)
        decided = decide(run_dir, req.criteria)  # as round 1 will read them: on the sweep and the proposals pooled
        for line in proposal_lines(decided, full=False):
            term.human.print(f"[bold]{line.text}[/]", highlight=False)
        needed = {p.config_id for p in decided.proposed if any(c.outcome == "won" for c in p.contests)}
        base = summary.plan.main_baseline
        if decided.best is not None and base is not None:  # verification runs the best static K against the table
            needed |= set(best_static(decided.best, base.id).values())
    finally:  # a proposal neither in the table nor verification's best static K somewhere: free its server
        if pool is not None:
            for config in ex.plan.configs:
                if any(config.id == p.config_id for p in ex.plan.proposed) and config.id not in needed:
                    pool.stop(config)
