"""`specmeter sweep`: every speculative configuration at every load point against the baseline, from a sweep
file or the shorthand flags; with --verify, then the Ks the step-cost model proposes measured head to head and
recommend -> verify -> correct, on the sweep's servers."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specmeter.common.errors import InputError
from specmeter.config.criteria import check_indifference, check_min_gain
from specmeter.config.drafts import Drafts
from specmeter.config.files import build_model, laid_over, sections_over
from specmeter.config.slurm import SlurmOptions
from specmeter.data.model import Conversation
from specmeter.data.selection import output_policy
from specmeter.data.shaping import check_lengths
from specmeter.data.workload import load_conversations, load_lengths
from specmeter.engines.preflight import check_local_models, launch_notes
from specmeter.execution.runner import Execution
from specmeter.execution.servers import ServerPool
from specmeter.placement.inventory import detect_gpus
from specmeter.placement.servers import placed
from specmeter.plans.sweep import SweepSpec, read_sweep_file
from specmeter.plans.verify import check_verifiable
from specmeter.report.console import print_tables
from specmeter.report.placement import placement_notes, placement_table
from specmeter.rundir.store import new_run_id
from specmeter.schemas.placement import Placement
from specmeter.schemas.plan import PlannedConfig
from specmeter.workflows.execute import measure_and_keep, measure_one, showing, write_page
from specmeter.workflows.plan import calibrate_sweep
from specmeter.workflows.propose import ProposeRequest, propose
from specmeter.workflows.slurm import sweep_on_slurm
from specmeter.workflows.terminal import Terminal
from specmeter.workflows.verify import DeployAnswer, VerifyRequest, answering, recommend_and_verify


@dataclass(frozen=True)
class SweepRequest:
    """What `sweep` was asked: the sweep, resolved and validated (`sweep_spec`: the flags over the file or the
    shorthand, over the defaults), where the run directory goes, and with `verify` set, how to verify the table the
    sweep gives."""

    spec: SweepSpec
    out: Path
    gpus_given: bool = False  # --gpus on the command line (where the sweep's GPUs came from, for its one line)
    name: str | None = None
    api_key: str | None = None
    command: list[str] = field(default_factory=list)
    verify: VerifyRequest | None = None
    propose: ProposeRequest | None = None  # with `verify`: the proposed Ks measured before round 1 (None: none)
    slurm: SlurmOptions | None = None  # --executor slurm: run the plan as Slurm jobs (None: here)
    dry_run: bool = False  # print the servers and their placement, start nothing

    def __post_init__(self) -> None:  # what the request cannot ask together, before anything is planned
        if self.propose is not None and self.verify is None:
            raise InputError("--propose measures the Ks the step-cost model proposes in the tune loop that --verify "
                             "runs on the sweep's servers: add --verify (or drop --propose)")
        if self.verify is not None and self.slurm is not None:
            raise InputError("--verify runs the recommended config on the sweep's servers, which end with their "
                             "Slurm jobs; sweep on Slurm without --verify, then `specmeter verify RUN_DIR` where a "
                             "server can run")
        if self.slurm is not None and self.gpus_given:
            raise InputError("--gpus names GPUs of this machine; on Slurm each job places its servers on the GPUs of "
                             "its own allocation: drop --gpus (ask for them with --gpus-per-job)")


def sweep_from_flags(flags: Drafts, engine: Mapping[str, Any]) -> SweepSpec:
    """The sweep file the shorthand flags (and the engine's settings given) stand for, validated as one."""
    if not engine.get("model") or not flags.spec:
        raise InputError("sweep: give a sweep file, or --model and at least one --spec (with --k for several K)")
    candidates = []
    for text in flags.spec:
        try:
            cand = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"--spec: not valid JSON ({exc.msg} at column {exc.colno})") from exc
        if not isinstance(cand, dict):
            raise InputError("--spec: expected a JSON object of speculative-config keys")
        if flags.k:
            cand["num_speculative_tokens"] = flags.k
        candidates.append(cand)
    spec: SweepSpec = build_model(SweepSpec, {"engine": engine, "candidates": candidates}, "command line")
    return spec


