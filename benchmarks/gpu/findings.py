"""What the GPU check shows, read from its own outputs (the sweep's summary.json and nvidia-smi's readings): the
five findings the check exists for, as one JSON document and as Markdown.

1. offload: every layer of both models on the GPU, as each server logged it (the run's gpu_offload);
2. capacity: the interleaved servers' KV capacities side by side with the placement rule's memory split and the
   memory nvidia-smi saw each server's process take;
3. synthetic: the acceptance measured back against the set rates, within sampling error;
4. speedup: the curve over concurrency per configuration, and where speculation stops paying (the crossover);
5. planner: the step-cost model calibrated on the baseline and K = 2 only (K = 4 left out), its predictions at
   every measured load of K = 4 against the measurement; and whether one more term describes the measurements
   better than the linear form: a knee where the step's tokens stop being free (the GPU's memory-bound regime
   ending), or a cap where the step stops growing with more sequences.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from planner_accuracy import blind  # benchmarks/ is on the path: check.sh puts it there

from specmeter.predict.calibration import calibrate
from specmeter.predict.observations import Mix, prefill_per_step, request_mix
from specmeter.predict.stepcost import N_TARGET, features, nnls
from specmeter.schemas.planner import Calibration, Observation
from specmeter.schemas.results import RunSummary

GIB = 1 << 30


def _concurrency(summary: RunSummary, point_id: str) -> int | None:
    point = summary.plan.load.point(point_id)
    return None if point is None else point.slots


def _launched(summary: RunSummary) -> list[str]:
    return [c.id for c in summary.plan.configs if c.engine.launch]


def offload(summary: RunSummary) -> dict[str, Any]:
    """Per server: the GPUs it could use and the layers of each model it placed there."""
    rows = []
    for cid in _launched(summary):
        res = summary.config(cid)
        off = None if res is None else res.gpu_offload
        row: dict[str, Any] = {"config": cid, "devices": [] if off is None else off.devices}
        for side in ("target", "draft"):
            layers = None if off is None else getattr(off, side)
            row[side] = None if layers is None else {"offloaded": layers.offloaded, "layers": layers.layers}
        row["full"] = (None if off is None or not off.devices else
                       off.target is not None and off.target.full and (off.draft is None or off.draft.full))
        rows.append(row)
    on_gpu = [r for r in rows if r["devices"]]
    ok = None if not on_gpu else len(on_gpu) == len(rows) and all(r["full"] for r in rows)
    return {"rows": rows, "ok": ok, "notes": list(summary.analysis.offload)}


def capacity(summary: RunSummary, kv_bytes_per_token: int, peak_mib_by_pid: dict[int, float]) -> dict[str, Any]:
    """Per server: the placement's memory share, its weights, the KV tokens its engine reported (and what they take
    in the target's dtype), and the most GPU memory nvidia-smi saw its process hold."""
    placement = summary.plan.placement
    gpu_mib = {g.id: g.memory_mib for g in placement.gpus} if placement else {}
    rows = []
    for cid in _launched(summary):
        res = summary.config(cid)
        where = placement.server(cid) if placement else None
        fraction = where.memory_fraction if where else None
        share = None
        if where and fraction is not None and where.gpus and gpu_mib.get(where.gpus[0]):
            share = fraction * (gpu_mib[where.gpus[0]] or 0) / 1024
        tokens = None if res is None else res.kv_capacity_tokens
        pid = None if res is None else res.server_pid
        rows.append({"config": cid, "gpus": where.gpus if where else [], "memory_fraction": fraction,
                     "share_gib": share, "weights_gib": where.weights_gib if where else None, "kv_tokens": tokens,
                     "kv_gib": None if tokens is None else tokens * kv_bytes_per_token / GIB,
                     "gpu_memory_peak_gib": (peak_mib_by_pid[pid] / 1024 if pid in peak_mib_by_pid else None)})
    tokens = {r["kv_tokens"] for r in rows}
    return {"mode": placement.mode if placement else "cpu", "servers_per_gpu": placement.servers_per_gpu
            if placement else 1, "warning": placement.warning if placement else None, "rows": rows,
            "equal": len(tokens) == 1 and None not in tokens,
            "gaps": [g.model_dump(mode="json") for g in summary.analysis.capacity]}


