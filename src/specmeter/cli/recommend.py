"""`specmeter recommend` and `specmeter verify`: the K to deploy per batch size from a sweep, and that answer run
against the sweep's own evidence. Thin: parse, validate, call one workflow."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from specmeter.cli.args import command_line, note, terminal
from specmeter.cli.settings import decided_by, settings, validated
from specmeter.config import flag_text as parse
from specmeter.config.access import Access
from specmeter.config.criteria import AnswerRound, Criteria
from specmeter.config.models import EngineSpec, LoadSpec
from specmeter.config.schedule import Schedule
from specmeter.config.tune import Tuning, Verification

SweepDir = Annotated[Path, typer.Argument(help="A sweep's run directory.")]


@settings(AnswerRound, "ask", validate=True)
@settings(Criteria, "criteria")
@settings(LoadSpec, "load", only=("slo",))
def recommend(
    load: dict[str, Any],
    criteria: dict[str, Any],
    ask: AnswerRound,
    run_dir: SweepDir,
) -> None:
    """Which K should I deploy at each batch size? The run's answer, with the evidence behind every range.

    The best K per engine batch-size range, decided head to head on the requests every configuration ran,
    rendered for the engine the sweep ran (vLLM: a dynamic-SD --speculative-config), the static K for engines
    without dynamic SD. The first call decides it (round 1, in the run directory's answer/); later calls show the
    latest round (verified, corrected or kept) and the earlier ones as history; --again decides a new round."""
    from specmeter.workflows import recommend as workflow

    workflow.recommend(run_dir, decided_by(criteria, load), terminal(), ask)


@settings(Access, "access", validate=True)
@settings(Verification, "verification", validate=True)
@settings(Tuning, "tuning", only=("rounds",))
@settings(Schedule, "schedule", only=("repeats",))
@settings(Criteria, "criteria")
@settings(LoadSpec, "load", only=("slo",))
@settings(EngineSpec, "engine", only=("endpoint",))
def verify(
    engine: dict[str, Any],
    load: dict[str, Any],
    criteria: dict[str, Any],
    schedule: dict[str, Any],
    tuning: dict[str, Any],
    access: Access,
    verification: Verification,
    run_dir: SweepDir,
    until_stable: Annotated[bool, typer.Option("--until-stable", hidden=True)] = False,
    out: Annotated[Path | None, typer.Option(hidden=True)] = None,
) -> None:
    """Does the run's answer hold when it runs? Corrects the table where it does not.

    Launches the run's answer (its latest round; decided first where there is none) as a dynamic config and runs
    the sweep's load points where the table can be wrong (a decision there unsettled; --every-point: all),
    interleaved with the baseline and each point's best static config: throughput and TPOT against all, head to
    head, and a check in the engine's per-step stats that it drafted the K the table names for the batch it ran. Where a static K other than the table's beats it there, the corrected table from
    the pooled evidence becomes the next round (earlier rounds stay as history) and is verified too, while
    --rounds remain."""
    from specmeter.workflows import verify as workflow

    if until_stable:
        note("specmeter verify --until-stable", "specmeter verify --rounds N (corrections are verified until one "
             "holds or the rounds run out)")
    verify_dir = verification.verify_dir
    if out is not None:
        note("specmeter verify --out DIR", "specmeter verify --verify-dir DIR")
        verify_dir = verify_dir or out
    attach = parse.once(engine.get("endpoint"), "--endpoint", "verify attaches to one server already running the table")
    workflow.verify(run_dir, workflow.VerifyRequest(criteria=decided_by(criteria, load), given=verification.recommendation,
                                                    rounds=validated(Tuning, tuning).rounds,
                                                    repeats=schedule.get("repeats"), endpoint=attach, api_key=access.api_key,
                                                    verify_dir=verify_dir, every_point=verification.every_point,
                                                    command=command_line()),
                    terminal())