def sweep_spec(file: Path | None, drafts: Drafts | None = None, given: Mapping[str, Mapping[str, Any]] | None = None,
               top: Mapping[str, Any] | None = None) -> SweepSpec:
    """The sweep as asked, in one resolution: the sweep file, or the shorthand flags (`drafts` and the engine's
    model); the engine, workload and load settings `given` as flags over its sections, and the top-level ones
    (`top`: repeats, interleave, min_gain, indifference, ceiling, gpus, baseline_endpoint) over its keys; the flags
    win, then the file, then the fields' defaults."""
    drafts, given, top = drafts or Drafts(), given or {}, top or {}
    engine = given.get("engine", {})
    if file is not None:
        if drafts.given() or engine.get("model"):
            raise InputError(f"{file}: give the sweep either as a file or as --model/--spec/--k flags, not both")
        sw = read_sweep_file(file)
    else:
        sw = sweep_from_flags(drafts, engine)
    gain, zone = check_min_gain(top.get("min_gain")), top.get("indifference")
    # The file's zone counts too: a --min-gain above it needs a wider --indifference.
    check_indifference(sw.indifference if zone is None else zone, sw.min_gain if gain is None else gain)
    where = str(file) if file is not None else "command line"
    laid = sections_over(sw, given, where)
    sections = {"engine": laid.engine, "workload": laid.workload, "load": laid.load}
    return laid_over(SweepSpec, sw, {**sections, **top}, where)  # validated once more as a whole: a search
    # given as a flag interleaves the sweep, as one in the file does


def sweep(req: SweepRequest, term: Terminal) -> None:
    """Check what the sweep's servers need before one starts, measure the sweep into a new run directory, and with
    `req.verify` measure the Ks the step-cost model proposes (`req.propose`), recommend and verify on the same
    servers (one JSON document for all of it under --json)."""
    sw = req.spec
    # On Slurm the GPUs are those of each job's allocation, known only there: each job places its own servers.
    placement = None if req.slurm is not None else sweep_placement(sw, req.gpus_given)
    if req.verify is not None:  # refused before the sweep, not after it
        refuse_unverifiable(sw, placement)
    ex = prepared(sw, placement, req, term)
    if req.dry_run:  # after every check a real run makes, so a dry run that passes is one a real run starts
        show_placement(sw, placement, term)
        return
    run_dir = req.out / (req.name or new_run_id(f"sweep-{len(ex.plan.configs)}configs"))
    if req.slurm is not None:
        sweep_on_slurm(ex, run_dir, req.slurm, term)
    elif req.verify is None:
        with showing(run_dir, term):  # shown once calibrated: the drafters' table carries their step costs
            if calibrate_sweep(run_dir, measure_one(ex, run_dir, term, show=False), term) is not None:
                write_page(run_dir, term)
    else:
        tune(ex, run_dir, req.verify, req.propose, term)


def refuse_unverifiable(sw: SweepSpec, placement: Placement | None) -> None:
    """--verify launches the config it recommends beside the sweep's servers: refused where it cannot."""
    check_verifiable(sw.engine.kind, "--verify")
    if not sw.configs()[0].engine.launch:
        raise InputError("--verify: the sweep attaches to a running baseline server, so specmeter cannot launch the "
                         "config it recommends; sweep without --verify, then start a server with the recommended "
                         "config and run `specmeter verify RUN_DIR --endpoint URL`")
    if placement is not None and placement.mode != "cpu" and len(placement.servers) > 1:
        raise InputError("--verify keeps the sweep's servers up and starts the recommended config beside them on the "
                         "baseline's GPUs, which placement does not plan yet; sweep without --verify, then start the "
                         "recommended config and run `specmeter verify RUN_DIR --endpoint URL`")
    if sw.workload.lengths:
        raise InputError("--verify: a workload.input_len axis gives a table per input length; sweep without --verify "
                         "and read `specmeter recommend RUN_DIR`")


