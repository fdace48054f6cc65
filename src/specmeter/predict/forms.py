"""The step-cost form a calibration is fitted in, chosen among candidates by its own held-out error.

No one form holds everywhere: on vLLM's CPU build the drafter costs per draft pass and the step grows linearly
with the running sequences; on a GPU with llama-server a speculative step costs about the same whatever K, and
steps grow steeply over the first sequences, then flatten. So every candidate is cross-validated inside the
calibration: with two Ks or more, each K's speculative points are held out in turn (leave one K out: what
predicting an unmeasured K asks of the form); with one, each load point (leave one load out). The form with the
least held-out error is chosen; the forms it cannot tell from that one (one K cannot separate a cost per pass from
one per step) stay beside it as tied, and predictions span them all.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from specmeter.predict.stepcost import Fit, fit, observation_features
from specmeter.schemas.planner import DrafterTerm, FormChoice, FormScore, Observation, Scheme, StepForm

PASS: tuple[DrafterTerm, ...] = ("per_draft", "per_draft_token")
STEP: tuple[DrafterTerm, ...] = ("per_step", "per_step_sequence")
# How a drafter may be paid: per pass (vLLM's CPU build), per step (llama-server on a GPU), per step and drafted
# token, all four, or per pass and step.
PAID: tuple[tuple[DrafterTerm, ...], ...] = (PASS, STEP, ("per_step", "per_draft_token"), (*PASS, *STEP),
                                             ("per_draft", "per_step", "per_draft_token"))
CAPS = ((), (4.0,), (8.0,), (16.0,), (32.0,), (8.0, 32.0))
KNEES = ((16.0,), (32.0,))
CANDIDATES: tuple[StepForm, ...] = (
    *(StepForm(drafter_terms=paid, caps=caps) for caps in CAPS for paid in PAID),
    *(StepForm(drafter_terms=paid, knees=knees) for knees in KNEES for paid in (PASS, STEP)),
)
TIE = 0.05  # held-out scores within this fraction of the best (plus half a percent) cannot be told apart
UNPREDICTED = 1.0  # a held-out step a form refuses counts as a 100% miss
COVER = 0.95  # the share of held-out errors the interval's floor holds


@dataclass(frozen=True)
class Choice:
    """The chosen form's fit, the fits of the forms tied with it, and the record calibration.json keeps."""

    fit: Fit
    tied: tuple[Fit, ...]
    record: FormChoice | None


def _groups(used: Sequence[Observation]) -> tuple[Scheme, list[str], Callable[[Observation], str]]:
    """The scheme and its groups: the speculative points' Ks where there are two or more, else the load points."""
    ks = sorted({round(o.k) for o in used if o.drafter is not None})
    if len(ks) >= 2:
        return "leave one K out", [f"K={k}" for k in ks], lambda o: f"K={round(o.k)}" if o.drafter else ""
    points = sorted({o.point_id for o in used})
    return "leave one load out", points, lambda o: o.point_id


def _held_out(used: Sequence[Observation], drafters: Sequence[str], form: StepForm,
              group_of: Callable[[Observation], str], groups: Sequence[str]) -> list[tuple[Observation, float | None]]:
    """Each held-out speculative step with the relative error of its ratio to the baseline's step at the same point
    and repeat, both predicted from a fit on the other groups (None: refused). The ratio is what a speedup reads,
    and pairing cancels what a point shared with its baseline (the machine's load then), as the paired speedups
    do; a step without a paired baseline, and the baseline's own steps where no step speculated, are scored
    alone."""
    base = {(o.run, o.point_id, o.repeat): o for o in used if o.drafter is None}
    speculative = any(o.drafter is not None for o in used)
    out: list[tuple[Observation, float | None]] = []
    for g in groups:
        rest = [o for o in used if group_of(o) != g]
        held = [o for o in used if group_of(o) == g and (o.drafter is not None or not speculative)]
        if not rest or not held:
            continue
        model = fit(rest, drafters, form)
        seen = {r.drafter for r in rest}
        for o in held:
            step = _predicted(model, drafters, form, o) if o.drafter in seen else None
            pair = base.get((o.run, o.point_id, o.repeat)) if o.drafter is not None else None
            if step is not None and pair is not None:
                off = _predicted(model, drafters, form, pair)
                step = None if off is None else step / off * pair.step_s
            out.append((o, None if step is None else step / o.step_s - 1.0))
    return out


