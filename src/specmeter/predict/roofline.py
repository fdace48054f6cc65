"""The roofline estimate of speculative decoding, before any run: what one step costs from the bytes it reads and
the FLOPs it does, and what speculation then gains at each K and batch size.

One forward pass of `tokens` tokens over a batch of `batch` sequences, on one GPU of its tensor-parallel group:

    bytes = weights read / TP + batch x context x KV bytes per token (this GPU's heads)
    FLOPs = (2 x active parameters x tokens + 4 x layers x heads x head_dim x context x tokens) / TP
    time  = max(bytes / (bandwidth x memory eff.), FLOPs / (peak x compute eff.)) + fixed overhead

A dense model's weights are read whole every pass; an MoE layer's experts only where some token is routed:
with T tokens each picking k of E experts (uniformly), a fraction 1 - (1 - k/E)^T of them.

Speculation at K and batch B: the target verifies B x (K+1) tokens in one pass, the drafter runs K passes of B
tokens (n-gram: no model, no cost; an EAGLE-3 head's fc, which fuses the target's hidden states, in the first pass
alone), and each step emits AL(K) tokens per sequence, so

    step = verify + K x draft pass (+ the fc once),  TPOT = step / AL,  throughput = B x AL / step,
    speedup = AL x baseline step / step   (speculation off: one pass of B tokens emits one token each).

Where target and draft are both memory-bound and verifying K+1 tokens costs what one does (B = 1, short context)
this is Leviathan et al.'s (1 - a^(K+1)) / ((1 - a)(K c + 1)), with c = draft pass / target step.
"""

from __future__ import annotations

from collections.abc import Sequence

from specmeter.common.errors import InputError
from specmeter.predict.acceptance import AcceptanceProfile
from specmeter.predict.hardware import dtype_bytes, peak_flops
from specmeter.predict.kv_memory import kv_bytes_per_token, memory
from specmeter.schemas.estimate import (
    BaselineRow,
    BestK,
    Estimate,
    EstimateInputs,
    EstimateRow,
    MemoryEstimate,
    ModelShape,
    Ridge,
    Step,
)

NOT_MODELLED = (
    "prefill: only decode steps are costed (no prompt processing, no chunked prefill sharing a step)",
    "communication between the GPUs of a tensor-parallel group (an all-reduce per layer)",
    "rejection sampling, the drafter's pass over the tokens just accepted, and scheduling beyond the fixed "
    "overhead per pass",
    "sliding-window attention and prefix caching: every sequence attends its whole context",
    "acceptance that changes with batch, context length or temperature: AL is the profile's everywhere",
    "tree drafting: one chain of K tokens per step",
)


def expert_fraction(shape: ModelShape, tokens: float) -> float:
    """Expected fraction of an MoE layer's experts that `tokens` tokens, each routed to k of E, touch."""
    if not shape.experts:
        return 0.0
    untouched: float = (1.0 - shape.experts_per_token / shape.experts) ** tokens
    return 1.0 - untouched


def weights_read(shape: ModelShape, tokens: float, bytes_per_param: int, *, fused: bool = True) -> float:
    """Bytes of weights one pass of `tokens` tokens reads (whole model, before the TP split); `fused` False: a
    draft pass after the first, without the weights a step applies once (an EAGLE-3 head's fc)."""
    dense = shape.streamed_params - shape.expert_params - (0 if fused else shape.fused_params)
    return (dense + shape.expert_params * expert_fraction(shape, tokens)) * bytes_per_param


def step(inputs: EstimateInputs, shape: ModelShape, tp: int, batch: int, tokens: int, *,
         fused: bool = True) -> Step:
    """One forward pass of `shape` on one of its `tp` GPUs: `tokens` tokens over `batch` sequences (`fused`
    False: without the weights a speculation step applies once, before its first draft pass)."""
    hw, eff, ctx = inputs.hardware, inputs.efficiency, inputs.context_tokens
    kv = kv_bytes_per_token(shape, tp, dtype_bytes(inputs.kv_dtype))
    read = weights_read(shape, tokens, dtype_bytes(inputs.dtype), fused=fused) / tp + batch * ctx * kv
    attention = 4.0 * shape.layers * shape.heads * shape.head_dim * ctx * tokens
    active = shape.active_params - (0 if fused else shape.fused_params)
    flops = (2.0 * active * tokens + attention) / tp
    memory_s = read / (hw.memory_bandwidth * eff.memory)
    compute_s = flops / (peak_flops(hw, inputs.dtype) * eff.compute)
    return Step(tokens=tokens, bytes=read, flops=flops, memory_s=memory_s, compute_s=compute_s,
                seconds=max(memory_s, compute_s) + eff.overhead_s,
                bound="compute" if compute_s > memory_s else "memory")


def ridge_tokens(inputs: EstimateInputs) -> float:
    """Tokens per target pass where reading the weights and multiplying them take equal time (KV and attention
    left out). Dense: (peak x compute eff.) / (bandwidth x memory eff.) x bytes per parameter / 2, scaled by
    streamed / active parameters; MoE: solved numerically, since more tokens touch more experts."""
    shape, hw, eff = inputs.target, inputs.hardware, inputs.efficiency
    w = dtype_bytes(inputs.dtype)
    flop_rate = peak_flops(hw, inputs.dtype) * eff.compute
    byte_rate = hw.memory_bandwidth * eff.memory

    def compute_minus_memory(tokens: float) -> float:
        return 2.0 * shape.active_params * tokens / flop_rate - weights_read(shape, tokens, w) / byte_rate

    low, high = 0.0, 1.0
    while compute_minus_memory(high) < 0:
        low, high = high, high * 2.0
    for _ in range(200):
        mid = (low + high) / 2.0
        low, high = (mid, high) if compute_minus_memory(mid) < 0 else (low, mid)
    return (low + high) / 2.0


