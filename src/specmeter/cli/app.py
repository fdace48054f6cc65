"""The `specmeter` command line. Thin: parse, validate, call one function per command."""

from __future__ import annotations

import inspect
import json
import sys
from pathlib import Path
from typing import Annotated, Any, get_type_hints

import typer
from rich.console import Console

from specmeter import __version__
from specmeter.cli import parse as flags
from specmeter.cli.args import API_KEY_ENV, command_line, find_api_key, flag
from specmeter.cli.check import check_command
from specmeter.cli.plan import plan_command
from specmeter.cli.sweep import slurm_job_command, sweep_command
from specmeter.cli.vocab import vocab_command
from specmeter.errors import SpecmeterError
from specmeter.report.progress import RichReporter
from specmeter.workflows.terminal import Terminal

app = typer.Typer(
    name="specmeter",
    help="Measure speculative decoding on real serving engines (vLLM first) and say what to deploy.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
# Each command imports its workflow when it runs, so `--help` and light commands start fast.
# Logs and CI are not terminals: give tables room instead of rich's 80-column default.
console = Console(width=None if sys.stdout.isatty() else 150)
err_console = Console(stderr=True, width=None if sys.stderr.isatty() else 150)


def _terminal(json_out: bool = False) -> Terminal:
    return Terminal(out=console, err=err_console, json_out=json_out, progress=RichReporter)


@app.command()
def run(
    endpoint: Annotated[list[str] | None, typer.Option(help="Attach to a running OpenAI-compatible server at this base URL; repeat it for data-parallel replicas (requests spread, counters summed).")] = None,
    engine: Annotated[str | None, typer.Option(help="vllm, llamacpp, sglang or trtllm (default: vllm when launching; detected from the server when attaching).")] = None,
    model: Annotated[str | None, typer.Option(help="Target model to launch: a model directory or hub id (llamacpp: or a .gguf file).")] = None,
    spec: Annotated[str | None, typer.Option(help='Speculative config as JSON, e.g. \'{"method": "ngram", "num_speculative_tokens": 4}\'; "synthetic_acceptance": {"rates": [...]} or {"length": L} sets acceptance instead of verifying (benchmarking only).')] = None,
    config: Annotated[Path | None, typer.Option("--config", help="YAML file with engine/spec/load sections (flags override it).")] = None,
    baseline: Annotated[bool, typer.Option(help="Also run the same engine with speculation off, for the speedup.")] = True,
    baseline_endpoint: Annotated[list[str] | None, typer.Option(help="Attach mode: a server with speculation off, for the speedup (repeat it for replicas).")] = None,
    dataset: Annotated[str, typer.Option(help="Workload: sample, jsonl, speed-bench, gsm8k, mt-bench, spec-bench, sonnet, random.")] = "sample",
    dataset_path: Annotated[str | None, typer.Option(help="File or directory of the dataset.")] = None,
    dataset_option: Annotated[list[str] | None, typer.Option(help="Loader option KEY=VALUE (repeatable), e.g. input_len=256 for random/sonnet, config=qualitative for speed-bench.")] = None,
    category: Annotated[list[str] | None, typer.Option(help="Only these categories (repeatable).")] = None,
    num_prompts: Annotated[int | None, typer.Option(help="Conversations to send per point (stratified by category).")] = None,
    input_len: Annotated[str | None, typer.Option(help="Keep prompts with LO <= input tokens < HI (target's tokenizer), e.g. 0:512.")] = None,
    tokenizer: Annotated[str | None, typer.Option(help="Tokenizer for --input-len (default: --model).")] = None,
    concurrency: Annotated[str | None, typer.Option(help="Closed-loop load points: concurrency levels, e.g. 1,4,16.")] = None,
    request_rate: Annotated[str | None, typer.Option(help="Open-loop load points: conversations per second, e.g. 0.5,2.")] = None,
    arrival: Annotated[str | None, typer.Option(help="Open loop: poisson (default), gamma or constant arrivals.")] = None,
    burstiness: Annotated[float | None, typer.Option(help="Open loop, gamma: shape (1 = Poisson, < 1 burstier).")] = None,
    max_concurrency: Annotated[int | None, typer.Option(help="Open loop: cap on requests in flight.")] = None,
    duration: Annotated[float | None, typer.Option(help="Seconds per point, cycling the workload (instead of one pass).")] = None,
    repeats: Annotated[int, typer.Option(help="Run every point this many times per configuration.")] = 1,
    interleave: Annotated[bool, typer.Option(help="Keep both servers up and alternate them at each point (needs memory for two).")] = False,
    max_tokens: Annotated[int | None, typer.Option(help="Output cap per request.")] = None,
    ignore_eos: Annotated[bool | None, typer.Option(help="Force max-tokens outputs (biases acceptance).")] = None,
    temperature: Annotated[float | None, typer.Option(help="Sampling temperature (0 = greedy).")] = None,
    api: Annotated[str | None, typer.Option(help="chat or completions.")] = None,
    warmup: Annotated[int | None, typer.Option(help="Warmup requests per point, excluded from results.")] = None,
    dtype: Annotated[str | None, typer.Option(help="Launch mode: model dtype (float32, bfloat16, ...).")] = None,
    max_model_len: Annotated[int | None, typer.Option(help="Launch mode: context length.")] = None,
    served_model_name: Annotated[str | None, typer.Option(help="Model name to request (default: from /v1/models).")] = None,
    engine_arg: Annotated[list[str] | None, typer.Option(help="Extra server argument (repeatable), e.g. --engine-arg=--enforce-eager.")] = None,
    engine_env: Annotated[list[str] | None, typer.Option(help="Launch mode: server environment KEY=VALUE (repeatable).")] = None,
    startup_timeout: Annotated[float | None, typer.Option(help="Seconds to wait for a launched server.")] = None,
    request_timeout: Annotated[float | None, typer.Option(help="Seconds before one request counts as timed out.")] = None,
    max_error_rate: Annotated[float | None, typer.Option(help="Stop when more than this fraction of requests fail.")] = None,
    slo: Annotated[str | None, typer.Option(help="Per-request bounds, e.g. ttft_ms=500,tpot_ms=50 (also e2e_ms): each point's goodput, requests/s meeting them, beside its throughput.")] = None,
    stop_at_saturation: Annotated[bool | None, typer.Option("--stop-at-saturation/--no-stop-at-saturation", help="Stop going up the loads once every server saturated (default: on; load.stop_at_saturation).")] = None,
    api_key: Annotated[str | None, typer.Option(help=f"API key (else ${API_KEY_ENV[0]} or ${API_KEY_ENV[1]}); never written anywhere.")] = None,
    out: Annotated[Path, typer.Option(help="Directory that receives the run directory.")] = Path("runs"),
    name: Annotated[str | None, typer.Option(help="Run directory name (default: timestamp + label).")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print summary.json to stdout instead of tables.")] = False,
    resume: Annotated[Path | None, typer.Option(help="Finish an interrupted run directory (same as `specmeter resume`).")] = None,
    vocab_size: Annotated[int | None, typer.Option(help="compare-workloads: the target's vocabulary size (read from a local model if not given).")] = None,
    compare_random: Annotated[bool, typer.Option(hidden=True)] = False,
) -> None:
    """Benchmark one speculative config (and its speculation-off baseline) on a workload."""
    if resume is not None:
        _resume(resume, api_key, json_out)
        return
    from specmeter.workflows import run as workflow
    from specmeter.workflows.recommend import parse_slo

    engine_flags = {"endpoint": endpoint, "kind": engine, "model": model, "dtype": dtype,
                    "max_model_len": max_model_len, "served_model_name": served_model_name,
                    "extra_args": engine_arg or None, "env": flag(flags.pairs, engine_env),
                    "startup_timeout_s": startup_timeout}
    load_flags = {"concurrency": flag(flags.levels, concurrency),
                  "request_rate": flag(flags.rates, request_rate), "arrival": arrival,
                  "burstiness": burstiness, "max_concurrency": max_concurrency, "duration_s": duration,
                  "num_prompts": num_prompts, "max_tokens": max_tokens, "ignore_eos": ignore_eos,
                  "temperature": temperature, "api": api, "warmup": warmup, "request_timeout_s": request_timeout,
                  "max_error_rate": max_error_rate, "slo": parse_slo(slo), "stop_at_saturation": stop_at_saturation}
    workflow.run(workflow.RunRequest(
        config_file=config, engine=engine_flags, spec_json=spec, load=load_flags, out=out, name=name,
        dataset=dataset, dataset_path=dataset_path, dataset_options=flag(flags.options, dataset_option) or {},
        categories=category, input_len=flag(flags.token_range, input_len), tokenizer=tokenizer,
        baseline=baseline, baseline_endpoint=baseline_endpoint, interleave=interleave, repeats=repeats,
        api_key=find_api_key(api_key), command=command_line(), compare_random=compare_random, vocab_size=vocab_size,
    ), _terminal(json_out))


def compare_workloads(**options: Any) -> None:
    """Same engine config on a real dataset and on random tokens of matched lengths, side by side."""
    run(**options, compare_random=True)


# compare-workloads takes run's options (minus resume), so the two commands cannot drift apart.
_run_hints = get_type_hints(run, include_extras=True)  # annotations are strings under `from __future__`
compare_workloads.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
    [p.replace(annotation=_run_hints[name]) for name, p in inspect.signature(run).parameters.items()
     if name not in {"resume", "compare_random"}]
)
app.command("compare-workloads")(compare_workloads)


def _resume(run_dir: Path, api_key: str | None, json_out: bool) -> None:
    from specmeter.workflows import resume as workflow

    workflow.resume(run_dir, find_api_key(api_key), _terminal(json_out))


app.command()(sweep_command(_terminal, _resume))
app.command("slurm-job", hidden=True)(slurm_job_command(_terminal))


@app.command()
def resume(
    run_dir: Annotated[Path, typer.Argument(help="A run directory of an interrupted run, sweep or demo.")],
    api_key: Annotated[str | None, typer.Option(help=f"API key (else ${API_KEY_ENV[0]} or ${API_KEY_ENV[1]}).")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print summary.json to stdout instead of tables.")] = False,
) -> None:
    """Finish an interrupted run from its stored plan: only the points not yet finished run again. A sweep on
    Slurm: watch its jobs again, resubmit the groups without a complete attempt, and merge."""
    _resume(run_dir, api_key, json_out)


@app.command("recommend")
def recommend_cmd(
    run_dir: Annotated[Path, typer.Argument(help="A sweep's run directory.")],
    objective: Annotated[str, typer.Option(help="What to maximise: throughput (TPOT at request-rate points), tpot, or goodput (needs --slo).")] = "throughput",
    slo: Annotated[str | None, typer.Option(help="Goodput's per-request bounds, e.g. ttft_ms=500,tpot_ms=50 (also e2e_ms).")] = None,
    max_num_seqs: Annotated[int | None, typer.Option(help="The engine's max_num_seqs, where the last range ends (default: from the run).")] = None,
    min_gain: Annotated[float | None, typer.Option(help="A larger K (or costlier drafter) must beat a smaller one head to head by more than this fraction (default: the sweep's, 0.01).")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print recommendation.json instead of tables.")] = False,
) -> None:
    """From a sweep: the best K per engine batch-size range, decided head to head on the requests every
    configuration ran, rendered for the engine the sweep ran (vLLM: a dynamic-SD --speculative-config), the
    static K for engines without dynamic SD, and the evidence behind every range. Writes recommendation.json
    into the run directory."""
    from specmeter.workflows import recommend as workflow

    workflow.recommend(run_dir, workflow.Criteria.from_flags(objective, slo, max_num_seqs, min_gain), _terminal(json_out))


@app.command("verify")
def verify_cmd(
    run_dir: Annotated[Path, typer.Argument(help="A sweep's run directory.")],
    objective: Annotated[str, typer.Option(help="What the recommendation maximises: throughput, tpot or goodput.")] = "throughput",
    slo: Annotated[str | None, typer.Option(help="Goodput's per-request bounds, e.g. ttft_ms=500,tpot_ms=50.")] = None,
    max_num_seqs: Annotated[int | None, typer.Option(help="The engine's max_num_seqs (default: from the run).")] = None,
    min_gain: Annotated[float | None, typer.Option(help="What a larger K must win by, head to head (default: the sweep's, 0.01).")] = None,
    repeats: Annotated[int | None, typer.Option(help="Fixed rounds per point (default: adaptive, until the point's decisions settle).")] = None,
    until_stable: Annotated[bool, typer.Option("--until-stable", help="Where verification corrects the table, verify the corrected table too, until one holds or --rounds run out.")] = False,
    rounds: Annotated[int, typer.Option(min=1, help="With --until-stable: the most verification rounds.")] = 2,
    endpoint: Annotated[str | None, typer.Option(help="Attach: a server already running the recommended config.")] = None,
    api_key: Annotated[str | None, typer.Option(help=f"API key (else ${API_KEY_ENV[0]} or ${API_KEY_ENV[1]}).")] = None,
    recommendation: Annotated[Path | None, typer.Option(help="Verify this recommendation.json (e.g. one you edited) instead of recommending again.")] = None,
    out: Annotated[Path | None, typer.Option(help="Run directory of the verification (default: a new one inside RUN_DIR).")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON document instead of tables: the final recommendation and each verification's summary.")] = False,
) -> None:
    """Launch the recommended dynamic config and run the sweep's load points again, interleaved with the
    baseline and each point's best static config: throughput and TPOT against all, head to head, and a check
    in the engine's per-step stats that it drafted the K the table names for the batch it ran. Where a static
    K other than the table's beats it there, writes a corrected recommendation from the pooled evidence (the
    contradicted one kept as recommendation-r<n>.json); --until-stable verifies the correction too."""
    from specmeter.workflows import verify as workflow
    from specmeter.workflows.recommend import Criteria

    criteria = Criteria.from_flags(objective, slo, max_num_seqs, min_gain)
    workflow.verify(run_dir, workflow.VerifyRequest(criteria=criteria, given=recommendation,
                                                    rounds=rounds if until_stable else 1, repeats=repeats,
                                                    endpoint=endpoint, api_key=find_api_key(api_key), verify_dir=out,
                                                    command=command_line()), _terminal(json_out))


@app.command()
def demo(
    concurrency: Annotated[str, typer.Option(help="Concurrency points (the speedup shrinks as they grow).")] = "1,4,16",
    k: Annotated[str, typer.Option("-k", "--num-speculative-tokens", help="Draft lengths K to sweep, e.g. 2,4.")] = "2,4",
    num_prompts: Annotated[int, typer.Option(help="Conversations per point from the sample workload.")] = 12,
    max_tokens: Annotated[int, typer.Option(help="Output cap per request.")] = 96,
    repeats: Annotated[int | None, typer.Option(help="Fixed rounds of every point, in the sweep and the verification (default: adaptive, each point until its decisions settle).")] = None,
    max_rounds: Annotated[int, typer.Option(min=2, help="Adaptive: the most rounds of a point.")] = 4,
    rounds: Annotated[int, typer.Option(min=1, help="The most verification rounds: a table verification contradicts is corrected and verified again.")] = 2,
    min_gain: Annotated[float, typer.Option(help="A larger K must beat a smaller one head to head by more than this fraction.")] = 0.01,
    out: Annotated[Path, typer.Option(help="Directory that receives the run directory.")] = Path("runs"),
) -> None:
    """The embedded default: vLLM CPU with the project's tiny target/draft pair. Sweeps the baseline and the
    draft model at each K (servers up together, alternating at each point, in rounds until the decisions
    settle), recommends a K per batch size decided head to head, runs that dynamic config against the
    baseline and the best static K on the same servers, and corrects the table where verification
    contradicts it."""
    from specmeter.workflows import demo as workflow

    workflow.demo(workflow.DemoRequest(out=out, concurrency=flag(flags.levels, concurrency) or [],
                                       ks=flag(flags.levels, k) or [], num_prompts=num_prompts,
                                       max_tokens=max_tokens, repeats=repeats, max_rounds=max_rounds, rounds=rounds,
                                       min_gain=min_gain, command=command_line()), _terminal())


data_app = typer.Typer(help="Prepare benchmark datasets (run once, with network, before benchmarking).",
                       no_args_is_help=True)
app.add_typer(data_app, name="data")


@data_app.command("prepare")
def data_prepare(
    dataset: Annotated[str, typer.Argument(help="Dataset to prepare: speed-bench.")],
    config: Annotated[str, typer.Option(help="qualitative, throughput_1k/2k/8k/16k/32k, or all.")] = "qualitative",
    revision: Annotated[str | None, typer.Option(help="Dataset revision (commit) to pin.")] = None,
    out: Annotated[Path, typer.Option(help="Output directory for the prepared JSONL files.")] = Path("data/speed-bench"),
    seed: Annotated[int, typer.Option(help="Seed for anything sampled while filling rows.")] = 0,
) -> None:
    """Download a hub dataset with `datasets`, fill or drop placeholder rows, write JSONL + manifest."""
    from specmeter.workflows.data import prepare_dataset

    prepare_dataset(dataset, config, revision, out, seed, _terminal())


@app.command()
def report(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by run, sweep, compare-workloads or demo.")],
    json_out: Annotated[bool, typer.Option("--json", help="Print summary.json instead of tables.")] = False,
    html: Annotated[Path | None, typer.Option(help="Write the one-file HTML report here (plots inlined, works offline).")] = None,
    csv: Annotated[Path | None, typer.Option(help="Write requests.csv, points.csv, speedups.csv (and recommendation.csv) into this directory.")] = None,
    plots: Annotated[Path | None, typer.Option(help="Write every plot as PNG and SVG into this directory.")] = None,
    recompute: Annotated[bool, typer.Option(help="First derive every point's metrics and the run's decisions again from the stored captures and requests (summary.json is rewritten; recommendation.json is kept).")] = False,
) -> None:
    """Show the report of a finished (or interrupted) run again, from its saved results (no server), and
    write it as HTML, CSV or plots."""
    from specmeter.workflows import report as workflow

    workflow.report(run_dir, workflow.ReportFiles(html=html, csv=csv, plots=plots), _terminal(json_out),
                    recompute=recompute)


@app.command()
def compare(
    run_dirs: Annotated[list[Path], typer.Argument(help="Two or more run directories on the same workload; the first is the reference.")],
    allow_different_workloads: Annotated[bool, typer.Option(help="Compare runs whose requests or sampling differ (their differences then mix engine and workload).")] = False,
    plots: Annotated[Path | None, typer.Option(help="Write overlaid plots of the runs (PNG and SVG) into this directory.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON instead of tables.")] = False,
) -> None:
    """Stored runs side by side (e.g. vLLM against llama.cpp) at the load points they share: throughput, TPOT,
    acceptance and each run's own speedup, and every run against the first, paired by request across runs."""
    from specmeter.workflows.report import compare as compare_runs

    compare_runs(run_dirs, _terminal(json_out), allow_different_workloads=allow_different_workloads, plots=plots)


@app.command()
def calibrate(
    run_dirs: Annotated[list[Path], typer.Argument(help="Run directories of one engine, target and hardware (pooled).")],
    exclude: Annotated[list[str] | None, typer.Option(help="Leave this configuration out of the fit (repeatable): it can then be predicted blind.")] = None,
    out: Annotated[Path | None, typer.Option(help="Where to write calibration.json (default: into the first run directory).")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print calibration.json instead of tables.")] = False,
) -> None:
    """Fit the step-cost model (a step's time against batch size, tokens verified, KV tokens held, prefill, and
    each drafter's cost against K) on the measured points of one or more runs, and write calibration.json with
    every point's residual."""
    from specmeter.workflows import plan as workflow

    workflow.calibrate_runs(run_dirs, exclude or [], out, _terminal(json_out))


app.command("plan")(plan_command(_terminal))
app.command("vocab")(vocab_command(_terminal))
app.command("check")(check_command(_terminal))


@app.command()
def version() -> None:
    """Print specmeter's version and the engines installed here."""
    from specmeter.engines.registry import engine_kinds, get_engine

    engines = {kind: get_engine(kind).launcher.version() for kind in engine_kinds()}
    console.print(json.dumps({"specmeter": __version__, **engines}))


def main() -> None:
    try:
        app()
    except SpecmeterError as exc:
        err_console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        raise SystemExit(exc.exit_code) from None