def synthetic(summary: RunSummary) -> dict[str, Any]:
    """Per synthetic configuration and point: AL as set, as expected from the steps drafted, as measured, and the
    largest deviation in standard errors over the positions and AL."""
    rows = []
    for planned in summary.plan.configs:
        res = summary.config(planned.id)
        if res is None or planned.spec.synthetic_acceptance is None:
            continue
        for p in res.points:
            check = p.sd.synthetic
            if check is None:
                rows.append({"config": planned.id, "point": p.point_id, "within": None, "note": "no check"})
                continue
            zs = [abs(z) for z in [check.al_z, *(pos.z for pos in check.positions)] if z is not None]
            rows.append({"config": planned.id, "point": p.point_id, "concurrency": _concurrency(summary, p.point_id),
                         "steps": check.steps, "set_al": check.set_al, "expected_al": check.expected_al,
                         "measured_al": check.measured_al, "max_abs_z": max(zs, default=None),
                         "z_limit": check.z_limit, "within": check.within,
                         "measured_rates": [pos.measured for pos in check.positions],
                         "expected_rates": [pos.expected for pos in check.positions]})
    judged = [r["within"] for r in rows if r["within"] is not None]
    return {"rows": rows, "within": sum(judged), "judged": len(judged), "ok": bool(judged) and all(judged)}


def speedup(summary: RunSummary) -> dict[str, Any]:
    """Per configuration: throughput and TPOT speedup over the baseline at each concurrency, and its crossover."""
    curves: dict[str, list[dict[str, Any]]] = {}
    for s in summary.analysis.speedups:
        curves.setdefault(s.config_id, []).append({
            "point": s.point_id, "concurrency": _concurrency(summary, s.point_id),
            "throughput": s.output_throughput.value, "throughput_low": s.output_throughput.ci95_low,
            "throughput_high": s.output_throughput.ci95_high, "tpot": s.tpot.value, "verdict": s.verdict})
    for rows in curves.values():
        rows.sort(key=lambda r: r["concurrency"] or 0)
    crossovers = {c.config_id: {"status": c.status, "load": c.load, "low": c.low, "high": c.high, "note": c.note}
                  for c in summary.analysis.crossovers}
    return {"curves": curves, "crossovers": crossovers}


@dataclass(frozen=True)
class Term:
    """One term beyond the linear step cost, at a threshold `at`:
    - knee: a per-token cost beyond `at` tokens per step (convex: the GPU's memory-bound regime ending);
    - cap: a per-sequence cost up to `at` running sequences and none beyond (concave: steps that grow steeply with
      the first sequences, then flatten, as per-sequence work that does not grow with the batch past a point)."""

    shape: Literal["knee", "cap", "draft_step"]
    at: float

    def value(self, batch: float, k: float) -> float:
        if self.shape == "draft_step":
            return 1.0 if k > 0 else 0.0
        return max(0.0, batch * (1.0 + k) - self.at) if self.shape == "knee" else min(batch, self.at)

    def describe(self) -> str:
        if self.shape == "knee":
            return f"a per-token cost rising beyond {self.at:g} tokens per step"
        if self.shape == "draft_step":
            return "a fixed cost per speculative step, whatever K"
        return f"a per-sequence cost up to {self.at:g} running sequences, none beyond (steps flatten past it)"


