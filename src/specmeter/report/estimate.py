"""The roofline estimate as a person reads it: what it assumed, the memory it leaves, the speedup per batch
and K, and the best K per batch in detail. Every table's title says it is an estimate, not a measurement."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console, Group
from rich.text import Text

from specmeter.report.console import to_rich
from specmeter.report.grid import Grid, fmt, grid
from specmeter.schemas.estimate import TITLE, Estimate, EstimateRow, ModelShape

GIB = 2.0**30


def ms(seconds: float) -> str:
    return fmt(seconds, "{:.2f}", 1000.0)


def _gib(value: float) -> str:
    return f"{value / GIB:.2f} GiB"


def _params(n: int) -> str:
    return f"{n / 1e9:.2f}B" if n >= 1e9 else f"{n / 1e6:.1f}M"


def _model(shape: ModelShape) -> str:
    moe = f", {shape.experts_per_token} of {shape.experts} experts ({_params(shape.active_params)} active)" \
        if shape.experts else ""
    layers = f"{shape.layers} layer" + ("s" if shape.layers > 1 else "")
    return (f"{Path(shape.source).parent.name or shape.source} ({shape.role}): {_params(shape.params)} parameters"
            f"{moe}, {layers}, hidden {shape.hidden}, {shape.heads} heads / {shape.kv_heads} KV x {shape.head_dim}, "
            f"vocab {shape.vocab}")


def heading(est: Estimate) -> str:
    i = est.inputs
    draft = "n-gram" if i.draft is None else f"{i.method} {Path(i.draft.source).parent.name}"
    return (f"{TITLE.capitalize()}: {i.hardware.name} x {i.tp}, {Path(i.target.source).parent.name} + {draft}, "
            f"{i.dtype}, {i.input_len} in + {i.output_len} out tokens, acceptance {i.acceptance}")


def inputs_grid(est: Estimate) -> Grid:
    i, hw = est.inputs, est.inputs.hardware
    g = grid(f"Inputs ({TITLE})", ("input", "value"), left={"input", "value"})
    flops = ", ".join(f"{name} {v / 1e12:g} TFLOP/s" for name, v in (("BF16", hw.bf16_flops), ("FP8", hw.fp8_flops))
                      if v is not None)
    g.add_row("GPU", f"{hw.name}: {hw.memory_bandwidth / 1e12:g} TB/s, {flops} (dense), {_gib(hw.memory_bytes)}; "
                     f"{hw.source}")
    g.add_row("target", f"{_model(i.target)}; TP {i.tp}")
    g.add_row("draft", "none (n-gram lookup)" if i.draft is None else f"{_model(i.draft)}; TP {i.draft_tp}")
    g.add_row("precision", f"weights {i.dtype}, KV cache {i.kv_dtype}")
    g.add_row("sequences", f"{i.input_len} input + {i.output_len} output tokens; a decode step attends "
                           f"{i.context_tokens:g} on average")
    g.add_row("acceptance", f"{i.acceptance}: per position " + ", ".join(f"{a:.3f}" for a in i.acceptance_rates))
    e = i.efficiency
    g.add_row("efficiency", f"{e.memory:g} of bandwidth, {e.compute:g} of tensor throughput, "
                            f"{e.overhead_s * 1000:g} ms per forward pass")
    g.add_row("memory", f"{i.mem_fraction:g} of each GPU for the engine, {_gib(i.reserve_bytes)} of it kept for "
                        "activations and CUDA graphs")
    return g


def memory_grid(est: Estimate) -> Grid:
    m = est.memory
    g = grid(f"Memory per GPU ({TITLE})", ("", "with the draft", "without"), left={""})
    g.add_row("engine's share", _gib(m.budget_bytes), _gib(m.budget_bytes))
    g.add_row("target weights", _gib(m.target_weights_bytes), _gib(m.target_weights_bytes))
    g.add_row("draft weights", _gib(m.draft_weights_bytes), "-")
    g.add_row("reserve", _gib(m.reserve_bytes), _gib(m.reserve_bytes))
    g.add_row("KV bytes per token", f"{m.target_kv_bytes_per_token + m.draft_kv_bytes_per_token:,.0f}",
              f"{m.target_kv_bytes_per_token:,.0f}")
    g.add_row("KV capacity, tokens", f"{m.kv_capacity_tokens:,}", f"{m.kv_capacity_tokens_without_draft:,}")
    g.add_row(f"largest batch at {m.sequence_tokens} tokens", f"{m.max_batch:,}", f"{m.max_batch_without_draft:,}")
    return g


def _cell(row: EstimateRow) -> str:
    text = f"{row.speedup:.2f}x"
    if row.verify.bound == "compute":
        text += " *"
    return text if row.fits else f"({text})"


def speedup_grid(est: Estimate) -> Grid:
    ks = sorted({r.k for r in est.rows})
    best = {b.batch: b for b in est.best}
    g = grid(f"Speedup over speculation off, per batch and K ({TITLE})",
             ("batch", "off: TPOT ms", "off: tok/s", *[f"K={k}" for k in ks], "best K"))
    cells = {(r.batch, r.k): r for r in est.rows}
    for base in est.baseline:
        found = best.get(base.batch)
        g.add_row(str(base.batch) if base.fits else f"({base.batch})", ms(base.tpot_s), f"{base.throughput:,.0f}",
                  *[_cell(cells[(base.batch, k)]) for k in ks], "-" if found is None else str(found.k))
    return g


def _speedup(r: EstimateRow) -> str:
    """The speedup, with the range the acceptance profile's AL interval gives where it has one."""
    if r.speedup_high - r.speedup_low < 0.005:
        return f"{r.speedup:.2f}x"
    return f"{r.speedup:.2f}x [{r.speedup_low:.2f}, {r.speedup_high:.2f}]"


