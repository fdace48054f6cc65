"""Every option more than one command takes, declared once: one name, one type, one help text. A command sets
its own default where it differs (`k: K = "2,4"`). `with_verbosity` gives every command -q/--quiet and
-v/--verbose."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from specmeter.cli.args import API_KEY_ENV, VERBOSITY
from specmeter.common.errors import InputError

# ---- what a run sends and where it goes ----------------------------------------------------------------------
Spec = Annotated[list[str] | None, typer.Option(help='A speculative config as JSON, e.g. \'{"method": "ngram", "num_speculative_tokens": 4}\' (repeatable where a command compares several); "synthetic_acceptance": {"rates": [...]} or {"length": L} sets acceptance instead of verifying (benchmarking only).')]
K = Annotated[str | None, typer.Option("-k", "--k", help="Draft lengths K, a list: 1,2,4.")]
InputLen = Annotated[str | None, typer.Option(help="Input tokens (the target's tokenizer): N or N1,N2 (lengths), or LO:HI (the dataset's prompts with LO <= tokens < HI, e.g. 0:512), as a sweep file's workload.input_len; each command says which form it takes.")]
Concurrency = Annotated[str | None, typer.Option(help="Closed-loop load points: concurrency levels, e.g. 1,4,16 (sweep: or auto, a load search that places the points).")]
RequestRate = Annotated[str | None, typer.Option(help="Open-loop load points: conversations per second, e.g. 0.5,2.")]
Arrival = Annotated[str | None, typer.Option(help="Open loop: poisson (default), gamma or constant arrivals (over a file: at each of its request-rate points).")]
Burstiness = Annotated[float | None, typer.Option(help="Open loop, gamma: shape (1 = Poisson, < 1 burstier).")]
MaxConcurrency = Annotated[int | None, typer.Option(help="Open loop: cap on requests in flight.")]
Repeats = Annotated[int | None, typer.Option(min=1, help="Fixed rounds of every point per configuration (default: run 1; sweep, verify, demo: the file's, else adaptive until the point's decisions settle or none is likely to end as a win; verify's one proof point, where every point is carried from the sweep: one).")]
Interleave = Annotated[bool | None, typer.Option(help="Keep every server up together and alternate them at each point, a wave of requests at a time at concurrency points (needs memory for all).")]
ApiKey = Annotated[str | None, typer.Option(help=f"API key (else ${API_KEY_ENV[0]} or ${API_KEY_ENV[1]}); never written anywhere.")]
Out = Annotated[Path, typer.Option(help="Directory that receives the new run directory.")]
Name = Annotated[str | None, typer.Option(help="Run directory name (default: timestamp + label).")]

# ---- how a table is decided -----------------------------------------------------------------------------------
Objective = Annotated[str | None, typer.Option(help="What the recommendation maximises: throughput (TPOT at request-rate points; the default), tpot, or goodput (needs --slo).")]
Slo = Annotated[str | None, typer.Option(help="Per-request bounds, e.g. ttft_ms=500,tpot_ms=50 (also e2e_ms): each point's goodput, requests/s meeting them, beside its throughput; what --objective goodput maximises.")]
MaxNumSeqs = Annotated[int | None, typer.Option(help="The engine's max_num_seqs, where the last batch-size range ends (default: from the run).")]
MinGain = Annotated[float | None, typer.Option(help="A larger K (or costlier drafter) must beat a smaller one head to head by more than this fraction (default: the sweep's, 0.01).")]
Indifference = Annotated[float | None, typer.Option(help="A costlier configuration settled at most this fraction better than a cheaper one is a tie: the cheaper is kept (within this much of the better), and a point stops sampling there, and a proposed K predicted within it is not measured (at least --min-gain; equal: no ties; default: the sweep's, 0.03 or the min gain where larger).")]
Rounds = Annotated[int, typer.Option(min=1, help="The most verification rounds: a table verification contradicts is corrected and verified again.")]
Propose = Annotated[int | None, typer.Option(min=0, help="Before the answer is decided: measure at most N draft lengths K the sweep did not run, where the step-cost model calibrated on it predicts one beats the K chosen at a measured point by more than the indifference zone; each runs head to head against that K and enters the table only where it beats it (default: 1; 0: none).")]
ProposeK = Annotated[str | None, typer.Option(help="The Ks a proposal may take, LOW-HIGH, e.g. 1-6 (default: a sweep file's num_speculative_tokens LO-HI, else the swept Ks' span widened by one on each side).")]

# ---- predictions --------------------------------------------------------------------------------------------
Batch = Annotated[str, typer.Option(help="Engine batch sizes to predict, e.g. 1,8,64.")]
Acceptance = Annotated[str | None, typer.Option(help="Acceptance: a run directory (RUN or RUN:CONFIG_ID), an iid rate (0.7) or per-position rates (0.8,0.6,0.45); plan: instead of the run's own.")]
Exclude = Annotated[list[str] | None, typer.Option(help="Leave this configuration out of the fit and the acceptance profile (repeatable): its points are then predicted blind.")]

# ---- what a command prints and writes -----------------------------------------------------------------------
Json = Annotated[bool, typer.Option("--json", help="Print one JSON document to stdout instead of tables (notes go to stderr).")]
Plots = Annotated[Path | None, typer.Option(help="Write the plots (PNG and SVG) into this directory.")]
RunDir = Annotated[Path, typer.Argument(help="A run directory (of run, sweep or demo).")]
Quiet = Annotated[bool, typer.Option("-q", "--quiet", help="Print the answer and errors only.")]
Verbose = Annotated[bool, typer.Option("-v", "--verbose", help="Print every table and per-point note.")]


def verbosity(quiet: bool, verbose: bool) -> int:
    """Terminal.verbosity from -q/-v: -1, 0 or 1."""
    if quiet and verbose:
        raise InputError("-q/--quiet and -v/--verbose together: give one (-q: the answer and errors only; -v: every "
                         "table and note)")
    return -1 if quiet else 1 if verbose else 0


def with_verbosity(func: Callable[..., None]) -> Callable[..., None]:
    """The command with -q/--quiet and -v/--verbose added; the Terminal it makes (args.terminal) carries them."""
    params = list(inspect.signature(func, eval_str=True).parameters.values())  # strings under `from __future__`

    @functools.wraps(func)
    def command(*args: Any, quiet: bool = False, verbose: bool = False, **kwargs: Any) -> None:
        token = VERBOSITY.set(verbosity(quiet, verbose))
        try:
            func(*args, **kwargs)
        finally:
            VERBOSITY.reset(token)

    flags = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=False, annotation=kind)
             for name, kind in (("quiet", Quiet), ("verbose", Verbose))]
    command.__signature__ = inspect.Signature([*params, *flags])  # type: ignore[attr-defined]
    return command