# Where a knee may sit (tokens one engine step verifies: running requests x (1 + K)), and where a cap (requests).
KNEES = (16, 32, 64, 96, 128, 192, 256, 384, 512)
CAPS = (2, 4, 8, 12, 16, 24, 32, 48)
TERMS = tuple(Term("knee", n) for n in KNEES) + tuple(Term("cap", n) for n in CAPS)
# The drafting's cost split: the step model charges drafting per draft pass (K a step) and per drafted token of each
# sequence (K x batch); a speculative step may also cost the same whatever K (the draft's own step overheads).
# Calibrated on one K a pass and a step are the same column, so only a fit over two Ks or more (in_sample) can tell
# them apart; a one-K calibration can only choose, and term_refit tries charging the step instead of the pass.
DRAFT_STEP = Term("draft_step", 0)


def _row(drafters: Sequence[str], drafter: str | None, k: float, batch: float, kv_tokens: float,
         prefill_tokens: float, terms: Sequence[Term], passes: bool) -> np.ndarray:
    """One step's columns: the step model's (stepcost.features), without its per-pass columns where `passes` is
    False, then `terms`."""
    x = features(drafters, drafter, k, batch, kv_tokens, prefill_tokens)
    if not passes:
        x[N_TARGET::2] = 0.0  # each drafter's two slots: K (per pass), then K x batch
    return np.append(x, [t.value(batch, k) for t in terms])


def fit_step_cost(obs: Sequence[Observation], drafters: Sequence[str], terms: Sequence[Term] = (),
                  passes: bool = True) -> tuple[np.ndarray, float]:
    """Non-negative least squares on relative error, as the step-cost model fits (stepcost.fit), optionally with
    more terms (and without the per-pass cost): the coefficients and the relative residuals' standard deviation."""
    x = np.array([_row(drafters, o.drafter, o.k, o.batch, o.kv_tokens, o.prefill_tokens, terms, passes)
                  for o in obs])
    y = np.array([o.step_s for o in obs])
    xw, yw = x / y[:, None], np.ones_like(y)
    norms = np.linalg.norm(xw, axis=0)
    norms[norms == 0] = 1.0
    beta = nnls(xw / norms, yw) / norms
    resid = yw - xw @ beta
    return beta, float(np.sqrt(np.mean(resid**2)))


def _step(beta: np.ndarray, drafters: Sequence[str], mix: Mix, terms: Sequence[Term], drafter: str | None, k: float,
          batch: float, tokens: float, passes: bool = True) -> float:
    ctx = mix.prompt_tokens + mix.output_tokens / 2
    x = _row(drafters, drafter, k, batch, batch * ctx,
             prefill_per_step(batch, tokens, mix.prompt_tokens, mix.output_tokens), terms, passes)
    return float(x @ beta)


def _predict(rows: list[dict[str, Any]], key: str, beta: np.ndarray, drafters: Sequence[str], mix: Mix,
             terms: Sequence[Term], drafter: str, passes: bool = True) -> None:
    """Rows gain 'predicted_KEY' and 'error_KEY': the TPOT speedup the fit predicts (AL x the baseline's step over
    the speculative step), against the measured one."""
    for r in rows:
        if r["al"] is None:
            continue
        on = _step(beta, drafters, mix, terms, drafter, r["k"], r["batch"], r["al"], passes)
        off = _step(beta, drafters, mix, terms, None, 0.0, r["base_batch"], 1.0, passes)
        if on > 0 and off > 0:
            r[f"predicted_{key}"] = r["al"] * off / on
            r[f"error_{key}"] = (r[f"predicted_{key}"] - r["measured"]) / r["measured"]


def _errors(rows: Sequence[dict[str, Any]], key: str) -> dict[str, float | None]:
    errors = [abs(r[key]) for r in rows if r.get(key) is not None]
    return {"median_abs_error": statistics.median(errors) if errors else None,
            "worst_abs_error": max(errors) if errors else None}


def best_term(obs: Sequence[Observation], drafters: Sequence[str],
              terms: Sequence[Term] = TERMS) -> tuple[float, float, Term, np.ndarray]:
    """The linear fit's residual sd, then the best of `terms`: its residual sd, the term and its coefficients."""
    _, linear_sd = fit_step_cost(obs, drafters)
    tried = [(*fit_step_cost(obs, drafters, [term]), term) for term in terms]
    beta, sd, term = min(tried, key=lambda t: t[1])
    return linear_sd, sd, term, beta


