"""Rebuild the plan of an interrupted run from its own run directory, to finish it."""

from __future__ import annotations

from pathlib import Path

from specmeter.compare import KIND, compare_phases
from specmeter.config import EngineSpec, LoadSpec, SpecConfig, build_model
from specmeter.errors import InputError
from specmeter.runner import RunPlan, plan_phases
from specmeter.store import RunStore, load_summary
from specmeter.workload import load_conversations


def resume_plan(run_dir: Path, api_key: str | None) -> RunPlan:
    summary = load_summary(run_dir)
    if summary.status == "complete":
        raise InputError(f"{run_dir}: this run is already complete; nothing to resume")
    where = f"{run_dir}/summary.json"
    cfg = summary.config
    engine = build_model(EngineSpec, cfg.get("engine"), f"{where}: engine")
    if any("***" in arg for arg in engine.extra_args):
        raise InputError(
            f"{run_dir}: the server was launched with a secret engine argument that specmeter never stores "
            "(e.g. --api-key); it cannot be relaunched from the run directory: start a new run"
        )
    spec = build_model(SpecConfig, cfg.get("spec"), f"{where}: spec")
    load = build_model(LoadSpec, cfg.get("load"), f"{where}: load")
    wl = summary.workload
    sel = wl.get("selection") or {}
    input_len = sel.get("input_len")
    convs, _ = load_conversations(wl["dataset"], wl.get("path"), load, categories=sel.get("categories"),
                                  options=sel.get("options") or {},
                                  input_len=tuple(input_len) if input_len else None, tokenizer=sel.get("tokenizer"))
    if [c.id for c in convs] != wl.get("conversation_ids"):
        raise InputError(
            f"{run_dir}: the workload {wl['dataset']} ({wl.get('path') or 'built-in'}) no longer gives the same "
            "conversations as when the run started; restore that dataset file or start a new run"
        )
    if wl.get("kind") == KIND:
        phases = compare_phases(engine, spec, load, int(wl["vocab_size"]), wl.get("excluded_token_ids") or [],
                                cfg.get("baseline_endpoint"))
    else:
        phases = plan_phases(engine, spec, bool(cfg.get("baseline")), cfg.get("baseline_endpoint"))
    return RunPlan(
        phases=phases, load=load, conversations=convs, workload=wl, api_key=api_key,
        command=summary.command, prior=summary, prior_records=RunStore(run_dir).read_records(),
    )
