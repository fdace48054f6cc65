"""The committed EAGLE-3 head (models/demo-eagle3) in the roofline estimate before any run: it is costed as a head
that reads the target's hidden states and embedding, not as a model of its own. Its weights are exactly its
checkpoint's tensors; a draft pass after the first reads its one layer and its lm_head over the draft vocabulary,
the first pass also its fc (once per step, as vLLM runs it); it holds one layer of KV cache."""

from __future__ import annotations

import json
import math
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from specmeter.config.prediction import Prediction
from specmeter.predict.roofline import estimate
from specmeter.schemas.estimate import Estimate
from specmeter.workflows.estimate import build

MODELS = Path(__file__).resolve().parents[3] / "models"
TARGET, HEAD, DRAFT = MODELS / "demo-target", MODELS / "demo-eagle3", MODELS / "demo-draft"
BF16 = 2
K = 3


def _tensors(path: Path) -> dict[str, list[int]]:
    """Tensor name -> shape, from the safetensors header (no weight read)."""
    with (path / "model.safetensors").open("rb") as fh:
        (length,) = struct.unpack("<Q", fh.read(8))
        header = json.loads(fh.read(length))
    return {name: info["shape"] for name, info in header.items() if name != "__metadata__"}


def _config(path: Path) -> dict[str, int]:
    cfg = json.loads((path / "config.json").read_text(encoding="utf-8"))
    return {k: v for k, v in cfg.items() if isinstance(v, int) and not isinstance(v, bool)}


def _estimate(draft: Path, ks: tuple[int, ...] = (K,), batches: tuple[int, ...] = (1, 16)) -> Estimate:
    """H100, no fixed overhead per pass: each pass costs what it reads and multiplies, nothing else."""
    request = Prediction(target_config=TARGET, draft_config=draft, acceptance="0.7", hardware="h100",
                         overhead_ms=0.0, ks=list(ks), batches=list(batches))
    inputs, profile, _notes = build(request)
    return estimate(inputs, profile, ks, batches)


def _as_draft_model(tmp_path: Path) -> Path:
    """The head's own config.json read as a one-layer draft model of its width: an embedding and an lm_head over
    the whole vocabulary of its own, no fc (what the head would be if it were a model in its own right)."""
    cfg = json.loads((HEAD / "config.json").read_text(encoding="utf-8"))
    cfg["architectures"] = ["LlamaForCausalLM"]
    out = tmp_path / "as-draft-model"
    out.mkdir()
    (out / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    return out


def test_the_head_is_estimated_as_an_eagle3_head_with_exactly_its_checkpoints_weights() -> None:
    est = _estimate(HEAD)
    head = est.inputs.draft
    assert est.inputs.method == "eagle3" and head is not None and head.role == "EAGLE-3 head"
    # d2t and t2d are maps, not weights; every other tensor is a parameter the head holds.
    tensors = _tensors(HEAD)
    weights = sum(math.prod(dims) for name, dims in tensors.items() if name not in ("d2t", "t2d"))
    assert head.params == weights == head.checkpoint_params
    assert not any("embed" in name for name in tensors)  # the target's embedding: not in its memory
    # The fc fuses three of the target's hidden states: its input width is three times the target's hidden size.
    h, target_h = _config(HEAD)["hidden_size"], _config(TARGET)["hidden_size"]
    assert tensors["fc.weight"] == [h, 3 * target_h] and head.fused_params == math.prod(tensors["fc.weight"])
    assert tensors["lm_head.weight"] == [_config(HEAD)["draft_vocab_size"], h]


def test_the_heads_memory_is_its_weights_and_one_layer_of_kv() -> None:
    est = _estimate(HEAD)
    mem, head, target = est.memory, est.inputs.draft, est.inputs.target
    assert head is not None
    assert mem.draft_weights_bytes == head.params * BF16
    head_cfg = _config(HEAD)
    assert mem.draft_kv_bytes_per_token == (2 * head_cfg["num_hidden_layers"] * head_cfg["num_key_value_heads"]
                                            * head_cfg["head_dim"] * BF16)
    # Same attention shape as the target's layers, one layer of eight: an eighth of the target's KV per token.
    assert mem.draft_kv_bytes_per_token * target.layers == mem.target_kv_bytes_per_token * head.layers
    assert mem.kv_capacity_tokens < mem.kv_capacity_tokens_without_draft


def test_a_pass_after_the_first_reads_the_layer_and_the_small_lm_head_alone() -> None:
    est = _estimate(HEAD)
    head, ctx = est.inputs.draft, est.inputs.context_tokens
    assert head is not None
    for row in est.rows:
        later, first = row.draft_pass, row.draft_first_pass
        assert later is not None and first is not None
        kv = row.batch * ctx * est.memory.draft_kv_bytes_per_token
        assert later.bytes == pytest.approx((head.params - head.fused_params) * BF16 + kv)
        assert first.bytes - later.bytes == pytest.approx(head.fused_params * BF16)  # the fc, once
        assert row.draft_s == pytest.approx(first.seconds + (row.k - 1) * later.seconds)


def test_a_draft_model_pays_the_same_for_every_pass() -> None:
    est = _estimate(DRAFT)
    assert est.inputs.method == "draft_model"
    for row in est.rows:
        assert row.draft_pass is not None and row.draft_first_pass is None
        assert row.draft_s == pytest.approx(row.k * row.draft_pass.seconds)


def test_the_head_costs_less_than_a_model_of_its_width_and_a_fraction_of_the_target(tmp_path: Path) -> None:
    head_est, model_est = _estimate(HEAD), _estimate(_as_draft_model(tmp_path))
    assert model_est.inputs.method == "draft_model"
    for head_row, model_row in zip(head_est.rows, model_est.rows, strict=True):
        assert (head_row.k, head_row.batch) == (model_row.k, model_row.batch)
        assert head_row.draft_pass is not None and model_row.draft_pass is not None
        # An lm_head over 2048 of 8192 tokens and no fc after the first pass: every pass reads less, the whole
        # chain of K passes too, although its first layer's q, k and v read twice the width.
        assert head_row.draft_pass.bytes < model_row.draft_pass.bytes
        assert head_row.draft_s < model_row.draft_s
        # A pass over one layer reads and multiplies a small part of what the target's step does.
        base = next(b for b in head_est.baseline if b.batch == head_row.batch).step
        assert head_row.draft_pass.bytes < base.bytes / 5 and head_row.draft_pass.flops < base.flops / 5
    head, target = head_est.inputs.draft, head_est.inputs.target
    assert head is not None and head.params < target.params / 5


def test_the_command_names_the_head_and_its_fc() -> None:
    res = subprocess.run([sys.executable, "-m", "specmeter.cli", "estimate", "--hardware", "h100", "--target-config",
                          str(TARGET), "--draft-config", str(HEAD), "--acceptance", "0.7", "--k", str(K), "--batch",
                          "1", "--json"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    out = Estimate.model_validate_json(res.stdout)
    assert out.inputs.method == "eagle3" and out.inputs.draft is not None
    assert out.inputs.draft.role == "EAGLE-3 head"
    (row,) = out.rows
    assert row.draft_first_pass is not None and row.draft_pass is not None
    assert row.draft_first_pass.seconds > row.draft_pass.seconds
    assert any("fc" in note and "once per step" in note for note in out.notes)