def term_refit(cal: Calibration, rows: list[dict[str, Any]], mix: Mix, drafter: str,
               terms: Sequence[Term] = TERMS) -> dict[str, Any]:
    """The linear step cost against the same fit with the one more term of `terms` that fits the calibration's
    points best, which then predicts the left-out points again (rows gain 'predicted_term' and 'error_term'). A term
    that fits them no better than the linear form (or costs nothing) says the linear form held where the calibration
    looked. One term in `terms` holds its shape and threshold fixed (another run's choice) and refits its cost."""
    used = [o for o in cal.observations if o.used]
    drafters = [d.drafter for d in cal.drafters]
    linear_sd, term_sd, term, beta = best_term(used, drafters, terms)
    helps = beta[-1] > 0 and term_sd < linear_sd * 0.95
    if helps:
        _predict(rows, "term", beta, drafters, mix, [term], drafter)
    # The same calibration charging the drafting per speculative step instead of per pass (the only other split one
    # K allows): rows gain 'predicted_step' and 'error_step'.
    step_terms = [term, DRAFT_STEP] if helps else [DRAFT_STEP]
    step_beta, step_sd = fit_step_cost(used, drafters, step_terms, passes=False)
    _predict(rows, "step", step_beta, drafters, mix, step_terms, drafter, passes=False)
    return {"linear_residual_sd": linear_sd, "term": term.describe() if helps else None,
            "shape": term.shape if helps else None, "at": term.at if helps else None,
            "residual_sd": term_sd if helps else None, "coefficient_s": float(beta[-1]) if helps else None,
            **_errors(rows, "error_term"),
            "step": {"residual_sd": step_sd, "per_step_s": float(step_beta[-1]), **_errors(rows, "error_step")}}


def in_sample(summary: RunSummary, run: str) -> dict[str, Any]:
    """Every measured point (K = 4 included) fitted at once, linear and with the best of each shape of term: the
    shape the GPU's steps have, wherever the calibration looked; and the linear fit's residual at each point."""
    cal = calibrate([(run, summary)])
    used, drafters = [o for o in cal.observations if o.used], [d.drafter for d in cal.drafters]
    best: dict[str, dict[str, float]] = {}
    terms: dict[str, Term] = {}
    for shape in ("knee", "cap"):
        linear_sd, sd, terms[shape], _ = best_term(used, drafters, [t for t in TERMS if t.shape == shape])
        best[shape] = {"at": terms[shape].at, "residual_sd": sd}
    by_tokens = sorted(({"config": o.config_id, "point": o.point_id,
                         "tokens_per_step": round(o.batch * (1 + o.k), 1), "residual": o.residual}
                        for o in cal.observations if o.residual is not None), key=lambda r: r["tokens_per_step"])
    return {"linear_residual_sd": linear_sd, "best": best, "residuals_by_tokens": by_tokens,
            "drafting": drafting_split(used, drafters, terms["cap"])}


def drafting_split(obs: Sequence[Observation], drafters: Sequence[str], cap: Term) -> dict[str, Any] | None:
    """The first drafter's cost, fitted with the best cap: as the step model charges it (per draft pass, K of them a
    step, and per drafted token of each running sequence), then with a cost fixed per speculative step beside them.
    Needs two Ks or more among the observations (one K cannot tell a pass from a step): None otherwise."""
    # k is the drafted tokens per step, a little under the K set (fewer near a request's end): count the Ks set.
    if not drafters or len({round(o.k) for o in obs if o.drafter == drafters[0] and o.k > 0}) < 2:
        return None
    slot = N_TARGET  # the first drafter's columns (stepcost.features): K, then K x batch
    passes, sd = fit_step_cost(obs, drafters, [cap])
    split, split_sd = fit_step_cost(obs, drafters, [cap, DRAFT_STEP])
    return {"with": cap.describe(), "drafter": drafters[0], "residual_sd": sd, "split_residual_sd": split_sd,
            "per_pass_only_s": float(passes[slot]), "per_token_only_s": float(passes[slot + 1]),
            "per_pass_s": float(split[slot]), "per_token_s": float(split[slot + 1]), "per_step_s": float(split[-1])}