def best_grid(est: Estimate) -> Grid:
    g = grid(f"The best K per batch in detail ({TITLE})",
             ("batch", "K", "AL", "verify ms", "draft ms (K passes)", "c", "TPOT ms", "tok/s", "speedup"))
    rows = {(r.batch, r.k): r for r in est.rows}
    for b in est.best:
        r = rows.get((b.batch, b.k))
        if r is None:
            base = next(x for x in est.baseline if x.batch == b.batch)
            g.add_row(str(b.batch), "off", "1.00", f"{ms(base.step.seconds)} ({base.step.bound})", "-", "-",
                      ms(base.tpot_s), f"{base.throughput:,.0f}", "1.00x")
            continue
        g.add_row(str(r.batch), str(r.k), f"{r.al:.2f}", f"{ms(r.verify.seconds)} ({r.verify.bound})",
                  ms(r.draft_s), f"{r.cost_ratio:.3f}", ms(r.tpot_s), f"{r.throughput:,.0f}",
                  _speedup(r))
    return g


def render_estimate(est: Estimate, console: Console) -> None:
    ridge = est.ridge[0].tokens
    console.print(Text(heading(est), style="bold"), soft_wrap=True)
    grids = [inputs_grid(est), memory_grid(est), speedup_grid(est)] + ([best_grid(est)] if est.best else [])
    for g in grids:
        table = to_rich(g)
        table.title = None  # a narrow table would wrap its title: print it whole above the table instead
        console.print(Group(Text(g.title, style="italic"), table), soft_wrap=True)
    lines = [f"* the target's verify step is compute-bound there; (x): the batch does not fit in the KV capacity. "
             f"Weight streaming stops dominating the target's step at about {ridge:.0f} tokens per step "
             f"(batch x (K+1)), the ridge point at these efficiencies."]
    lines += est.notes
    for line in lines:
        console.print(Text("• " + line, style="dim"), soft_wrap=True)
    console.print(Text("Not modelled: " + "; ".join(est.not_modelled) + ".", style="yellow"), soft_wrap=True)
