"""A run's measured points as engine steps: what the step-cost model is fitted on.

A request emits `tokens_per_step` tokens per engine step (AL where every step drafts), so an engine step of a
point takes mean TPOT x tokens per step. The batch is the engine's running-requests gauge (within the steady
window where there is one), or Little's law over the point's requests where the gauge was read too rarely. The
KV tokens held and the prompt tokens other requests prefill per step come from the point's own request mix.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from specmeter.config.models import SpecConfig
from specmeter.schemas.plan import PlannedConfig, Role
from specmeter.schemas.planner import Observation
from specmeter.schemas.results import PointResult, RunSummary


def drafter_key(spec: SpecConfig) -> str:
    """What a drafter costs per step depends on what runs, not on K or on a forced acceptance: method, draft
    model, lookup window and draft tensor parallel size."""
    keep = {"method", "draft_model", "prompt_lookup_min", "prompt_lookup_max", "draft_tensor_parallel_size"}
    return json.dumps(spec.model_dump(mode="json", include=keep), sort_keys=True)


@dataclass(frozen=True)
class Mix:
    """The requests of a run: mean prompt and output tokens per request (what KV and prefill scale with)."""

    prompt_tokens: float
    output_tokens: float


def request_mix(summary: RunSummary) -> Mix | None:
    """Mean prompt and output tokens per completed request over the run's main-workload points."""
    prompt = output = done = 0
    for res in summary.configs:
        if res.workload != "main":
            continue
        for p in res.points:
            prompt += p.latency.prompt_tokens
            output += p.latency.output_tokens
            done += p.latency.num_ok
    if not done or not output:
        return None
    return Mix(prompt / done, output / done)


MIN_GAUGE_SAMPLES = 10  # fewer reads of the running-requests gauge than this say little about a short point


def _batch(point: PointResult, planned: PlannedConfig, summary: RunSummary) -> float | None:
    """The engine's running batch: its gauge, where it was read often enough; else Little's law over the
    point's requests (requests in flight = completed requests x mean E2E / wall time)."""
    gauge = point.running_batch
    if gauge is not None and gauge.samples >= MIN_GAUGE_SAMPLES:
        value = gauge.steady_mean if gauge.steady_mean is not None else gauge.mean
        if value is not None and value > 0:
            return max(1.0, value)
    lat = point.latency
    if lat.num_ok and lat.wall_s > 0 and lat.e2e_s.mean is not None:
        return max(1.0, lat.num_ok * lat.e2e_s.mean / lat.wall_s)
    load = summary.plan.load.point(point.point_id)
    if load is not None and load.kind == "concurrency":
        return float(load.concurrency)
    return None


def _per_step(point: PointResult) -> tuple[float, float] | None:
    """(tokens per request-step, drafted tokens per request-step) of an SD point.

    Where per-request counts cover every completed request, from them: each request's first token comes from its
    prefill, the rest from steps that each emit one target token plus what they accepted, so steps = decode
    tokens - accepted (also counting steps that drafted nothing, as an n-gram miss is). A request's last step may
    accept drafts past max_tokens that are never emitted, which makes that count short (a K = 4 draft model read
    4.18 drafted per step); the engine's count of drafting steps is exact where every step drafts, and short only
    by the steps that drafted nothing, so the larger of the two is the count. Otherwise every step is assumed to
    draft: tokens per step = AL."""
    sd = point.sd
    req = sd.per_request
    lat = point.latency
    decode = lat.output_tokens - lat.num_ok
    if req is not None and sd.requests_with_stats == lat.num_ok and decode > req.num_accepted_tokens:
        steps = max(decode - req.num_accepted_tokens, req.num_steps or 0)
        return decode / steps, req.num_draft_tokens / steps
    head = sd.headline
    if head is None or head.acceptance_length is None or head.mean_draft_length is None:
        return None
    return head.acceptance_length, head.mean_draft_length


def observations(summary: RunSummary, run: str, exclude: set[str], notes: list[str]) -> list[Observation]:
    """Every measured point of the run's main workload that the model can read, one engine step each."""
    out: list[Observation] = []
    for res in summary.configs:
        planned = next((c for c in summary.plan.configs if c.id == res.config_id), None)
        if planned is None or res.workload != "main" or planned.role is Role.verification:
            continue
        spec = planned.spec
        if spec.num_speculative_tokens_per_batch_size:
            notes.append(f"{run}/{res.config_id}: dynamic K (its K changes with the batch) is left out of the "
                         "calibration")
            continue
        for point in res.points:
            obs = _observe(point, planned, summary, run, notes)
            if obs is not None:
                out.append(obs.model_copy(update={"used": res.config_id not in exclude}))
    return out


def _observe(point: PointResult, planned: PlannedConfig, summary: RunSummary, run: str,
             notes: list[str]) -> Observation | None:
    where = f"{run}/{planned.id}/{point.point_id}-r{point.repeat}"
    lat = point.latency
    tpot = point.steady.tpot_s.mean if point.steady is not None and point.steady.tpot_s.count else None
    tpot = tpot if tpot is not None else lat.tpot_s.mean
    batch = _batch(point, planned, summary)
    if tpot is None or not lat.num_ok or batch is None or point.resumed:
        why = ("resumed on a second server" if point.resumed else "no TPOT" if tpot is None
               else "no running batch (no gauge, and not a closed loop)")
        notes.append(f"{where}: left out ({why})")
        return None
    # An attached candidate's plan may not name its speculative config: what the engine's counters say it drafted
    # is what it ran, never the K = 0 of a spec left empty.
    if planned.spec.enabled or planned.role is Role.candidate:
        per_step = _per_step(point)
        if per_step is None:
            notes.append(f"{where}: left out (no acceptance counted)")
            return None
        tokens, k = per_step
        drafter: str | None = (drafter_key(planned.spec) if planned.spec.enabled
                               else f"attached server of {planned.id} (its config not given)")
    else:
        tokens, k, drafter = 1.0, 0.0, None
    prompt, output = lat.prompt_tokens / lat.num_ok, lat.output_tokens / lat.num_ok
    return Observation(run=run, config_id=planned.id, point_id=point.point_id, repeat=point.repeat,
                       drafter=drafter, k=k, batch=batch, tokens_per_step=tokens,
                       kv_tokens=batch * (prompt + output / 2), prefill_tokens=prefill_per_step(batch, tokens,
                                                                                                 prompt, output),
                       step_s=tpot * tokens)


def prefill_per_step(batch: float, tokens_per_step: float, prompt: float, output: float) -> float:
    """Prompt tokens the other requests of a full closed loop prefill per engine step: each step finishes
    batch x tokens / output requests, each replaced by one that prefills its prompt."""
    return max(0.0, batch - 1.0) * tokens_per_step * prompt / output if output > 0 else 0.0