def planner(summary: RunSummary, run_dir: Path, left_out_k: int, terms: Sequence[Term] = TERMS) -> dict[str, Any]:
    """The step-cost model calibrated with K = `left_out_k` left out, its blind predictions of that K at every
    measured load, and the knee diagnosis (the best of `terms`)."""
    calibrated_on = {c.id for c in summary.plan.configs if c.spec.enabled and c.k != left_out_k}
    loads = {p.id for p in summary.plan.points}
    cal, rows = blind(summary, run_dir, calibrated_on, loads, f"baseline + every K but {left_out_k}")
    rows = [r for r in rows if r["k"] == left_out_k]
    for r in rows:
        r["concurrency"] = _concurrency(summary, r["point"])
    mix = request_mix(summary)
    assert mix is not None, "a check with no completed request"
    drafter = next(d.drafter for d in cal.drafters)
    term = term_refit(cal, rows, mix, drafter, terms)
    covered = [r["covered"] for r in rows if r["covered"] is not None]
    return {"left_out_k": left_out_k, "calibrated_on": sorted(calibrated_on), "rows": rows,
            "residual_scale": cal.residual_scale, "covered": sum(covered), "with_interval": len(covered),
            **_errors(rows, "error"), "term": term, "in_sample": in_sample(summary, str(run_dir)),
            "notes": cal.notes}


def all_findings(summary: RunSummary, run_dir: Path, kv_bytes_per_token: int, peak_mib_by_pid: dict[int, float],
                 left_out_k: int) -> dict[str, Any]:
    return {"offload": offload(summary), "capacity": capacity(summary, kv_bytes_per_token, peak_mib_by_pid),
            "synthetic": synthetic(summary), "speedup": speedup(summary),
            "planner": planner(summary, run_dir, left_out_k)}


def _x(v: float | None, digits: int = 2) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{digits}f}x"


def _n(v: float | None, fmt: str = ".2f") -> str:
    return "-" if v is None else format(v, fmt)


def _calls(n: int | None) -> str:
    return "" if not n or n == 1 else f" in {n} calls (resumed where the time limit stopped it)"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v * 100:+.1f}%"


def _layers(side: dict[str, int] | None) -> str:
    return "-" if side is None else f"{side['offloaded']}/{side['layers']}"


