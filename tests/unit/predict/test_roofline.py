"""The roofline estimate against what must hold from first principles: the ridge point of H100 BF16 weight
streaming, Leviathan et al.'s speedup where everything is memory-bound, KV capacity on a hand-counted config,
and the GPU presets."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from estimate_fixtures import LLAMA_8B, SMALL_DRAFT, iid_al, inputs, shape

from specmeter.common.errors import InputError
from specmeter.predict.acceptance import AcceptanceProfile
from specmeter.predict.hardware import GB, PRESETS, custom, peak_flops, preset
from specmeter.predict.kv_memory import memory
from specmeter.predict.roofline import estimate, ridge_tokens, step, weights_read
from specmeter.schemas.estimate import Efficiency, Hardware


def kv_per_token(config: dict[str, int], kv_heads: int | None = None) -> int:
    """K and V, every layer, every KV head, head_dim = hidden / heads, 2 bytes (BF16)."""
    head_dim = config["hidden_size"] // config["num_attention_heads"]
    return 2 * config["num_hidden_layers"] * (kv_heads or config["num_key_value_heads"]) * head_dim * 2


def test_h100_bf16_weight_streaming_stops_dominating_near_295_tokens_per_step(tmp_path: Path) -> None:
    """H100 SXM, dense BF16: 989e12 FLOP/s over 3.35e12 bytes/s is a ridge of 989 / 3.35 = 295.2 FLOPs per byte.
    A decode step reads each BF16 weight once (2 bytes per parameter) and multiplies it with each of the T tokens
    it verifies (2 FLOPs per parameter per token): T FLOPs per byte. So reading weights dominates below
    T = 295.2 x 2 bytes / 2 FLOPs = 295 tokens per step and compute above it, whatever the model, at equal
    efficiency factors; unequal ones scale it by compute eff. / memory eff."""
    target = shape(tmp_path, "llama", LLAMA_8B)
    h100 = preset("h100")
    derived = 989e12 / 3.35e12 * 2 / 2
    assert ridge_tokens(inputs(h100, target)) == pytest.approx(derived, rel=1e-6)

    # The whole step (its KV and attention over a half-token context add under 0.1%) turns there too, without
    # speculation (one token per sequence) and at K = 3 (four tokens per sequence).
    short = inputs(h100, target)
    assert step(short, target, 1, 290, 290).bound == "memory"
    assert step(short, target, 1, 300, 300).bound == "compute"
    assert step(short, target, 1, 72, 72 * 4).bound == "memory"
    assert step(short, target, 1, 75, 75 * 4).bound == "compute"

    real = inputs(h100, target, efficiency=Efficiency(memory=0.8, compute=0.6, overhead_s=0.0))
    assert ridge_tokens(real) == pytest.approx(derived * 0.6 / 0.8, rel=1e-6)
    ridges = estimate(real, AcceptanceProfile.iid(0.7, 4), [1, 4], [1]).ridge
    assert [(r.k, r.batch) for r in ridges] == [(k, pytest.approx(derived * 0.75 / (k + 1))) for k in (0, 1, 4)]


@pytest.mark.parametrize("a", [0.5, 0.8, 0.95])
def test_memory_bound_limit_is_leviathans_speedup(tmp_path: Path, a: float) -> None:
    """At batch 1 with a short context, target and draft are memory-bound and verifying K + 1 tokens reads the
    same bytes as decoding one (the weights, and one sequence's KV once). A step is then one target step plus K
    draft steps and emits AL = (1 - a^(K+1)) / (1 - a) tokens, so the speedup is Leviathan et al.'s
    (1 - a^(K+1)) / ((1 - a)(K c + 1)), c = draft step / target step: with no fixed overhead, the ratio of bytes
    read, (2 x draft parameters + context x draft KV bytes) / (the same for the target)."""
    target, draft = shape(tmp_path, "t", LLAMA_8B), shape(tmp_path, "d", SMALL_DRAFT, "draft model")
    setup = inputs(preset("h100"), target, draft, input_len=16, output_len=16)
    ctx = 16 + 16 / 2
    c = ((2 * draft.streamed_params + ctx * kv_per_token(SMALL_DRAFT))
         / (2 * target.streamed_params + ctx * kv_per_token(LLAMA_8B)))
    ks = range(1, 9)
    est = estimate(setup, AcceptanceProfile.iid(a, 8), ks, [1])
    for row in est.rows:
        assert row.verify.bound == "memory" and row.draft_pass is not None and row.draft_pass.bound == "memory"
        assert row.cost_ratio == pytest.approx(c, rel=1e-9)
        leviathan = (1 - a ** (row.k + 1)) / ((1 - a) * (row.k * c + 1))
        assert row.speedup == pytest.approx(leviathan, rel=1e-9)
        assert row.tpot_s == pytest.approx(est.baseline[0].tpot_s / leviathan, rel=1e-9)

    # A fixed overhead per pass changes c, not the form: verify still costs what one target step costs.
    slow = setup.model_copy(update={"efficiency": Efficiency(memory=0.8, compute=0.6, overhead_s=3e-4)})
    for row in estimate(slow, AcceptanceProfile.iid(a, 8), ks, [1]).rows:
        assert row.speedup == pytest.approx(iid_al(a, row.k) / (row.k * row.cost_ratio + 1), rel=1e-9)


def test_free_drafts_give_al_and_compute_bound_verify_costs_k_plus_one_steps(tmp_path: Path) -> None:
    """n-gram drafts cost nothing, so memory-bound its speedup is AL itself. Verifying B(K+1) tokens does K+1
    times the FLOPs of B, so once compute-bound speculation's gain shrinks."""
    target = shape(tmp_path, "t", LLAMA_8B)
    setup = inputs(preset("h100"), target, input_len=64, output_len=64)
    est = estimate(setup, AcceptanceProfile.iid(0.8, 4), [4], [1, 256])
    one, big = est.rows
    assert one.draft_pass is None and one.draft_s == 0.0 and one.speedup == pytest.approx(iid_al(0.8, 4))
    base = {b.batch: b for b in est.baseline}
    assert big.verify.flops == pytest.approx(5 * base[256].step.flops, rel=1e-12)
    assert big.verify.bound == "compute" and big.speedup < one.speedup
    assert est.memory.kv_capacity_tokens == est.memory.kv_capacity_tokens_without_draft


def test_moe_step_reads_the_experts_its_tokens_touch(tmp_path: Path) -> None:
    """One token routed to k of E experts reads exactly k of them (the weights it multiplies); many tokens read
    (almost) all."""
    mixtral = {**LLAMA_8B, "model_type": "mixtral", "vocab_size": 32000, "num_local_experts": 8,
               "num_experts_per_tok": 2}
    moe = shape(tmp_path, "moe", mixtral)
    dense_part = moe.streamed_params - moe.expert_params
    assert weights_read(moe, 1, 2) == pytest.approx(2 * (dense_part + moe.expert_params * 2 / 8))
    assert weights_read(moe, 10_000, 2) == pytest.approx(2 * moe.streamed_params)
    assert weights_read(moe, 1, 2) == pytest.approx(2 * moe.active_params)  # one token reads what it multiplies


def small(**kw: int) -> dict[str, object]:
    return {"model_type": "llama", "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": 1000, **kw}


def test_kv_capacity_and_largest_batch_on_a_hand_counted_config(tmp_path: Path) -> None:
    """Target: 2 layers, hidden 64, 4 heads of 16, 2 KV heads, MLP 128, vocab 1000, untied. Parameters:
    embedding and lm_head 2 x 64,000; per layer q and o 2 x 64 x 64, k and v 2 x 64 x 32, MLP 3 x 64 x 128,
    norms 2 x 64 = 36,992; final norm 64: 202,048. KV per token: 2 (K, V) x 2 layers x 2 heads x 16 x 2 bytes
    = 256. Draft: 1 layer, hidden 32, 2 heads of 16, 1 KV head, MLP 64: 2 x 32,000 + 32 x 32 x 2 + 32 x 16 x 2
    + 3 x 32 x 64 + 2 x 32 + 32 = 73,312 parameters, KV 2 x 1 x 1 x 16 x 2 = 64 bytes per token."""
    target = shape(tmp_path, "t", small(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                                        num_key_value_heads=2, intermediate_size=128))
    draft = shape(tmp_path, "d", small(num_hidden_layers=1, hidden_size=32, num_attention_heads=2,
                                       num_key_value_heads=1, intermediate_size=64), "draft model")
    assert (target.params, draft.params) == (202_048, 73_312)
    gpu = Hardware(name="tiny", memory_bandwidth=1e12, bf16_flops=1e14, memory_bytes=10e6, source="test")
    mem = memory(inputs(gpu, target, draft, input_len=100, output_len=28, mem_fraction=0.5, reserve_bytes=1e6))
    free = 10e6 * 0.5 - 1e6 - 2 * 202_048
    assert (mem.target_kv_bytes_per_token, mem.draft_kv_bytes_per_token) == (256, 64)
    assert mem.kv_capacity_tokens_without_draft == math.floor(free / 256) == 14_046
    assert mem.kv_capacity_tokens == math.floor((free - 2 * 73_312) / (256 + 64)) == 10_779
    assert (mem.max_batch, mem.max_batch_without_draft) == (10_779 // 128, 14_046 // 128)

    # TP 2 with the draft on one GPU: each GPU holds half the target (one KV head each); GPU 0 also the whole
    # draft, so it sets the capacity of both.
    split = memory(inputs(gpu, target, draft, input_len=100, output_len=28, mem_fraction=0.5, reserve_bytes=1e6,
                          tp=2, draft_tp=1))
    free_each = 10e6 * 0.5 - 1e6 - 202_048
    assert split.target_kv_bytes_per_token == 128
    assert split.kv_capacity_tokens == math.floor((free_each - 2 * 73_312) / (128 + 64))
    assert split.kv_capacity_tokens_without_draft == math.floor(free_each / 128)


def test_rows_beyond_the_capacity_do_not_fit_and_are_never_best(tmp_path: Path) -> None:
    target = shape(tmp_path, "t", LLAMA_8B)
    draft = shape(tmp_path, "d", SMALL_DRAFT, "draft model")
    setup = inputs(preset("l40s"), target, draft, input_len=4096, output_len=1024)
    est = estimate(setup, AcceptanceProfile.iid(0.8, 4), [2, 4], [1, 4, 16, 64, 256])
    assert 0 < est.memory.max_batch < 256
    for row in est.rows:
        assert row.fits == (row.batch <= est.memory.max_batch)
    fitting = {b.batch for b in est.baseline if b.fits}
    assert {b.batch for b in est.best} == fitting
    for best in est.best:
        if best.k:
            assert next(r for r in est.rows if r.batch == best.batch and r.k == best.k).fits


def test_presets_are_present_with_positive_dense_numbers() -> None:
    for key in ("h100-sxm", "h200", "b200", "a100-80gb", "l40s", "mi300x"):
        hw = PRESETS[key]
        assert hw.memory_bandwidth > 0 and hw.memory_bytes > 0 and (hw.bf16_flops or 0) > 0
        if hw.fp8_flops is not None:  # FP8 runs twice as many FLOPs per cycle as BF16 on every part that has it
            assert hw.fp8_flops == pytest.approx(2 * (hw.bf16_flops or 0), rel=0.02)
    assert preset("H100 SXM") == preset("h100") == preset("h100_sxm") == PRESETS["h100-sxm"]
    assert preset("mi300") == PRESETS["mi300x"] and preset("A100") == PRESETS["a100-80gb"]
    assert peak_flops(preset("l40s"), "fp8") > peak_flops(preset("l40s"), "bf16")
    with pytest.raises(InputError, match="no FP8") as refused:
        peak_flops(preset("a100"), "fp8")
    assert "\n" not in str(refused.value)
    with pytest.raises(InputError, match="no such preset"):
        preset("v100")


def test_a_gpu_from_flags() -> None:
    with pytest.raises(InputError, match="missing memory"):
        custom(None, None, bandwidth_tbs=2.0, tflops=400.0, memory_gb=None, dtype="bf16")
    mine = custom(None, None, bandwidth_tbs=2.0, tflops=400.0, memory_gb=96, dtype="bf16")
    assert (mine.memory_bandwidth, mine.bf16_flops, mine.memory_bytes) == (2e12, 400e12, 96 * GB)
    with pytest.raises(InputError, match="FP8"):
        peak_flops(mine, "fp8")
    pcie = custom("h100", preset("h100"), bandwidth_tbs=2.0, tflops=None, memory_gb=None, dtype="bf16")
    assert pcie.memory_bandwidth == 2e12 and pcie.bf16_flops == preset("h100").bf16_flops
    assert "--gpu bandwidth=2" in pcie.source
