"""The step-cost model: one engine step's time from what the step holds, fitted on measured points.

    step = fixed + per_sequence B + per_token B (1 + K) + per_kv_token KV + per_prefill_token P
           + per_draft K + per_draft_token K B                  (the drafter's own two terms)

B: running requests; K: tokens drafted per request and step; KV: tokens the batch holds; P: other requests'
prompt tokens prefilled in the step. The form is SpecDecode-Bench's c_fixed + c_token tokens + c_kv KV (arXiv
2601.11580), with a per-sequence term and a drafter that runs K sequential passes over the batch. Other forms
(schemas.planner.StepForm) pay the drafter per speculative step instead, or bend the step with B (a cap, a knee);
predict/forms.py chooses among them by held-out error.

The fit is non-negative least squares on relative error (a 1 ms miss matters at 5 ms, not at 50; no cost is
negative). Some terms cannot be told apart on one run: a single request mix makes KV proportional to B, and a
single drafter's K B term moves with the target's B (1 + K). A prediction whose terms leave the span of the
measured ones (another request mix, say) is refused, with the reason.

One request mix: where the measured points' KV per sequence differ by no more than chance sampling of one workload
does (ONE_MIX: which requests a point completed, how long each ran), KV is the batch times a constant, and the few
tokens by which the points differ carry no information about a KV cost, only noise; fitted on them, the span of the
measured terms turns on those few tokens (points that happened to hold the same KV leave a direction out), and
predictions at the workload's own mean were refused by chance. So the KV term is folded into the per-sequence one
(its column left out of the fit) and a prediction whose KV per sequence lies near the points' is made likewise
(`Fit.determined`); another mix is refused. A run of several mixes (input lengths, workloads) fits the KV term.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from specmeter.schemas.planner import TARGET_TERMS, Observation, StepForm

N_TARGET = len(TARGET_TERMS)
BATCH, KV = TARGET_TERMS.index("per_sequence"), TARGET_TERMS.index("per_kv_token")
SPAN_TOLERANCE = 1e-6  # relative distance from the measured span that is still inside it (rounding)
ONE_MIX = 0.2  # KV per sequence spread (max - min, relative to max) up to which the points are one request mix


PER_PASS = StepForm()  # the form a calibration file without one was fitted in


def _drafter_column(term: str, k: float, batch: float) -> float:
    return {"per_draft": k, "per_draft_token": k * batch, "per_step": 1.0, "per_step_sequence": batch}[term]


def features(drafters: Sequence[str], drafter: str | None, k: float, batch: float, kv_tokens: float,
             prefill_tokens: float, form: StepForm = PER_PASS) -> np.ndarray:
    """The term vector of one engine step (see the module docstring): the target's terms, the form's bends, then
    the form's terms for each drafter."""
    bends = len(form.bends)
    per = len(form.drafter_terms)
    x = np.zeros(N_TARGET + bends + per * len(drafters))
    x[:N_TARGET] = (1.0, batch, batch * (1.0 + k), kv_tokens, prefill_tokens)
    x[N_TARGET:N_TARGET + bends] = [*(min(batch, c) for c in form.caps), *(max(0.0, batch - n) for n in form.knees)]
    if drafter is not None and k > 0:
        i = N_TARGET + bends + per * drafters.index(drafter)
        x[i:i + per] = [_drafter_column(t, k, batch) for t in form.drafter_terms]
    return x


def term_names(form: StepForm, drafter_labels: Sequence[str]) -> list[str]:
    """The coefficient vector's terms, in features' order."""
    return [*TARGET_TERMS, *(f"per_sequence up to {c:g}" for c in form.caps),
            *(f"per_sequence beyond {n:g}" for n in form.knees),
            *(f"{label}: {t}" for label in drafter_labels for t in form.drafter_terms)]


def observation_features(drafters: Sequence[str], obs: Observation, form: StepForm = PER_PASS) -> np.ndarray:
    return features(drafters, obs.drafter, obs.k, obs.batch, obs.kv_tokens, obs.prefill_tokens, form)


def nnls(a: np.ndarray, b: np.ndarray, max_iter: int | None = None) -> np.ndarray:
    """Non-negative least squares, min |a x - b| with x >= 0 (Lawson and Hanson's active-set method)."""
    n = a.shape[1]
    x = np.zeros(n)
    passive = np.zeros(n, dtype=bool)
    tol = 1e-12 * max(1.0, float(np.abs(a).max(initial=0.0))) * max(a.shape)
    for _ in range(max_iter or 3 * n + 30):
        grad = a.T @ (b - a @ x)
        free = ~passive & (grad > tol)
        if not free.any():
            break
        passive[int(np.argmax(np.where(free, grad, -np.inf)))] = True
        while True:
            z = np.zeros(n)
            z[passive] = np.linalg.lstsq(a[:, passive], b, rcond=None)[0]
            if (z[passive] > 0).all():
                x = z
                break
            neg = passive & (z <= 0)
            alpha = float(np.min(x[neg] / (x[neg] - z[neg])))
            x = x + alpha * (z - x)
            passive &= x > tol
            x[~passive] = 0.0
    return x


