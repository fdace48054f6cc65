"""Calibrate the step-cost model on one or more runs of one engine, target and hardware: calibration.json.

Runs pool only when their numbers describe one machine: the same engine, target model and hardware (a
different engine version is allowed, and noted). Every observation is kept in the file with its residual, so
the fit can be audited and redone from the file alone.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from specmeter.analysis.families import drafter_label
from specmeter.common.errors import InputError
from specmeter.config.endpoints import endpoint_label
from specmeter.predict.forms import choose
from specmeter.predict.observations import drafter_key, observations
from specmeter.predict.stepcost import Fit, fit, observation_features, term_names
from specmeter.schemas.planner import Calibration, DrafterCost, Observation
from specmeter.schemas.results import RunSummary


def hardware_of(summary: RunSummary) -> str:
    """The machine a run measured on: the GPUs its launched servers were placed on (their names and how many), else
    the machine its environment records (the CPU, for a CPU run or servers attached elsewhere). The GPU, not the host
    CPU, sets a GPU run's step cost: two boxes of one GPU pool, one host with two kinds of GPU does not."""
    placement = summary.plan.placement
    if placement is not None and placement.gpus:
        used = {gid for server in placement.servers for gid in server.gpus}
        names = [g.name or f"GPU {g.id}" for g in placement.gpus if g.id in used]
        if names:
            return ", ".join(f"{name} x{names.count(name)}" for name in sorted(set(names)))
    env = summary.environment
    gpus = env.get("gpus") or env.get("gpu")
    if gpus:
        return f"{gpus}"
    return f"{env.get('cpu', 'cpu ?')} x{env.get('cpu_count', '?')} ({env.get('machine', '?')})"


def engine_of(summary: RunSummary) -> tuple[str, str | None, str]:
    """(engine kind, version, target model) of a run's baseline (or first) configuration."""
    plan = summary.plan
    planned = plan.main_baseline or plan.configs[0]
    version = next((c.engine_version for c in summary.configs if c.engine_version), None)
    target = planned.engine.model or endpoint_label(planned.engine.endpoint) or "?"
    target_hash = summary.models.get("target", {}) if isinstance(summary.models.get("target"), dict) else {}
    sha = target_hash.get("sha256") if isinstance(target_hash, dict) else None
    if isinstance(sha, dict):
        sha = sha.get("model.safetensors")
    return planned.engine.kind or "vllm", version, f"{target}" + (f" ({sha[:10]})" if isinstance(sha, str) else "")


def calibrate(runs: Sequence[tuple[str, RunSummary]], exclude: Sequence[str] = ()) -> Calibration:
    """Fit the step-cost model on every readable point of `runs` (name, summary), leaving `exclude`d
    configurations out of the fit (they stay in the file, marked unused, to be predicted blind)."""
    if not runs:
        raise InputError("calibrate: give at least one run directory")
    notes: list[str] = []
    first_name, first = runs[0]
    engine, version, target = engine_of(first)
    hardware = hardware_of(first)
    for name, summary in runs[1:]:
        other_engine, other_version, other_target = engine_of(summary)
        for what, a, b in (("engine", engine, other_engine), ("target model", target, other_target),
                           ("hardware", hardware, hardware_of(summary))):
            if a != b:
                raise InputError(f"calibrate: {name} ran {what} {b}, {first_name} ran {a}: a calibration pools "
                                 f"runs of one engine, target and hardware; calibrate them apart")
        if other_version != version:
            notes.append(f"{name} ran engine version {other_version}, {first_name} {version}: pooled")
    known = {c.id for _, s in runs for c in s.plan.configs}
    unknown = sorted(set(exclude) - known)
    if unknown:
        raise InputError(f"--exclude {unknown[0]}: no such configuration in the runs; choose from "
                         f"{', '.join(sorted(known))}")
    obs: list[Observation] = []
    labels: dict[str, str] = {}
    for name, summary in runs:
        obs += observations(summary, name, set(exclude), notes)
        for c in summary.plan.configs:
            if c.spec.enabled:
                labels.setdefault(drafter_key(c.spec), drafter_label(c.spec))
    if not any(o.used and o.drafter is None for o in obs):
        raise InputError(f"calibrate: {first_name} has no speculation-off point to calibrate the target's step on; "
                         "calibrate on a sweep (it always runs the baseline)")
    drafters = sorted({o.drafter for o in obs if o.drafter is not None and o.used})
    chosen = choose(obs, drafters)
    model = chosen.fit
    obs = [_with_residual(o, model) for o in obs]
    costs = [_cost(model, d, labels.get(d, d)) for d in drafters]
    if model.scale is None:
        notes.append(f"{len([o for o in obs if o.used])} points for {model.rank} independent terms: no degrees of "
                     "freedom left, so predictions carry no interval; measure more loads")
    return Calibration(engine=engine, engine_version=version, hardware=hardware, target=target,
                       runs=[n for n, _ in runs], form=model.form, choice=chosen.record,
                       terms=term_names(model.form, [c.label for c in costs]),
                       coefficients=[float(v) for v in model.coefficients],
                       covariance=[[float(v) for v in row] for row in model.covariance],
                       residual_scale=model.scale, dof=model.dof, rank=model.rank, drafters=costs,
                       excluded=sorted(exclude), observations=obs, notes=notes)


def _cost(model: Fit, drafter: str, label: str) -> DrafterCost:
    got = model.drafter_costs(drafter)
    return DrafterCost(drafter=drafter, label=label, per_draft_s=got.get("per_draft", 0.0),
                       per_draft_token_s=got.get("per_draft_token", 0.0), per_step_s=got.get("per_step", 0.0),
                       per_step_sequence_s=got.get("per_step_sequence", 0.0))


def refit(calibration: Calibration) -> tuple[Fit, tuple[Fit, ...]]:
    """The fits behind a calibration, redone from its stored observations (what prediction needs beyond the
    coefficients: which combinations of terms the data determine): its form's, then those of the forms its
    choice could not tell from it."""
    drafters = [d.drafter for d in calibration.drafters]
    tied = calibration.choice.tied if calibration.choice is not None else []
    return (fit(calibration.observations, drafters, calibration.form),
            tuple(fit(calibration.observations, drafters, f) for f in tied))


def _with_residual(obs: Observation, model: Fit) -> Observation:
    if obs.drafter is not None and obs.drafter not in model.drafters:
        return obs  # a drafter left out entirely: nothing to compare against
    x = model.determined(observation_features(model.drafters, obs, model.form))
    if x is None:
        return obs
    fitted = model.step(x)
    if fitted <= 0 or not np.isfinite(fitted):
        return obs
    return obs.model_copy(update={"fitted_s": fitted, "residual": (obs.step_s - fitted) / fitted})