def _predicted(model: Fit, drafters: Sequence[str], form: StepForm, obs: Observation) -> float | None:
    x = model.determined(observation_features(drafters, obs, form))
    step = model.step(x) if x is not None else 0.0
    return step if step > 0 and math.isfinite(step) else None


def _score(form: StepForm, held: Sequence[tuple[Observation, float | None]]) -> FormScore:
    got = [abs(e) for _, e in held if e is not None]
    score = (sum(got) + UNPREDICTED * (len(held) - len(got))) / len(held) if held else math.inf
    return FormScore(form=form, name=form.name, error=statistics.median(got) if got else None,
                     worst=max(got) if got else None, score=score, predicted=len(got), held_out=len(held))


def _half_width(held: Sequence[tuple[Observation, float | None]]) -> float | None:
    """The COVER quantile of |log(predicted / measured)| over the held-out steps: what a prediction's interval
    holds at least."""
    logs = sorted(abs(math.log1p(e)) for _, e in held if e is not None and e > -1.0)
    if not logs:
        return None
    return logs[min(len(logs) - 1, math.ceil(COVER * len(logs)) - 1)]


def _spread(fits: Sequence[Fit], used: Sequence[Observation]) -> tuple[float | None, str | None]:
    """How far the tied fits' steps differ at most, over K = 1 to twice the largest measured, at each measured
    speculative point's drafter, batch and KV (among the fits that can say the step there)."""
    if len(fits) < 2:
        return None, None
    spec = [o for o in used if o.drafter is not None]
    top = max((round(o.k) for o in spec), default=1)
    worst, where = 0.0, None
    for o in spec:
        for k in range(1, 2 * max(top, 1) + 1):
            steps = []
            for f in fits:
                x = f.determined(f.features(o.drafter, float(k), o.batch, o.kv_tokens, o.prefill_tokens))
                if x is not None and f.step(x) > 0:
                    steps.append(f.step(x))
            if len(steps) < 2:
                continue
            gap = max(steps) / min(steps) - 1.0
            if gap > worst:
                worst, where = gap, f"K = {k} at batch {o.batch:.1f}"
    return worst, where


def _within(candidates: Sequence[StepForm], used: Sequence[Observation]) -> list[StepForm]:
    """The candidates whose bends lie inside the measured batches: a cap or knee beyond them fits the points as the
    straight form does and says nothing but a guess past them (the first candidate is kept whatever it bends)."""
    batches = [o.batch for o in used]
    low, high = (min(batches), max(batches)) if batches else (0.0, 0.0)
    return [f for i, f in enumerate(candidates) if i == 0 or all(low < b < high for b in f.bends)]


def choose(observations: Sequence[Observation], drafters: Sequence[str],
           candidates: Sequence[StepForm] = CANDIDATES) -> Choice:
    """Cross-validate every candidate form on the observations marked used and fit the best (see the module
    docstring). Too few groups to hold one out (one load, no drafter): the first candidate, not chosen."""
    used = [o for o in observations if o.used]
    candidates = _within(candidates, used)
    scheme, groups, group_of = _groups(used)
    if len(groups) < 2 or not drafters:
        return Choice(fit=fit(observations, drafters, candidates[0]), tied=(), record=None)
    held = {f: _held_out(used, drafters, f, group_of, groups) for f in candidates}
    scores = sorted((_score(f, held[f]) for f in candidates), key=lambda s: (s.score, -s.predicted, s.form.size))
    if scores[0].predicted == 0:  # no fit on the rest could say a held-out step: nothing to choose by
        record = FormChoice(scheme=scheme, groups=groups, chosen=candidates[0].name, scores=scores,
                            decided=False)
        return Choice(fit=fit(observations, drafters, candidates[0]), tied=(), record=record)
    best = scores[0]
    close = [s for s in scores if s.predicted == best.predicted and s.score <= best.score * (1 + TIE) + 0.005]
    chosen = min(close, key=lambda s: (s.form.size, candidates.index(s.form)))
    tied_forms = [s.form for s in close if s is not chosen]
    model = fit(observations, drafters, chosen.form)
    tied = tuple(fit(observations, drafters, f) for f in tied_forms)
    spread, spread_at = _spread((model, *tied), used)
    record = FormChoice(scheme=scheme, groups=groups, chosen=chosen.name, scores=scores, tied=tied_forms,
                        spread=spread, spread_at=spread_at, half_width=_half_width(held[chosen.form]))
    return Choice(fit=model, tied=tied, record=record)