def markdown(doc: dict[str, Any]) -> str:
    """The summary as Markdown: the setup, then each finding with its table."""
    f = doc["findings"]
    head = doc["setup"]
    lines = [f"# GPU check: {head['device']}", "",
             f"- engine: {head['engine']} ({head['backend']}; " + (
                 "built before this run)" if head.get("build_s") is None else f"built in {head['build_s']:.0f} s)"),
             f"- target: {head['target']}", f"- draft: {head['draft']}",
             f"- sweep: {head['sweep']}", f"- wall time: pair {_n(head['pair_s'], '.0f')} s, sweep "
             f"{_n(head['sweep_s'], '.0f')} s{_calls(head.get('sweep_calls'))}, findings "
             f"{_n(head.get('findings_s'), '.0f')} s", ""]
    if doc.get("gpus"):
        lines += ["| GPU | memory | peak used | peak power | SM clock | mean load | readings |",
                  "|---|---|---|---|---|---|---|"]
        for g in doc["gpus"]:
            clocks = g["sm_clock_mhz"]
            lines.append(f"| {g['index']}: {g['name']} | {_n(g['memory_total_mib'], '.0f')} MiB | "
                         f"{_n(g['memory_used_peak_mib'], '.0f')} MiB | {_n(g['power_peak_w'], '.0f')} W | "
                         f"{_n(clocks[0], '.0f')}-{_n(clocks[1], '.0f')} MHz | "
                         f"{_n(g['utilization_mean_pct'], '.0f')}% | {g['readings']} |")
        lines.append("")

    off = f["offload"]
    verdict = {True: "every layer of both models on the GPU", False: "NOT every layer on the GPU",
               None: "no GPU: every layer ran on the CPU (a CPU build)"}[off["ok"]]
    lines += ["## 1. Offload", "", f"{verdict}.", "", "| server | devices | target layers | draft layers |",
              "|---|---|---|---|"]
    for r in off["rows"]:
        t, d = (_layers(r[side]) for side in ("target", "draft"))
        lines.append(f"| {r['config']} | {', '.join(r['devices']) or 'none'} | {t} | {d} |")
    lines += [f"- {n}" for n in off["notes"]] + [""]

    cap = f["capacity"]
    lines += ["## 2. KV capacity and the memory split", "",
              f"Placement: {cap['mode']}, {cap['servers_per_gpu']} server(s) per GPU; KV capacities "
              f"{'equal' if cap['equal'] else 'DIFFER'} across the servers." + (f" {cap['warning']}" if cap["warning"]
                                                                                 else ""), "",
              "| server | memory fraction (share) | weights | KV tokens (target KV) | GPU memory seen |",
              "|---|---|---|---|---|"]
    for r in cap["rows"]:
        share = "-" if r["memory_fraction"] is None else (
            f"{r['memory_fraction']:.2f}" + ("" if r["share_gib"] is None else f" ({r['share_gib']:.1f} GiB)"))
        lines.append(f"| {r['config']} | {share} | {_n(r['weights_gib'])} GiB | {_n(r['kv_tokens'], 'd')} "
                     f"({_n(r['kv_gib'])} GiB) | {_n(r['gpu_memory_peak_gib'])} GiB |")
    lines += [f"- {g['note']}" for g in cap["gaps"]] + [""]

    syn = f["synthetic"]
    lines += ["## 3. Synthetic acceptance measured back", "",
              f"{syn['within']} of {syn['judged']} points within sampling error.", "",
              "| configuration | concurrency | steps | AL set | AL expected | AL measured | max abs z (limit) |",
              "|---|---|---|---|---|---|---|"]
    for r in syn["rows"]:
        if r.get("steps") is None:
            lines.append(f"| {r['config']} | {r['point']} | - | - | - | - | {r['note']} |")
            continue
        lines.append(f"| {r['config']} | {r['concurrency']} | {r['steps']} | {r['set_al']:.2f} | "
                     f"{r['expected_al']:.2f} | {r['measured_al']:.2f} | {_n(r['max_abs_z'])} "
                     f"({r['z_limit']:.2f}){'' if r['within'] else ' OUTSIDE'} |")
    lines.append("")

    sp = f["speedup"]
    loads = sorted({r["concurrency"] for rows in sp["curves"].values() for r in rows if r["concurrency"]})
    lines += ["## 4. Speedup over concurrency", "", "Output throughput over the baseline, same requests "
              "(95% paired interval).", "",
              "| configuration | " + " | ".join(f"c{c}" for c in loads) + " | crossover |",
              "|---|" + "---|" * (len(loads) + 1)]
    for cid, rows in sp["curves"].items():
        by = {r["concurrency"]: r for r in rows}
        cells = []
        for c in loads:
            r = by.get(c)
            cells.append("-" if r is None else f"{_x(r['throughput'])} [{_n(r['throughput_low'])}, "
                                                 f"{_n(r['throughput_high'])}]")
        cross = sp["crossovers"].get(cid)
        where = "-" if cross is None else (
            f"c{cross['load']:.1f} [{_n(cross['low'], '.0f')}, {_n(cross['high'], '.0f')}]"
            if cross["status"] == "crosses" else cross["status"].replace("_", " "))
        lines.append(f"| {cid} | " + " | ".join(cells) + f" | {where} |")
    lines.append("")

    pl = f["planner"]
    term, ins = pl["term"], pl["in_sample"]
    lines += [f"## 5. The planner, blind at K = {pl['left_out_k']}", "",
              f"Calibrated on {', '.join(pl['calibrated_on'])} and the baseline at every load (relative residual "
              f"sd {_n(pl['residual_scale'], '.3f')}); K = {pl['left_out_k']} predicted at every measured load "
              f"(TPOT speedup). Median |error| {_pct(pl['median_abs_error'])}, worst {_pct(pl['worst_abs_error'])}; "
              f"{pl['covered']} of {pl['with_interval']} inside the predicted interval.", "",
              "| configuration | concurrency | batch | measured | predicted [95%] | error | with the term | error "
              "| drafting per step | error |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in pl["rows"]:
        interval = "" if r["low"] is None else f" [{r['low']:.2f}, {r['high']:.2f}]"
        lines.append(f"| {r['config']} | {r['concurrency']} | {r['batch']} | {_x(r['measured'])} | "
                     f"{_x(r['predicted'])}{interval} | {_pct(r['error'])} | {_x(r.get('predicted_term'))} | "
                     f"{_pct(r.get('error_term'))} | {_x(r.get('predicted_step'))} | {_pct(r.get('error_step'))} |")
    lines.append("")
    lines += [f"No prediction for {r['config']} at concurrency {r['concurrency']}: {r['why']}." for r in pl["rows"]
              if r["predicted"] is None]
    if term["term"] is None:
        lines.append(f"The linear step cost fits the calibration's points (relative residual sd "
                     f"{term['linear_residual_sd']:.3f}) and no knee or cap term fits them better.")
    else:
        lines.append(f"One more term, {term['term']}, fits the calibration's points with residual sd "
                     f"{term['residual_sd']:.3f} against {term['linear_residual_sd']:.3f} linear; blind with it "
                     f"(the column 'with the term'): median |error| {_pct(term['median_abs_error'])}, worst "
                     f"{_pct(term['worst_abs_error'])}.")
    step = term.get("step")
    if step is not None:
        lines.append("")
        lines.append(f"Charged per speculative step instead of per draft pass ({step['per_step_s'] * 1e3:.2f} ms a "
                     f"step; one K cannot tell the two apart), {'with that term' if term['term'] else 'linear'} "
                     f"(the column 'drafting per step'): residual sd {step['residual_sd']:.3f}, blind median |error| "
                     f"{_pct(step['median_abs_error'])}, worst {_pct(step['worst_abs_error'])}.")
    knee, cap = ins["best"]["knee"], ins["best"]["cap"]
    lines += ["", f"Every point fitted at once (K = {pl['left_out_k']} included): linear residual sd "
              f"{ins['linear_residual_sd']:.3f}; with the best knee ({knee['at']:g} tokens per step) "
              f"{knee['residual_sd']:.3f}; with the best cap ({cap['at']:g} sequences) {cap['residual_sd']:.3f}."]
    split = ins.get("drafting")
    if split is not None:
        lines += ["", f"The drafting's cost, fitted with that cap, as the step model charges it: "
                  f"{split['per_pass_only_s'] * 1e3:.2f} ms per draft pass (K a step) and "
                  f"{split['per_token_only_s'] * 1e3:.2f} ms per drafted token of each sequence (residual sd "
                  f"{split['residual_sd']:.3f}); with a cost fixed per speculative step beside them (two Ks tell it "
                  f"from a pass, one K cannot): {split['per_step_s'] * 1e3:.2f} ms per step, "
                  f"{split['per_pass_s'] * 1e3:.2f} ms per pass and {split['per_token_s'] * 1e3:.2f} ms per drafted "
                  f"token (residual sd {split['split_residual_sd']:.3f})."]
    lines += [f"- {n}" for n in pl["notes"]]
    return "\n".join(lines) + "\n"
