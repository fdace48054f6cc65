"""The commands that measure: `demo`, `run` (with `--compare-random`) and `resume`, and the old forms
`compare-workloads` and `run --resume`. Thin: parse, validate, call one workflow."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Annotated, Any

import typer

from specmeter.cli.args import command_line, note, resume_run, terminal
from specmeter.cli.settings import measuring, settings, validated
from specmeter.config import flag_text as parse
from specmeter.config.access import Access
from specmeter.config.criteria import Criteria
from specmeter.config.drafts import Drafts
from specmeter.config.endpoints import BaselineServer
from specmeter.config.models import LoadSpec
from specmeter.config.output import RunOutput
from specmeter.config.run import RunOptions, run_settings
from specmeter.config.schedule import Schedule
from specmeter.config.tune import Tuning

# The load settings the demo takes, with its own defaults: a workload small enough for a first run on a laptop.
DEMO_LOAD = {"concurrency": "1,4,16", "num_prompts": 12, "max_tokens": 96, "max_rounds": 4, "instances": 2}


@settings(RunOutput, "output", only=("out",), validate=True)
@settings(Drafts, "drafts", only=("k",), defaults={"k": "2,4"})
@settings(Tuning, "tuning", only=("propose", "propose_k", "rounds"))
@settings(Schedule, "schedule", only=("repeats",))
@settings(Criteria, "criteria", only=("min_gain", "indifference"), defaults={"min_gain": 0.01})
@settings(LoadSpec, "load", only=DEMO_LOAD, defaults=DEMO_LOAD)
def demo(
    load: dict[str, Any],
    criteria: dict[str, Any],
    schedule: dict[str, Any],
    tuning: dict[str, Any],
    output: RunOutput,
    drafts: dict[str, Any],
    num_speculative_tokens: Annotated[str | None, typer.Option("--num-speculative-tokens", hidden=True)] = None,
) -> None:
    """Start here: see speculative decoding measured, recommended and verified in one command.

    The embedded default: vLLM CPU with the project's tiny target/draft pair. Sweeps the baseline and the
    draft model at each K (servers up together, alternating at each point, in rounds until the decisions
    settle), measures the K the step-cost model calibrated on the sweep predicts could beat the chosen one
    head to head (--propose), recommends a K per batch size decided head to head, runs that dynamic config
    against the baseline and the best static K on the same servers, and corrects the table where
    verification contradicts it."""
    from specmeter.workflows import demo as workflow

    if num_speculative_tokens is not None:
        note("specmeter demo --num-speculative-tokens K", "specmeter demo --k K")
        drafts = {"k": parse.ks(num_speculative_tokens)}
    workflow.demo(workflow.DemoRequest(
        out=output.out, ks=drafts["k"], load=load,
        repeats=schedule.get("repeats"), tuning=validated(Tuning, tuning),
        min_gain=criteria["min_gain"],
        indifference=criteria.get("indifference"),
        command=command_line()), terminal())


@settings(Access, "access", validate=True)
@settings(RunOutput, "output", validate=True)
@settings(Drafts, "drafts", only=("spec",))
@settings(BaselineServer, "server", validate=True)
@settings(RunOptions, "asked", validate=True)
@measuring
def run(
    engine: dict[str, Any],
    workload: dict[str, Any],
    load: dict[str, Any],
    schedule: dict[str, Any],
    output: RunOutput,
    access: Access,
    drafts: dict[str, Any],
    server: BaselineServer,
    asked: RunOptions,
    resume: Annotated[Path | None, typer.Option(hidden=True)] = None,
) -> None:
    """What does one speculative config gain over speculation off, on my workload and server?

    Benchmarks one speculative config and its speculation-off baseline at each load point: attach to running
    servers (--endpoint) or launch one (--model)."""
    if resume is not None:
        note("specmeter run --resume RUN", "specmeter resume RUN")
        resume_run(resume, access.api_key)
        return
    from specmeter.workflows import run as workflow

    one_spec = parse.once(drafts.get("spec"), "--spec", "run measures one speculative config (`specmeter sweep` takes several)")
    workflow.run(workflow.RunRequest(
        settings=run_settings(asked.config, engine, one_spec, load, workload), out=output.out, name=output.name,
        baseline=asked.baseline, baseline_endpoint=server.baseline_endpoint, schedule=validated(Schedule, schedule),
        api_key=access.api_key, command=command_line(),
        compare_random=asked.compare_random, vocab_size=asked.vocab_size,
    ), terminal())


def compare_workloads(**flags: Any) -> None:
    """Old form of `run --compare-random`."""
    note("specmeter compare-workloads ...", "specmeter run --compare-random ...")
    run(**flags, asked__compare_random=True)  # the option's parameter, as settings() names it


# compare-workloads takes run's options (minus the two it sets), so the two commands cannot drift apart.
compare_workloads.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
    [p for name, p in inspect.signature(run, eval_str=True).parameters.items()
     if name not in {"resume", "asked__compare_random"}]
)


@settings(Access, "access", validate=True)
def resume(
    access: Access,
    run_dir: Annotated[Path, typer.Argument(help="A run directory of an interrupted run, sweep or demo.")],
) -> None:
    """Finish an interrupted run, sweep or demo: only the points not yet finished run again.

    From the plan the run directory stored, into the same directory. A sweep on Slurm: watch its jobs again,
    resubmit the groups without a complete attempt, and merge."""
    resume_run(run_dir, access.api_key)
