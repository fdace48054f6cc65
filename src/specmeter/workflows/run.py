"""`specmeter run` and `compare-workloads`: one speculative configuration (and its speculation-off baseline)
from a YAML file and flags, measured into a new run directory."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from specmeter.config.endpoints import Endpoint
from specmeter.config.run import RunSettings
from specmeter.config.schedule import Schedule
from specmeter.data.matched import vocab_from_model
from specmeter.data.selection import output_policy
from specmeter.data.workload import load_conversations
from specmeter.engines.preflight import check_local_models, launch_notes
from specmeter.execution.runner import Execution
from specmeter.plans.run import compare_workloads_plan, run_plan
from specmeter.rundir.store import new_run_id
from specmeter.workflows.execute import measure_one
from specmeter.workflows.terminal import Terminal


@dataclass(frozen=True)
class RunRequest:
    """What `run` was asked: the settings it measures with, resolved and validated (config/run.py `run_settings`:
    the flags over the file over the defaults), and where and how to run them."""

    settings: RunSettings
    out: Path
    name: str | None = None
    baseline: bool = True
    baseline_endpoint: Endpoint | None = None
    schedule: Schedule = field(default_factory=Schedule)  # --repeats, --interleave
    api_key: str | None = None
    command: list[str] = field(default_factory=list)
    # compare-workloads: the same pair on matched random tokens too, over this vocabulary (None: the model's).
    compare_random: bool = False
    vocab_size: int | None = None


def run(req: RunRequest, term: Terminal) -> None:
    """Check the local models before a server starts, load the workload, plan, and measure into a new run
    directory under `req.out`."""
    eng, sp, ld, w = req.settings.engine, req.settings.spec, req.settings.load, req.settings.workload
    notes = []
    if eng.launch:
        check_local_models(eng, sp)
        notes = launch_notes(eng, sp)
    convs, workload = load_conversations(w.dataset, w.path, ld, categories=w.categories, options=w.options,
                                         input_len=w.length_range, tokenizer=w.tokenizer or eng.model, trace=w.trace,
                                         phases=w.phases)
    notes += workload.notes
    if warning := output_policy(ld).warning():
        term.note.print(f"[yellow]note: {warning}[/]")
    for note in notes:
        term.note.print(f"[yellow]note: {note}[/]", highlight=False)
    if req.compare_random:
        vocab, special = (req.vocab_size, []) if req.vocab_size else vocab_from_model(eng.model)
        plan = compare_workloads_plan(eng, sp, ld, vocab_size=vocab, excluded_token_ids=special,
                                      baseline_endpoint=req.baseline_endpoint if req.baseline else None,
                                      workload=workload)
    else:
        plan = run_plan(eng, sp, ld, baseline=req.baseline, baseline_endpoint=req.baseline_endpoint,
                        workload=workload, interleave=req.schedule.interleave,
                        repeats=req.schedule.repeats)
    ex = Execution(plan=plan, conversations=convs, api_key=req.api_key, command=req.command)
    label = ("compare-" if req.compare_random else "") + sp.label()
    measure_one(ex, req.out / (req.name or new_run_id(label)), term)