@dataclass(frozen=True)
class Fit:
    """The fitted coefficients, (X' W X)^+ and the relative residual scale."""

    drafters: tuple[str, ...]
    form: StepForm
    coefficients: np.ndarray
    covariance: np.ndarray  # unscaled: times scale^2 it is the coefficients' covariance
    scale: float | None
    dof: int
    rank: int
    row_space: np.ndarray  # orthonormal basis of the span of the (weighted) observed term vectors
    kv_per_sequence: tuple[float, float]  # the least and most KV tokens per sequence a measured point held
    one_mix: bool  # the points are one request mix: the KV term is folded into the per-sequence one

    def _off_span(self, x: np.ndarray) -> np.ndarray:
        off: np.ndarray = x - self.row_space.T @ (self.row_space @ x)
        return off

    def estimable(self, x: np.ndarray) -> bool:
        """Whether the data determine x . beta: x lies in the span of the measured term vectors."""
        norm = float(np.linalg.norm(x))
        return norm == 0.0 or float(np.linalg.norm(self._off_span(x))) <= SPAN_TOLERANCE * norm

    def determined(self, x: np.ndarray) -> np.ndarray | None:
        """x as the fit reads it, where the data determine its step; None where they do not (another mix, say).

        One mix: x with its KV tokens folded into the per-sequence term, where its KV per sequence is no further
        from the points' than they are from each other. Several: x itself, where it lies in the measured span;
        else x with its KV tokens moved to the value the data determine, where that moves its KV per sequence by no
        more than the points' own differ (one mix of a run with others, sampled point by point)."""
        low, high = self.kv_per_sequence
        if self.one_mix:
            spread = high - low + SPAN_TOLERANCE * high  # the points' own spread, either side of them
            if x[BATCH] <= 0 or not low - spread <= x[KV] / x[BATCH] <= high + spread:
                return None
            folded = x.copy()
            folded[KV] = 0.0
            return folded if self.estimable(folded) else None
        if self.estimable(x):
            return x
        if x[BATCH] <= 0:
            return None
        off, along = self._off_span(x), np.zeros_like(x)
        along[KV] = 1.0
        off_kv = self._off_span(along)
        reach = float(off_kv @ off_kv)
        if reach <= 0.0:
            return None
        moved = x.copy()
        moved[KV] -= float(off @ off_kv) / reach
        if not self.estimable(moved) or abs(moved[KV] - x[KV]) / x[BATCH] > high - low:
            return None
        return moved

    def step(self, x: np.ndarray) -> float:
        return float(x @ self.coefficients)

    def features(self, drafter: str | None, k: float, batch: float, kv_tokens: float,
                 prefill_tokens: float) -> np.ndarray:
        return features(self.drafters, drafter, k, batch, kv_tokens, prefill_tokens, self.form)

    def drafter_costs(self, drafter: str) -> dict[str, float]:
        """The drafter's coefficients by term (the form's terms; those it lacks are not there)."""
        per = len(self.form.drafter_terms)
        start = N_TARGET + len(self.form.bends) + per * self.drafters.index(drafter)
        return dict(zip(self.form.drafter_terms, (float(v) for v in self.coefficients[start:start + per])))

    def ratio_se(self, x_num: np.ndarray, x_den: np.ndarray) -> float | None:
        """Standard error of log(step(x_num) / step(x_den)): both from one fit, so their errors partly cancel;
        one point's scatter is added for the ratio measured anew."""
        if self.scale is None:
            return None
        a, b = self.step(x_num), self.step(x_den)
        if a <= 0 or b <= 0:
            return None
        g = x_num / a - x_den / b
        return self.scale * math.sqrt(max(0.0, float(g @ self.covariance @ g)) + 1.0)


def fit(observations: Sequence[Observation], drafters: Sequence[str], form: StepForm = PER_PASS) -> Fit:
    """Non-negative weighted least squares (weights 1 / step: relative error) over the observations marked used.

    Every term is a cost, so none may be negative: unconstrained, the terms one run cannot tell apart trade
    off against each other (a negative per-token cost paid back by a positive per-draft one), fit the measured
    points exactly and extrapolate wildly. Intervals come from the terms the fit kept (those above zero)."""
    used = [o for o in observations if o.used]
    if not used:
        raise ValueError("no measured point to calibrate on")
    x = np.array([observation_features(drafters, o, form) for o in used])
    per_sequence = [o.kv_tokens / o.batch for o in used if o.batch > 0]
    low, high = (min(per_sequence), max(per_sequence)) if per_sequence else (0.0, 0.0)
    one_mix = high - low <= ONE_MIX * high
    if one_mix:
        x[:, KV] = 0.0
    y = np.array([o.step_s for o in used])
    w = 1.0 / y
    xw, yw = x * w[:, None], y * w
    # Scale columns so terms in seconds per token and per sequence weigh alike in the solver and the rank.
    norms = np.linalg.norm(xw, axis=0)
    norms[norms == 0] = 1.0
    xs = xw / norms
    beta = nnls(xs, yw) / norms
    active = beta > 0
    sub = xs[:, active]
    rank = int(np.linalg.matrix_rank(sub)) if active.any() else 0
    cov = np.zeros((len(beta), len(beta)))
    if active.any():
        scaled = np.linalg.pinv(sub.T @ sub)
        cov[np.ix_(active, active)] = scaled / np.outer(norms[active], norms[active])
    resid = yw - xw @ beta
    dof = len(used) - rank
    scale = math.sqrt(float(resid @ resid) / dof) if dof > 0 else None
    # The span of the measured term vectors (all terms): what the data determine without the constraint.
    _, sv, vt = np.linalg.svd(xs, full_matrices=False)
    full_rank = int((sv > sv.max() * max(xs.shape) * 1e-9).sum()) if sv.size else 0
    q, _ = np.linalg.qr((vt[:full_rank] * norms).T)
    return Fit(drafters=tuple(drafters), form=form, coefficients=beta, covariance=cov, scale=scale, dof=dof, rank=rank,
               row_space=q[:, :full_rank].T, kv_per_sequence=(low, high), one_mix=one_mix)
