"""GPU memory before any run: the weights of target and draft per GPU, the KV cache one token needs, and so the
KV capacity left for the batch and the largest batch that fits.

With the target on `tp` GPUs and the draft on the first `draft_tp` of them, those first GPUs also hold the
draft's weights and KV cache; every GPU of the group must hold the same number of KV tokens (each holds its
share of every sequence's heads), so the GPUs holding the draft set the capacity for all.
"""

from __future__ import annotations

import math

from specmeter.predict.hardware import dtype_bytes
from specmeter.schemas.estimate import EstimateInputs, MemoryEstimate, ModelShape


def kv_heads_per_gpu(shape: ModelShape, tp: int) -> int:
    """KV heads each GPU holds: split over TP, replicated where TP exceeds them (vLLM's rule)."""
    return math.ceil(shape.kv_heads / tp)


def kv_bytes_per_token(shape: ModelShape, tp: int, kv_bytes: int) -> int:
    """Per GPU: K and V, every layer, the heads on this GPU."""
    return 2 * shape.layers * kv_heads_per_gpu(shape, tp) * shape.head_dim * kv_bytes


def weights_bytes(shape: ModelShape, tp: int, bytes_per_param: int) -> float:
    return shape.params * bytes_per_param / tp


def memory(inputs: EstimateInputs) -> MemoryEstimate:
    w, kv = dtype_bytes(inputs.dtype), dtype_bytes(inputs.kv_dtype)
    budget = inputs.hardware.memory_bytes * inputs.mem_fraction
    target_w = weights_bytes(inputs.target, inputs.tp, w)
    target_kv = kv_bytes_per_token(inputs.target, inputs.tp, kv)
    draft = inputs.draft
    draft_w = weights_bytes(draft, inputs.draft_tp, w) if draft is not None else 0.0
    draft_kv = kv_bytes_per_token(draft, inputs.draft_tp, kv) if draft is not None else 0
    free = budget - target_w - inputs.reserve_bytes
    without = max(0, math.floor(free / target_kv))
    with_draft = max(0, math.floor((free - draft_w) / (target_kv + draft_kv)))
    capacity = min(with_draft, without)  # GPUs without the draft hold more, but only as many as the others
    seq = inputs.input_len + inputs.output_len
    return MemoryEstimate(budget_bytes=budget, target_weights_bytes=target_w, draft_weights_bytes=draft_w,
                          reserve_bytes=inputs.reserve_bytes, target_kv_bytes_per_token=target_kv,
                          draft_kv_bytes_per_token=draft_kv, kv_capacity_tokens=capacity,
                          kv_capacity_tokens_without_draft=without, sequence_tokens=seq,
                          max_batch=capacity // seq, max_batch_without_draft=without // seq)
