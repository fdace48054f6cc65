"""`specmeter run`: one speculative configuration and the same engine with speculation off; and
`compare-workloads`: the same pair on the real workload and on random tokens of matched lengths."""

from __future__ import annotations

from typing import Literal

from specmeter.common.errors import InputError
from specmeter.config.endpoints import Endpoint, normalize_endpoint
from specmeter.config.models import EngineSpec, LoadSpec, SpecConfig
from specmeter.schemas.plan import MatchedRandom, Plan, PlannedConfig, Role, WorkloadSelection

BASELINE = "baseline"
ATTACHED = "attached"


def config_id(spec: SpecConfig) -> str:
    """A readable, stable id for a speculative configuration: 'draft_model-k4', 'ngram-k3-n2-5'; synthetic
    acceptance says so ('draft_model-k4-synth-al3.4', 'draft_model-k4-ceiling'), so every table and plot that
    names the configuration shows it, and it never shares an id with the real drafter. A tree names its shape
    ('eagle3-tree-d5-n63-top8'): its K is its depth, which alone does not tell two trees apart."""
    if not spec.enabled:
        return BASELINE
    parts = [spec.method.value, spec.tree.id_part() if spec.tree is not None else f"k{spec.k}"]
    if spec.prompt_lookup_min is not None or spec.prompt_lookup_max is not None:
        parts.append(f"n{spec.prompt_lookup_min or ''}-{spec.prompt_lookup_max or ''}")
    if spec.num_speculative_tokens_per_batch_size:
        parts.append("dynamic")
    if spec.draft_p_min is not None:
        parts.append(f"p{spec.draft_p_min:g}")
    if spec.adaptive:
        parts.append("adaptive")
    if spec.synthetic_acceptance is not None:
        parts.append(spec.synthetic_acceptance.id_part(spec.k))
    return "-".join(parts)


def baseline_engine(engine: EngineSpec, baseline_endpoint: Endpoint | None) -> EngineSpec | None:
    """The engine that serves speculation off: the same launch, or a speculation-off twin in attach mode (one
    server, or its replicas)."""
    if engine.launch:
        return engine
    return engine.model_copy(update={"endpoint": normalize_endpoint(baseline_endpoint)}) if baseline_endpoint else None


def run_plan(engine: EngineSpec, spec: SpecConfig, load: LoadSpec, *, baseline: bool,
             baseline_endpoint: Endpoint | None, workload: WorkloadSelection, interleave: bool = False,
             repeats: int = 1, kind: Literal["run", "demo"] = "run") -> Plan:
    """Speculation first, then the same engine with it off (launch mode) or at baseline_endpoint."""
    configs: list[PlannedConfig] = []
    if spec.enabled or not engine.launch:
        cid = config_id(spec) if spec.enabled else ATTACHED
        configs.append(PlannedConfig(id=cid, role=Role.candidate, spec=spec, engine=engine, server=cid))
    base = baseline_engine(engine, baseline_endpoint) if (baseline or not configs) else None
    if base is not None:
        configs.append(PlannedConfig(id=BASELINE, role=Role.baseline, spec=SpecConfig(), engine=base, server=BASELINE))
    load = load.with_precision(interleave=interleave, repeats=repeats, default="fixed")
    return Plan(kind=kind, configs=configs, load=load, workload=workload, interleave=interleave, repeats=repeats)


def compare_workloads_plan(engine: EngineSpec, spec: SpecConfig, load: LoadSpec, *, vocab_size: int,
                           excluded_token_ids: list[int], baseline_endpoint: Endpoint | None,
                           workload: WorkloadSelection) -> Plan:
    """Speculation on the real workload and on matched random tokens (one server), then the same two
    with speculation off: the random prompts match what the speculative config completed at the first
    point, with forced output lengths."""
    if not spec.enabled:
        raise InputError("compare-workloads needs a speculative config (--spec) to compare")
    if load.search:
        raise InputError(f"compare-workloads measures the points it is given; list them instead of "
                         f"{load.search[0].key}: auto (a search is for sweeps)")
    cid = config_id(spec)
    forced = load.model_copy(update={"ignore_eos": True})
    matched = MatchedRandom(source_config=cid, source_point=load.points[0].id, vocab_size=vocab_size,
                            excluded_token_ids=excluded_token_ids, seed=load.seed)
    configs = [
        PlannedConfig(id=cid, role=Role.candidate, spec=spec, engine=engine, server=cid),
        PlannedConfig(id=f"{cid}:random", role=Role.candidate, spec=spec, engine=engine, server=cid,
                      workload="random", matched_random=matched, load=forced),
    ]
    base = baseline_engine(engine, baseline_endpoint)
    if base is not None:
        off = SpecConfig()
        configs += [
            PlannedConfig(id=BASELINE, role=Role.baseline, spec=off, engine=base, server=BASELINE),
            PlannedConfig(id=f"{BASELINE}:random", role=Role.baseline, spec=off, engine=base, server=BASELINE,
                          workload="random", matched_random=matched, load=forced),
        ]
    return Plan(kind="compare-workloads", configs=configs, load=load, workload=workload)