def _rows(inputs: EstimateInputs, profile: AcceptanceProfile, mem: MemoryEstimate, ks: Sequence[int],
          baseline: dict[int, BaselineRow]) -> list[EstimateRow]:
    rows: list[EstimateRow] = []
    draft = inputs.draft
    for k in ks:
        al = profile.al(k)
        for batch, base in baseline.items():
            verify = step(inputs, inputs.target, inputs.tp, batch, batch * (k + 1))
            one = first = None
            draft_s = 0.0
            if draft is not None:
                one = step(inputs, draft, inputs.draft_tp, batch, batch, fused=False)
                first = step(inputs, draft, inputs.draft_tp, batch, batch) if draft.fused_params else one
                draft_s = first.seconds + (k - 1) * one.seconds
            total = verify.seconds + draft_s
            base_s = base.step.seconds
            rows.append(EstimateRow(
                k=k, batch=batch, al=al.al, al_low=al.low, al_high=al.high, verify=verify, draft_pass=one,
                draft_first_pass=first if first is not one else None, draft_s=draft_s,
                cost_ratio=(one.seconds / base_s) if one is not None else 0.0, step_s=total,
                tpot_s=total / al.al, throughput=batch * al.al / total, speedup=al.al * base_s / total,
                speedup_low=al.low * base_s / total, speedup_high=al.high * base_s / total,
                fits=batch <= mem.max_batch))
    return rows


def _best(baseline: dict[int, BaselineRow], rows: list[EstimateRow]) -> list[BestK]:
    """Per batch that fits without speculation, the K with the largest speedup among those that fit (0: off)."""
    best: list[BestK] = []
    for batch, base in baseline.items():
        if not base.fits:
            continue
        top = max((r for r in rows if r.batch == batch and r.fits), key=lambda r: r.speedup, default=None)
        best.append(BestK(batch=batch, k=top.k, speedup=top.speedup) if top is not None and top.speedup > 1.0
                    else BestK(batch=batch, k=0, speedup=1.0))
    return best


def _notes(inputs: EstimateInputs, mem: MemoryEstimate) -> list[str]:
    notes = [*inputs.target.notes, *(inputs.draft.notes if inputs.draft else [])]
    if inputs.method == "ngram":
        notes.append("n-gram drafting has no model: its lookup is costed at nothing beyond the fixed overhead")
    if inputs.draft is not None and inputs.draft_tp < inputs.tp:
        notes.append(f"the draft runs on {inputs.draft_tp} of the {inputs.tp} GPUs; they hold its weights and KV "
                     "cache, and set the KV capacity of the whole group")
    if inputs.target.experts:
        notes.append(f"MoE: {inputs.target.experts_per_token} of {inputs.target.experts} experts per token; a "
                     "step reads the experts its tokens are routed to (uniform routing assumed)")
    if mem.max_batch_without_draft == 0:
        notes.append("the target's weights (and reserve) leave no room for one sequence's KV cache: add GPUs "
                     "(--tp), use --dtype fp8, or a larger GPU")
    elif mem.max_batch == 0:
        notes.append("with the draft, not one sequence's KV cache fits: a smaller draft, --draft-tp, or more GPUs")
    return notes


def check_parallel(inputs: EstimateInputs) -> None:
    """Tensor parallelism splits attention heads evenly; the draft runs on at most the target's GPUs."""
    if inputs.draft_tp > inputs.tp:
        raise InputError(f"--draft-tp {inputs.draft_tp} exceeds --tp {inputs.tp}: the draft runs on the target's "
                         "GPUs (1 or the target's TP)")
    for shape, tp, flag in ((inputs.target, inputs.tp, "--tp"), (inputs.draft, inputs.draft_tp, "--draft-tp")):
        if shape is not None and shape.heads % tp:
            raise InputError(f"{shape.source}: num_attention_heads {shape.heads} does not split over {flag} {tp}; "
                             "give a TP that divides it")


def estimate(inputs: EstimateInputs, profile: AcceptanceProfile, ks: Sequence[int],
             batches: Sequence[int]) -> Estimate:
    """The estimate at every K (>= 1) and batch size, against speculation off at the same batch."""
    check_parallel(inputs)
    if any(k < 1 for k in ks) or any(b < 1 for b in batches) or not ks or not batches:
        raise InputError(f"--k {list(ks)} and --batch {list(batches)}: give positive integers, e.g. --k 1,2,4")
    mem = memory(inputs)
    baseline: dict[int, BaselineRow] = {}
    for batch in batches:
        one = step(inputs, inputs.target, inputs.tp, batch, batch)
        baseline[batch] = BaselineRow(batch=batch, step=one, tpot_s=one.seconds, throughput=batch / one.seconds,
                                      fits=batch <= mem.max_batch_without_draft)
    rows = _rows(inputs, profile, mem, ks, baseline)
    tokens = ridge_tokens(inputs)
    return Estimate(inputs=inputs, memory=mem,
                    ridge=[Ridge(k=k, tokens=tokens, batch=tokens / (k + 1)) for k in (0, *ks)],
                    baseline=list(baseline.values()), rows=rows, best=_best(baseline, rows),
                    notes=_notes(inputs, mem), not_modelled=list(NOT_MODELLED))
