"""The `specmeter` command line. Thin: parse, validate, call one function per command."""

from __future__ import annotations

import inspect
import json
import os
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, get_type_hints

import typer
from rich.console import Console

from specmeter import __version__
from specmeter.config import (
    EngineSpec,
    LoadSpec,
    SpecConfig,
    build_model,
    load_yaml,
    parse_spec_json,
)
from specmeter.data.selection import output_policy
from specmeter.errors import InputError, RunIncomplete, SpecmeterError
from specmeter.redact import redact_argv
from specmeter.report.console import ConsoleOutput, render
from specmeter.report.progress import RichReporter
from specmeter.run_data import load_run, run_records
from specmeter.runner import Execution, execute
from specmeter.schemas.recommend import SLO, Objective, Recommendation
from specmeter.servers import ServerPool
from specmeter.store import RunStore, atomic_write_text, load_summary, new_run_id

app = typer.Typer(
    name="specmeter",
    help="Measure speculative decoding on real serving engines (vLLM first) and say what to deploy.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
# Logs and CI are not terminals: give tables room instead of rich's 80-column default.
console = Console(width=None if sys.stdout.isatty() else 150)
err_console = Console(stderr=True, width=None if sys.stderr.isatty() else 150)

API_KEY_ENV = ("SPECMETER_API_KEY", "OPENAI_API_KEY")


def _levels(text: str) -> list[int]:
    try:
        return [int(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise typer.BadParameter(f"{text!r}: give concurrency levels as integers, e.g. 1,4,16") from None


def _rates(text: str) -> list[float]:
    try:
        return [float(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise typer.BadParameter(f"{text!r}: give request rates as numbers (requests/s), e.g. 0.5,2") from None


def _range(text: str) -> tuple[int, int]:
    lo, _sep, hi = text.partition(":")
    try:
        return int(lo), int(hi)
    except ValueError:
        raise typer.BadParameter(f"{text!r}: give a token range as LO:HI, e.g. 0:512") from None


def _env_pairs(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"{item!r}: give it as KEY=VALUE")
        out[key] = value
    return out


def _dataset_options(items: list[str]) -> dict[str, Any]:
    """KEY=VALUE pairs; values that parse as JSON (numbers, true/false, lists) are taken as such."""
    out: dict[str, Any] = {}
    for key, value in _env_pairs(items).items():
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def _api_key(flag: str | None) -> str | None:
    if flag:
        return flag
    for name in API_KEY_ENV:
        if os.environ.get(name):
            return os.environ[name]
    return None


def build_plan_inputs(
    config_file: Path | None,
    cli_engine: dict[str, Any],
    cli_spec: str | None,
    cli_load: dict[str, Any],
) -> tuple[EngineSpec, SpecConfig, LoadSpec]:
    """Merge a YAML config (sections engine/spec/load) with CLI flags (flags win), then validate."""
    raw: dict[str, Any] = load_yaml(config_file) if config_file else {}
    where = str(config_file) if config_file else "command line"
    unknown = set(raw) - {"engine", "spec", "load"}
    if unknown:
        raise SpecmeterError(f"{where}: unknown top-level key {sorted(unknown)[0]!r}; use engine, spec and load")
    engine_raw = {**(raw.get("engine") or {}), **{k: v for k, v in cli_engine.items() if v is not None}}
    file_load = dict(raw.get("load") or {})
    if cli_load.get("concurrency") is not None or cli_load.get("request_rate") is not None:
        for key in ("points", "concurrency", "request_rate"):  # the flags' load points replace the file's
            file_load.pop(key, None)
    load_raw = {**file_load, **{k: v for k, v in cli_load.items() if v is not None}}
    engine = build_model(EngineSpec, engine_raw, f"{where}: engine")
    load = build_model(LoadSpec, load_raw, f"{where}: load")
    if cli_spec is not None:
        spec = parse_spec_json(cli_spec)
    else:
        spec = build_model(SpecConfig, raw.get("spec") or {}, f"{where}: spec")
    return engine, spec, load


@app.command()
def run(
    endpoint: Annotated[str | None, typer.Option(help="Attach to a running OpenAI-compatible server at this base URL.")] = None,
    engine: Annotated[str | None, typer.Option(help="vllm, llamacpp, sglang or trtllm (default: vllm when launching; detected from the server when attaching).")] = None,
    model: Annotated[str | None, typer.Option(help="Target model path or hub id to launch.")] = None,
    spec: Annotated[str | None, typer.Option(help='Speculative config as JSON, e.g. \'{"method": "ngram", "num_speculative_tokens": 4}\'.')] = None,
    config: Annotated[Path | None, typer.Option("--config", help="YAML file with engine/spec/load sections (flags override it).")] = None,
    baseline: Annotated[bool, typer.Option(help="Also run the same engine with speculation off, for the speedup.")] = True,
    baseline_endpoint: Annotated[str | None, typer.Option(help="Attach mode: a server with speculation off, for the speedup.")] = None,
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
    api_key: Annotated[str | None, typer.Option(help=f"API key (else ${API_KEY_ENV[0]} or ${API_KEY_ENV[1]}); never written anywhere.")] = None,
    out: Annotated[Path, typer.Option(help="Directory that receives the run directory.")] = Path("runs"),
    name: Annotated[str | None, typer.Option(help="Run directory name (default: timestamp + label).")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print summary.json to stdout instead of tables.")] = False,
    resume: Annotated[Path | None, typer.Option(help="Finish an interrupted run directory (same as `specmeter resume`).")] = None,
    vocab_size: Annotated[int | None, typer.Option(help="compare-workloads: the target's vocabulary size (read from a local model if not given).")] = None,
    compare_random: Annotated[bool, typer.Option(hidden=True)] = False,
) -> None:
    """Benchmark one speculative config (and its speculation-off baseline) on a workload."""
    from specmeter.data.workload import load_conversations
    from specmeter.plans.run import compare_workloads_plan, run_plan

    if resume is not None:
        resume_run(resume, api_key=api_key, json_out=json_out)
        return

    eng, sp, ld = build_plan_inputs(
        config,
        {"endpoint": endpoint, "kind": engine, "model": model, "dtype": dtype, "max_model_len": max_model_len,
         "served_model_name": served_model_name, "extra_args": engine_arg or None,
         "env": _env_pairs(engine_env) if engine_env else None,
         "startup_timeout_s": startup_timeout},
        spec,
        {"concurrency": _levels(concurrency) if concurrency else None,
         "request_rate": _rates(request_rate) if request_rate else None, "arrival": arrival,
         "burstiness": burstiness, "max_concurrency": max_concurrency, "duration_s": duration,
         "num_prompts": num_prompts, "max_tokens": max_tokens, "ignore_eos": ignore_eos, "temperature": temperature,
         "api": api, "warmup": warmup, "request_timeout_s": request_timeout, "max_error_rate": max_error_rate},
    )
    if eng.launch:
        from specmeter.engines.preflight import check_local_models

        check_local_models(eng, sp)
    convs, workload = load_conversations(dataset, dataset_path, ld, categories=category,
                                         options=_dataset_options(dataset_option or []),
                                         input_len=_range(input_len) if input_len else None,
                                         tokenizer=tokenizer or eng.model)
    if warning := output_policy(ld).warning():
        err_console.print(f"[yellow]note: {warning}[/]")
    if compare_random:
        from specmeter.data.matched import vocab_from_model

        vocab, special = (vocab_size, []) if vocab_size else vocab_from_model(eng.model)
        plan = compare_workloads_plan(eng, sp, ld, vocab_size=vocab, excluded_token_ids=special,
                                      baseline_endpoint=baseline_endpoint if baseline else None, workload=workload)
    else:
        plan = run_plan(eng, sp, ld, baseline=baseline, baseline_endpoint=baseline_endpoint, workload=workload,
                        interleave=interleave, repeats=repeats)
    ex = Execution(plan=plan, conversations=convs, api_key=_api_key(api_key),
                   command=["specmeter", *redact_argv(sys.argv[1:])])
    _execute(ex, out / (name or new_run_id(("compare-" if compare_random else "") + sp.label())), json_out)


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


@app.command()
def sweep(
    file: Annotated[Path | None, typer.Argument(help="Sweep file (YAML): workload, engine, candidates, load, repeats, interleave.")] = None,
    model: Annotated[str | None, typer.Option(help="Shorthand: target model to launch.")] = None,
    spec: Annotated[list[str] | None, typer.Option(help="Shorthand: a speculative config as JSON (repeatable); --k expands its K.")] = None,
    k: Annotated[str | None, typer.Option(help="Shorthand: draft lengths to try, e.g. 1,2,4.")] = None,
    concurrency: Annotated[str | None, typer.Option(help="Shorthand: concurrency points, e.g. 1,4,16.")] = None,
    request_rate: Annotated[str | None, typer.Option(help="Shorthand: request-rate points (conversations/s).")] = None,
    dataset: Annotated[str, typer.Option(help="Shorthand: workload name.")] = "sample",
    dataset_path: Annotated[str | None, typer.Option(help="Shorthand: dataset file or directory.")] = None,
    num_prompts: Annotated[int | None, typer.Option(help="Shorthand: conversations per point.")] = None,
    max_tokens: Annotated[int | None, typer.Option(help="Shorthand: output cap per request.")] = None,
    dtype: Annotated[str | None, typer.Option(help="Shorthand: model dtype.")] = None,
    engine_env: Annotated[list[str] | None, typer.Option(help="Shorthand: server environment KEY=VALUE (repeatable).")] = None,
    repeats: Annotated[int | None, typer.Option(help="Run every point this many times per configuration.")] = None,
    interleave: Annotated[bool | None, typer.Option(help="Keep every server up together and alternate them at each point.")] = None,
    api_key: Annotated[str | None, typer.Option(help=f"API key (else ${API_KEY_ENV[0]} or ${API_KEY_ENV[1]}); never written anywhere.")] = None,
    out: Annotated[Path, typer.Option(help="Directory that receives the run directory.")] = Path("runs"),
    name: Annotated[str | None, typer.Option(help="Run directory name (default: timestamp + label).")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print summary.json to stdout instead of tables.")] = False,
    resume: Annotated[Path | None, typer.Option(help="Finish an interrupted sweep (same as `specmeter resume`).")] = None,
    verify: Annotated[bool, typer.Option("--verify", help="Then recommend a K per batch size and run that dynamic config (as `specmeter verify`), reusing the sweep's servers.")] = False,
    objective: Annotated[str, typer.Option(help="With --verify: what the recommendation maximises: throughput, tpot or goodput.")] = "throughput",
    slo: Annotated[str | None, typer.Option(help="With --verify and --objective goodput: e.g. ttft_ms=500,tpot_ms=50.")] = None,
    rounds: Annotated[int, typer.Option(min=1, help="With --verify: the most verification rounds (a table verification contradicts is corrected and verified again).")] = 2,
    min_gain: Annotated[float | None, typer.Option(help="A larger K (or costlier drafter) must beat a smaller one head to head by more than this fraction (default 0.01).")] = None,
) -> None:
    """Every speculative config at every load point against the baseline: which drafter and which K, at
    which load, and where speculation stops paying. Takes a sweep file, or the shorthand
    `specmeter sweep --model M --spec '{...}' --k 1,2,4 --concurrency 1,4,16`."""
    from specmeter.data.workload import load_conversations
    from specmeter.engines.preflight import check_local_models
    from specmeter.plans.sweep import SweepSpec, read_sweep_file
    from specmeter.plans.verify import check_verifiable

    if resume is not None:
        resume_run(resume, api_key=api_key, json_out=json_out)
        return
    if file is not None:
        if model or spec or k or concurrency or request_rate:
            raise InputError(f"{file}: give the sweep either as a file or as --model/--spec/--k flags, not both")
        sw = read_sweep_file(file)
    else:
        sw = _sweep_from_flags(model, spec or [], k, concurrency, request_rate, dataset, dataset_path, num_prompts,
                               max_tokens, dtype, engine_env)
    updates = {key: v for key, v in (("repeats", repeats), ("interleave", interleave),
                                     ("min_gain", _min_gain(min_gain))) if v is not None}
    sw = SweepSpec.model_validate({**sw.model_dump(by_alias=False), **updates}) if updates else sw
    if verify:  # refused before the sweep, not after it
        check_verifiable(sw.engine.kind, "--verify")
    for cfg in sw.configs():
        if cfg.engine.launch:
            check_local_models(cfg.engine, cfg.spec)
    ld = sw.effective_load()
    w = sw.workload
    convs, workload = load_conversations(w.dataset, w.path, ld, categories=w.categories, options=w.options,
                                         input_len=w.input_len, tokenizer=w.tokenizer or sw.engine.model)
    if warning := output_policy(ld).warning():
        err_console.print(f"[yellow]note: {warning}[/]")
    ex = Execution(plan=sw.plan(workload), conversations=convs, api_key=_api_key(api_key),
                   command=["specmeter", *redact_argv(sys.argv[1:])])
    run_dir = out / (name or new_run_id(f"sweep-{len(ex.plan.configs)}configs"))
    if not verify:
        _execute(ex, run_dir, json_out)
        return
    goal = _objective(objective)
    limits = _slo(slo)
    with ServerPool() as pool:
        _execute(ex, run_dir, json_out, pool)
        _recommend_and_verify(run_dir, goal, limits, None, json_out, pool, api_key=ex.api_key, off_is_an_answer=True,
                              rounds=rounds)


def _sweep_from_flags(model: str | None, specs: list[str], k: str | None, concurrency: str | None,
                      request_rate: str | None, dataset: str, dataset_path: str | None, num_prompts: int | None,
                      max_tokens: int | None, dtype: str | None, engine_env: list[str] | None) -> Any:
    from specmeter.plans.sweep import SweepSpec

    if not model or not specs:
        raise InputError("sweep: give a sweep file, or --model and at least one --spec (with --k for several K)")
    candidates = []
    for text in specs:
        try:
            cand = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"--spec: not valid JSON ({exc.msg} at column {exc.colno})") from exc
        if not isinstance(cand, dict):
            raise InputError("--spec: expected a JSON object of speculative-config keys")
        if k:
            cand["num_speculative_tokens"] = _levels(k)
        candidates.append(cand)
    load: dict[str, Any] = {"concurrency": _levels(concurrency) if concurrency else None,
                            "request_rate": _rates(request_rate) if request_rate else None,
                            "max_tokens": max_tokens}
    if load["concurrency"] is None and load["request_rate"] is None:
        load["concurrency"] = [1]
    raw = {
        "workload": {"dataset": dataset, "path": dataset_path, "num_prompts": num_prompts},
        "engine": {"model": model, "dtype": dtype, "env": _env_pairs(engine_env) if engine_env else {}},
        "candidates": candidates,
        "load": {key: v for key, v in load.items() if v is not None},
    }
    return build_model(SweepSpec, raw, "command line")


def _write_page(run_dir: Path, json_out: bool) -> None:
    """The run's one-file HTML report beside summary.json (written again when a recommendation or a
    verification joins the run)."""
    from specmeter.report.html import HtmlOutput

    try:
        (path,) = HtmlOutput().write(load_run(run_dir))
    except Exception as exc:  # the page is a by-product: the measurements are on disk and the exit code is theirs
        err_console.print(f"[yellow]report.html not written ({exc.__class__.__name__}: {exc}); "
                          f"`specmeter report {run_dir} --html FILE` tries again[/]")
        return
    (err_console if json_out else console).print(f"report: [cyan]{path}[/]")


def _execute(ex: Execution, run_dir: Path, json_out: bool, pool: ServerPool | None = None) -> None:
    from specmeter.engines.probe import resolve_endpoints

    # Before the run directory exists: an endpoint that does not answer leaves nothing behind.
    ex = replace(ex, plan=resolve_endpoints(ex.plan, ex.api_key))
    store = RunStore(run_dir)
    reporter = RichReporter(err_console if json_out else console)
    if not json_out:
        console.print(f"[bold]specmeter[/] {__version__}: run directory [cyan]{run_dir}[/]")
    with reporter:
        summary = execute(ex, store, reporter, pool)
    if json_out:
        sys.stdout.write(summary.model_dump_json(indent=2) + "\n")
    else:
        render(summary, console)
    _write_page(run_dir, json_out)
    if not json_out:
        console.print(f"results: [cyan]{run_dir}[/] (summary.json, requests.jsonl, server logs)")
    if summary.status != "complete":
        raise RunIncomplete(f"{summary.incomplete_reason}; what finished is in {run_dir}; "
                            f"`specmeter resume {run_dir}` runs what is missing")


def resume_run(run_dir: Path, api_key: str | None = None, json_out: bool = False) -> None:
    from specmeter.plans.resume import resume_execution

    _execute(resume_execution(run_dir, _api_key(api_key)), run_dir, json_out)


@app.command()
def resume(
    run_dir: Annotated[Path, typer.Argument(help="A run directory of an interrupted run, sweep or demo.")],
    api_key: Annotated[str | None, typer.Option(help=f"API key (else ${API_KEY_ENV[0]} or ${API_KEY_ENV[1]}).")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print summary.json to stdout instead of tables.")] = False,
) -> None:
    """Finish an interrupted run from its stored plan: only the points not yet finished run again."""
    resume_run(run_dir, api_key=api_key, json_out=json_out)


def _objective(text: str) -> Objective:
    if text not in ("throughput", "tpot", "goodput"):
        raise InputError(f"--objective {text!r}: choose throughput, tpot or goodput")
    return text  # type: ignore[return-value]


def _slo(text: str | None) -> SLO | None:
    if text is None:
        return None
    raw: dict[str, Any] = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if not sep:
            raise InputError(f"--slo: expected KEY=VALUE pairs like ttft_ms=500,tpot_ms=50, got {item!r}")
        raw[key.strip()] = value.strip()
    slo: SLO = build_model(SLO, raw, "--slo")
    if not slo.model_dump(exclude_none=True):
        raise InputError("--slo: give at least one bound: ttft_ms, tpot_ms or e2e_ms")
    return slo


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"{path}: cannot read it ({exc.strerror}); give the recommendation.json that "
                         "`specmeter recommend` wrote") from exc
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from exc


def _recommendation(run_dir: Path, objective: Objective, slo: SLO | None, max_num_seqs: int | None,
                    json_out: bool, min_gain: float | None = None) -> Recommendation:
    """Recommend from a run directory, render it for the engine the sweep ran, write recommendation.json beside
    it, and show it."""
    from specmeter.analysis.recommend import recommend
    from specmeter.engines.deploy import render, sweep_engine
    from specmeter.report.console import render_recommendation

    summary = load_summary(run_dir)
    records = run_records(RunStore(run_dir), summary.plan)
    rec = render(recommend(summary, records, objective=objective, slo=slo, max_num_seqs=max_num_seqs,
                           source_run=str(run_dir), min_gain=min_gain), sweep_engine(summary.plan))
    atomic_write_text(run_dir / "recommendation.json", rec.model_dump_json(indent=2) + "\n")
    if json_out:
        sys.stdout.write(rec.model_dump_json(indent=2) + "\n")
    else:
        render_recommendation(rec, console)
    return rec


def _recommend_and_verify(run_dir: Path, objective: Objective, slo: SLO | None, max_num_seqs: int | None,
                          json_out: bool, pool: ServerPool | None, *, api_key: str | None = None,
                          endpoint: str | None = None, repeats: int | None = None,
                          verify_dir: Path | None = None, given: Path | None = None,
                          off_is_an_answer: bool = False, rounds: int = 1, min_gain: float | None = None) -> None:
    """Recommend (or read a recommendation), run its dynamic config, and correct it where verification
    disagrees, verifying the correction while `rounds` remain. With `off_is_an_answer` (the demo,
    `sweep --verify`), a recommendation to serve without speculation ends the command there: it is the
    sweep's answer, not an error; `specmeter verify` asked for a config to run and says there is none."""
    from specmeter.report.console import render_recommendation
    from specmeter.workflows.verify import VerifyLoop

    if given is None:
        rec = _recommendation(run_dir, objective, slo, max_num_seqs, json_out, min_gain)
    else:
        rec = build_model(Recommendation, _read_json(given), str(given))
    if off_is_an_answer and (rec.best is None or rec.best.spec is None):
        err_console.print("[yellow]nothing to verify: no K clearly beats the baseline at any measured point, so the "
                          "answer is to serve without speculation; more rounds (load.max_rounds) or longer outputs "
                          "narrow the intervals if the speedups looked close[/]")
        _write_page(run_dir, json_out)  # the sweep's page now shows the recommendation
        return
    say = err_console if json_out else console
    loop = VerifyLoop(run_dir=run_dir, execute=lambda ex, target: _execute(ex, target, json_out, pool),
                      say=lambda line: say.print(f"[bold]{line}[/]", highlight=False),
                      first_dir=verify_dir or run_dir / new_run_id("verify"), pool=pool,
                      serve=None if endpoint is None else _attached(endpoint, rec), repeats=repeats, api_key=api_key, command=["specmeter", *redact_argv(sys.argv[1:])])
    try:
        final = loop.run(rec, rounds)
    finally:  # the sweep's page now shows the recommendation and what of the verification finished
        _write_page(run_dir, json_out)
    if json_out:
        sys.stdout.write(final.model_dump_json(indent=2) + "\n")
    else:
        render_recommendation(final, console, final=True)


def _attached(endpoint: str, rec: Recommendation) -> Callable[[SpecConfig], str | None]:
    """--endpoint runs the table given; a corrected table has no server until the user starts one."""
    first = rec.best.spec if rec.best is not None else None
    return lambda spec: endpoint if spec == first else None


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
    _recommendation(run_dir, _objective(objective), _slo(slo), max_num_seqs, json_out, _min_gain(min_gain))
    _write_page(run_dir, json_out)


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
    json_out: Annotated[bool, typer.Option("--json", help="Print the summaries as JSON instead of tables.")] = False,
) -> None:
    """Launch the recommended dynamic config and run the sweep's load points again, interleaved with the
    baseline and each point's best static config: throughput and TPOT against all, head to head, and a check
    in the engine's per-step stats that it drafted the K the table names for the batch it ran. Where a static
    K other than the table's beats it there, writes a corrected recommendation from the pooled evidence (the
    contradicted one kept as recommendation-r<n>.json); --until-stable verifies the correction too."""
    _recommend_and_verify(run_dir, _objective(objective), _slo(slo), max_num_seqs, json_out, None,
                          api_key=_api_key(api_key), endpoint=endpoint, repeats=repeats, verify_dir=out,
                          given=recommendation, rounds=rounds if until_stable else 1, min_gain=_min_gain(min_gain))


def _min_gain(value: float | None) -> float | None:
    if value is not None and not 0.0 <= value < 1.0:
        raise InputError(f"--min-gain {value}: give a fraction in [0, 1), e.g. 0.01 for 1%")
    return value


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
    from specmeter.plans.demo import demo_plan

    ex = demo_plan(_levels(concurrency), num_prompts, _levels(k), max_tokens, repeats or 1,
                   precision="fixed" if repeats else "adaptive", max_rounds=max_rounds,
                   min_gain=_min_gain(min_gain) or 0.0)
    ex.command = ["specmeter", *sys.argv[1:]]
    run_dir = out / new_run_id("demo")
    with ServerPool() as pool:
        _execute(ex, run_dir, json_out=False, pool=pool)
        _recommend_and_verify(run_dir, "throughput", None, None, False, pool, verify_dir=run_dir / "verify",
                              off_is_an_answer=True, rounds=rounds)


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
    if dataset != "speed-bench":
        raise InputError(f"data prepare: unknown dataset {dataset!r}; available: speed-bench")
    from specmeter.data.speed_bench import DEFAULT_REVISION
    from specmeter.data.speed_bench_prepare import prepare

    report = prepare(config, revision=revision or DEFAULT_REVISION, out_dir=out, seed=seed)
    for line in report.lines():
        console.print(line, highlight=False)
    console.print(f"prepared into [cyan]{out}[/]; run: specmeter run --dataset speed-bench --dataset-path {out}")


@app.command()
def report(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by run, sweep, compare-workloads or demo.")],
    json_out: Annotated[bool, typer.Option("--json", help="Print summary.json instead of tables.")] = False,
    html: Annotated[Path | None, typer.Option(help="Write the one-file HTML report here (plots inlined, works offline).")] = None,
    csv: Annotated[Path | None, typer.Option(help="Write requests.csv, points.csv, speedups.csv (and recommendation.csv) into this directory.")] = None,
    plots: Annotated[Path | None, typer.Option(help="Write every plot as PNG and SVG into this directory.")] = None,
) -> None:
    """Show the report of a finished (or interrupted) run again, from its saved results (no server), and
    write it as HTML, CSV or plots."""
    from specmeter.report.outputs import output

    run = load_run(run_dir)
    written: list[Path] = []
    for kind, dest in (("html", html), ("csv", csv), ("plots", plots)):
        if dest is not None:
            written += output(kind, dest).write(run)
    if json_out:
        output("json").write(run)
    elif not written:
        ConsoleOutput(console=console).write(run)
    for path in written:
        (err_console if json_out else console).print(f"wrote [cyan]{path}[/]")


@app.command()
def compare(
    run_dirs: Annotated[list[Path], typer.Argument(help="Two or more run directories on the same workload; the first is the reference.")],
    allow_different_workloads: Annotated[bool, typer.Option(help="Compare runs whose requests or sampling differ (their differences then mix engine and workload).")] = False,
    plots: Annotated[Path | None, typer.Option(help="Write overlaid plots of the runs (PNG and SVG) into this directory.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON instead of tables.")] = False,
) -> None:
    """Stored runs side by side (e.g. vLLM against llama.cpp) at the load points they share: throughput, TPOT,
    acceptance and each run's own speedup, and every run against the first, paired by request across runs."""
    from specmeter.analysis.compare import compare_runs
    from specmeter.report.compare import render_comparison
    from specmeter.run_data import load_run

    if len(run_dirs) < 2:
        raise InputError("compare: give two or more run directories (the first is the reference)")
    runs = [load_run(d) for d in run_dirs]
    comparison = compare_runs(runs, allow_different_workloads=allow_different_workloads)
    if json_out:
        sys.stdout.write(comparison.model_dump_json(indent=2) + "\n")
    else:
        render_comparison(comparison, console)
    if plots is not None:
        from specmeter.report.plot_style import save
        from specmeter.report.plots import compare_figures

        plots.mkdir(parents=True, exist_ok=True)
        written: list[Path] = []
        for name, fig in compare_figures(runs).items():
            written += save(fig, plots, name)  # PNG and SVG, as the run's own plots are saved
        (err_console if json_out else console).print(f"plots: {len(written)} files in [cyan]{plots}[/]")


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


if __name__ == "__main__":
    main()
