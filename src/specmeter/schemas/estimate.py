"""What `specmeter plan --hardware ...` prints before anything runs: a roofline estimate of speculative decoding
from datasheet numbers and model shapes, with every input echoed so a reader can redo it by hand.

It is an estimate, not a measurement: every rendering says so in its title (`TITLE`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

TITLE = "roofline estimate, not a measurement"

Dtype = Literal["bf16", "fp16", "fp8"]
Bound = Literal["memory", "compute"]
Method = Literal["draft_model", "eagle", "eagle3", "ngram"]
Role = Literal["target", "draft model", "EAGLE head", "EAGLE-3 head"]


class Hardware(BaseModel):
    """One GPU as a roofline sees it: dense (not 2:4 sparse) tensor throughput, memory bandwidth and size."""

    name: str
    memory_bandwidth: float = Field(gt=0, description="Bytes/s.")
    bf16_flops: float | None = Field(default=None, gt=0, description="Dense BF16 (and FP16) tensor FLOP/s.")
    fp8_flops: float | None = Field(default=None, gt=0, description="Dense FP8 tensor FLOP/s; None: no FP8 "
                                     "(or, for a GPU from flags, not given).")
    memory_bytes: float = Field(gt=0)
    source: str = Field(description="Where the numbers come from (a datasheet, or flags).")


class ModelShape(BaseModel):
    """A model (or a drafter's head) as read from its config.json, and the parameter counts the roofline needs.

    `params`: held in GPU memory. `streamed_params`: read from memory by a decode step that touches every weight
    (the input embedding table is excluded: a step gathers only its tokens' rows from it; a tied lm_head is
    included, since the head reads the whole matrix). `expert_params`: the routed experts' share of
    `streamed_params`, of which a step reads only the experts its tokens are routed to. `active_params`: the
    weights one token multiplies (2 FLOPs each)."""

    source: str
    role: Role
    model_type: str | None = None
    layers: int = Field(gt=0)
    hidden: int = Field(gt=0)
    heads: int = Field(gt=0)
    kv_heads: int = Field(gt=0)
    head_dim: int = Field(gt=0)
    intermediate: int = Field(ge=0)
    vocab: int = Field(gt=0)
    tied_embeddings: bool
    dtype: str | None = Field(default=None, description="The config's torch_dtype / dtype (what the file holds).")
    experts: int = Field(default=0, ge=0, description="Routed experts per MoE layer (0: dense).")
    experts_per_token: int = Field(default=0, ge=0)
    params: int = Field(gt=0)
    streamed_params: int = Field(gt=0)
    expert_params: int = Field(default=0, ge=0)
    active_params: int = Field(gt=0)
    fused_params: int = Field(default=0, ge=0, description="Of `streamed_params` and `active_params`: weights a "
                              "speculation step applies once, before its first draft pass, not in every pass (an "
                              "EAGLE-3 head's fc, fusing the target's hidden states into the head's width).")
    checkpoint_params: int | None = Field(default=None, description="Counted from the safetensors beside the "
                                          "config (header shapes, or the index's total size), when present.")
    notes: list[str] = Field(default_factory=list)


class Efficiency(BaseModel):
    """The fraction of the datasheet's peaks a real step reaches, and what each forward pass costs beyond them."""

    memory: float = Field(gt=0, le=1, description="Of memory bandwidth.")
    compute: float = Field(gt=0, le=1, description="Of dense tensor throughput.")
    overhead_s: float = Field(ge=0, description="Fixed cost per forward pass (launches, scheduling, sampling).")


class EstimateInputs(BaseModel):
    """Everything the estimate was computed from."""

    hardware: Hardware
    target: ModelShape
    draft: ModelShape | None
    method: Method
    tp: int = Field(ge=1)
    draft_tp: int = Field(ge=1)
    input_len: int = Field(ge=0)
    output_len: int = Field(ge=1)
    context_tokens: float = Field(description="Mean context a decode step attends over: input + output / 2.")
    dtype: Dtype
    kv_dtype: Dtype
    acceptance: str = Field(description="Where the acceptance profile comes from.")
    acceptance_rates: list[float] = Field(description="Unconditional per-position rates (past them: extrapolated).")
    efficiency: Efficiency
    mem_fraction: float = Field(gt=0, le=1, description="Of each GPU's memory the engine may use "
                                "(vLLM's gpu_memory_utilization).")
    reserve_bytes: float = Field(ge=0, description="Per GPU, kept for activations, CUDA graphs and buffers.")


class MemoryEstimate(BaseModel):
    """Per GPU of the target's tensor-parallel group. The draft (TP `draft_tp`) sits on the first GPUs of the
    group, and every GPU must hold the same number of KV tokens, so those GPUs set the capacity."""

    budget_bytes: float = Field(description="Memory x mem_fraction.")
    target_weights_bytes: float
    draft_weights_bytes: float = Field(description="On each GPU holding the draft.")
    reserve_bytes: float
    target_kv_bytes_per_token: float = Field(description="Per GPU: 2 x layers x KV heads on it x head_dim x bytes.")
    draft_kv_bytes_per_token: float = Field(description="On each GPU holding the draft.")
    kv_capacity_tokens: int = Field(description="KV tokens left for the batch after weights, reserve and the draft.")
    kv_capacity_tokens_without_draft: int
    sequence_tokens: int = Field(description="Input + output: what one sequence holds at its end.")
    max_batch: int = Field(description="Sequences that fit at sequence_tokens each (0: the weights do not fit).")
    max_batch_without_draft: int


class Step(BaseModel):
    """One forward pass on one GPU: the time is the larger of reading its bytes and doing its FLOPs (at the
    efficiency factors), plus the fixed overhead."""

    tokens: int
    bytes: float
    flops: float
    memory_s: float
    compute_s: float
    seconds: float
    bound: Bound


class BaselineRow(BaseModel):
    """Speculation off at one batch size: one token per sequence per step."""

    batch: int
    step: Step
    tpot_s: float
    throughput: float = Field(description="Output tokens/s of the tensor-parallel group.")
    fits: bool


class EstimateRow(BaseModel):
    """Speculation at one K and batch size: the target verifies B x (K+1) tokens, the drafter ran K passes."""

    k: int
    batch: int
    al: float
    al_low: float
    al_high: float
    verify: Step
    draft_pass: Step | None = Field(description="One draft pass over the batch (None: n-gram, no model); for an "
                                    "EAGLE-3 head a pass after the first, without its fc.")
    draft_first_pass: Step | None = Field(default=None, description="The first draft pass, where it costs more "
                                          "than the others: an EAGLE-3 head's fc runs there, once per step.")
    draft_s: float = Field(description="K draft passes (the first one's fc included).")
    cost_ratio: float = Field(description="c: one draft pass over one speculation-off step at this batch.")
    step_s: float = Field(description="Verify + K draft passes.")
    tpot_s: float
    throughput: float = Field(description="Output tokens/s of the tensor-parallel group: batch x AL / step.")
    speedup: float = Field(description="Over speculation off at the same batch (throughput and TPOT alike).")
    speedup_low: float
    speedup_high: float
    fits: bool = Field(description="The batch fits in the KV capacity left after the draft.")


class Ridge(BaseModel):
    """Where the target's step turns compute-bound on weight streaming alone: tokens per step
    = (peak x compute eff.) / (bandwidth x memory eff.) x bytes per parameter / 2 FLOPs per parameter."""

    k: int
    tokens: float
    batch: float = Field(description="tokens / (K + 1).")


class BestK(BaseModel):
    batch: int
    k: int = Field(description="0: speculation off.")
    speedup: float


class Estimate(BaseModel):
    """The roofline estimate: inputs, memory, the ridge point, and per batch and K the step, TPOT, throughput
    and speedup."""

    title: str = TITLE
    inputs: EstimateInputs
    memory: MemoryEstimate
    ridge: list[Ridge]
    baseline: list[BaselineRow]
    rows: list[EstimateRow]
    best: list[BestK]
    notes: list[str] = Field(default_factory=list)
    not_modelled: list[str] = Field(default_factory=list)