def prepared(sw: SweepSpec, placement: Placement | None, req: SweepRequest, term: Terminal) -> Execution:
    """The sweep's execution: local models checked, the workload loaded (one per input length of an axis), and
    what the user should know before it starts said once."""
    configs = sw.configs()  # the baseline first
    notes = []
    for cfg in configs:
        if cfg.engine.launch:
            check_local_models(cfg.engine, cfg.spec)
            notes += [n for n in launch_notes(cfg.engine, cfg.spec) if n not in notes]  # one per setting, not per K
    ld, w = sw.effective_load(), sw.workload
    tokenizer = w.tokenizer or sw.engine.model
    by_length: dict[int, list[Conversation]] = {}
    if w.lengths:
        check_lengths(w.lengths, w.dataset, tokenizer, ld.max_tokens, sw.engine.max_model_len)
        by_length, workload = load_lengths(w.dataset, w.path, ld, w.lengths, w.categories, w.options, tokenizer)
        convs = by_length[w.lengths[0]]
    else:
        convs, workload = load_conversations(w.dataset, w.path, ld, categories=w.categories, options=w.options,
                                             input_len=w.length_range, tokenizer=tokenizer, trace=w.trace,
                                             phases=w.phases)
    notes += workload.notes
    if warning := output_policy(ld).warning():
        notes.insert(0, warning)
    if placement is not None and placement.warning:
        notes.insert(1 if warning else 0, placement.warning)
    if req.propose is None and (ranges := k_ranges(configs)):
        notes.append(f"{ranges}: the sweep measures these Ks of each range; the others are proposed by the "
                     "step-cost model and measured head to head with --verify (or predicted by `specmeter plan "
                     "RUN_DIR`)")
    for note in notes:
        term.note.print(f"[yellow]note: {note}[/]", highlight=False)
    return Execution(plan=sw.plan(workload, placement), conversations=convs, api_key=req.api_key,
                     command=req.command, by_length=by_length)


def tune(ex: Execution, run_dir: Path, verify: VerifyRequest, proposals: ProposeRequest | None,
         term: Terminal) -> None:
    """The sweep, then the Ks proposed measured and recommend -> verify -> correct, all on the sweep's servers."""
    with ServerPool() as pool, answering(DeployAnswer(), term) as answer, showing(run_dir, term):
        cal = calibrate_sweep(run_dir, measure_and_keep(ex, run_dir, term, answer.keep_sweep, pool, show=False), term)
        if proposals is not None:
            propose(run_dir, cal, proposals, term, pool, answer.proposals.append)
        recommend_and_verify(run_dir, verify, term, pool, answer)


def k_ranges(configs: list[PlannedConfig]) -> str:
    """Each drafter's K range and the Ks of it the sweep runs: `eagle3 demo-eagle3 K 1-6 (runs 2, 5)` ('' without
    a range)."""
    runs: dict[tuple[str, tuple[int, int]], list[int]] = {}
    for c in configs:
        if c.k_range is not None:
            who = c.spec.method.value + (f" {Path(c.spec.draft_model).name}" if c.spec.draft_model else "")
            runs.setdefault((who, c.k_range), []).append(c.k)
    return "; ".join(f"{who} K {lo}-{hi} (runs {', '.join(map(str, sorted(ks)))})"
                     for (who, (lo, hi)), ks in runs.items())


def sweep_placement(sw: SweepSpec, flagged: bool) -> Placement:
    """Where the sweep's servers run: on the GPUs of --gpus (`flagged`), else the file's gpus, else those found
    here."""
    found, source = detect_gpus(sw.gpus, "--gpus" if flagged else "the sweep file's gpus", os.environ)
    return sw.place(found, source)


def show_placement(sw: SweepSpec, placement: Placement | None, term: Terminal) -> None:
    """`--dry-run`: the servers, where each would run and with what memory, and nothing started (on Slurm, where
    each job places its own, their count)."""
    if placement is None:
        term.out.print(f"[bold]sweep --dry-run[/]: {len(sw.configs())} configurations; on Slurm each job places its "
                       "servers on the GPUs of its allocation when it starts; nothing submitted")
        return
    together = sw.interleaved(placement)
    if term.json_out:
        term.emit(placement.model_dump_json(indent=2))
        return
    configs = placed(sw.configs(), placement)
    term.out.print(f"[bold]sweep --dry-run[/]: {len(sw.configs())} configurations on "
                   f"{len({c.server for c in configs})} servers, "
                   + ("all up together (interleave)" if together else "one server at a time") + "; nothing started")
    table = placement_table(configs, placement)
    print_tables([table] if table is not None else [], placement_notes(placement, sw.engine.kind), term.out)
