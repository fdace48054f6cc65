"""`specmeter demo`: the embedded default end to end. The sweep on vLLM CPU with the project's tiny pair, the Ks the
step-cost model proposes measured head to head, then recommend -> verify -> correct on the same servers, all in
one run directory."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specmeter.common.errors import InputError
from specmeter.config.criteria import check_indifference, check_min_gain
from specmeter.config.tune import Tuning
from specmeter.execution.servers import ServerPool
from specmeter.plans.demo import demo_plan
from specmeter.rundir.store import new_run_id
from specmeter.workflows.execute import measure_one, showing
from specmeter.workflows.plan import calibrate_sweep
from specmeter.workflows.propose import ProposeRequest, propose
from specmeter.workflows.terminal import Terminal
from specmeter.workflows.verify import DeployAnswer, VerifyRequest, recommend_and_verify


@dataclass(frozen=True)
class DemoRequest:
    """The demo's knobs: draft lengths, the load (its points and workload size), and how rounds are decided
    (`repeats` None: adaptive, each point until its decisions settle, at most `max_rounds`)."""

    out: Path
    ks: list[int]
    load: dict[str, Any]  # LoadSpec settings: concurrency, workload size (num_prompts, max_tokens), max_rounds, ...
    repeats: int | None = None
    tuning: Tuning = field(default_factory=Tuning)  # the proposed Ks and the verification rounds
    min_gain: float = 0.01
    indifference: float | None = None  # None: the sweep's default
    command: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:  # each flag named, before anything is planned or started
        if self.load.get("concurrency") == "auto":
            raise InputError("--concurrency auto: the demo has no load search; give levels like 1,4,16 (`specmeter "
                             "sweep` takes auto)")
        for flag, values, example in (("-k", self.ks, "-k 2,4"),
                                      ("--num-prompts", [self.load.get("num_prompts", 1)], "12"),
                                      ("--max-tokens", [self.load.get("max_tokens", 1)], "96")):
            if not values or any(v < 1 for v in values):
                raise InputError(f"{flag} {','.join(map(str, values))}: give whole numbers of at least 1, "
                                 f"e.g. {example if flag == '-k' else f'{flag} {example}'}")
        if self.load.get("max_rounds", 2) < 2:  # the demo's adaptive points always run two rounds, one per order
            raise InputError(f"--max-rounds {self.load['max_rounds']}: the demo runs at least two rounds a point; "
                             "give 2 or more")
        if self.repeats is not None and self.repeats < 1:
            raise InputError(f"--repeats {self.repeats}: give at least 1 (or leave it out for adaptive rounds)")


def demo(req: DemoRequest, term: Terminal) -> None:
    proposals = ProposeRequest(budget=req.tuning.propose, k_range=req.tuning.propose_k, repeats=req.repeats,
                               command=req.command)
    ex = demo_plan(req.ks, req.load, repeats=req.repeats or 1,
                   precision="fixed" if req.repeats else "adaptive", min_gain=check_min_gain(req.min_gain) or 0.0,
                   indifference=check_indifference(req.indifference, req.min_gain))
    ex.command = req.command
    run_dir = req.out / new_run_id("demo")
    verify = VerifyRequest(verify_dir=run_dir / "verify", off_is_an_answer=True, rounds=req.tuning.rounds,
                           command=req.command)
    with ServerPool() as pool, showing(run_dir, term):  # the answer first, once every round has run
        cal = calibrate_sweep(run_dir, measure_one(ex, run_dir, term, pool, show=False), term)
        propose(run_dir, cal, proposals, term, pool)
        recommend_and_verify(run_dir, verify, term, pool, DeployAnswer())
