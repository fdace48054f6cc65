"""demo-mtp: demo-target served as a MiMo model with one multi-token-prediction (MTP) layer, its forward exactly as
vLLM 0.32 runs it, the unrolled forward it is trained with, and how the checkpoint is laid out.

What vLLM does (model_executor/models/mimo.py, mimo_mtp.py, qwen2.py, config/speculative.py, and
v1/spec_decode/llm_base_proposer.py), and so what this module mirrors:

- MiMoForCausalLM is a Qwen2 model: demo-target's Llama weights under the same names, plus the q/k/v biases
  Qwen2's attention always has (zeros here, so the target computes exactly what demo-target does). Its forward
  hands the proposer the residual stream after the last layer, *before* the final norm.
- With ``{"method": "mtp"}`` vLLM builds MiMoMTPModel from the same config (``num_nextn_predict_layers`` layers)
  and loads ``model.mtp_layers.<i>.*`` from the same checkpoint; the embedding table and the output head are the
  target's, shared.
- One MTP layer at position j gets the target's state h_j and the embedding of the token at j + 1 (zeroed where
  j is 0), and predicts the token at j + 2: ``token_layernorm`` on the embedding, ``hidden_layernorm`` on the
  state, ``input_proj`` (2H -> H, no bias) over [state, embedding], a Qwen2 decoder layer (pre-norm attention with
  q/k/v biases, pre-norm SiLU MLP), the residual added back, ``final_layernorm``, then the target's lm_head.
- Steps 2..K run the same layer again (``spec_step_idx`` stays 0: vLLM warns that acceptance may drop), one token
  per request at the next position, with the layer's own output (after ``final_layernorm``) as the state and the
  embedding of the token drafted last. Its KV cache keeps every position's entry, as an EAGLE head's does.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from demo_models.eagle3 import RMSNorm, step_attention

#: The folder's files that are demo-target's own, linked rather than copied: the target's weights stay one file.
SHARED_FILES = ("model.safetensors", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                "generation_config.json")
#: The file holding what demo-target lacks: the MTP layer and Qwen2's (zero) attention biases.
MTP_FILE = "mtp.safetensors"


@dataclass(frozen=True)
class LayerShape:
    hidden: int
    heads: int
    head_dim: int
    intermediate: int
    vocab: int
    rope_theta: float
    eps: float
    layers: int  # the target's, for the zero biases


class MtpLayer(nn.Module):
    """One MiMo MTP layer under its checkpoint names below ``model.mtp_layers.0.``: ``token_layernorm``,
    ``hidden_layernorm``, ``input_proj``, the decoder layer's ``input_layernorm``, ``self_attn.{q,k,v,o}_proj``
    (q/k/v with bias), ``post_attention_layernorm``, ``mlp.{gate,up,down}_proj``, and ``final_layernorm``."""

    def __init__(self, shape: LayerShape) -> None:
        super().__init__()
        h, nh, hd = shape.hidden, shape.heads, shape.head_dim
        self.shape = shape
        self.token_layernorm = RMSNorm(h, shape.eps)
        self.hidden_layernorm = RMSNorm(h, shape.eps)
        self.input_proj = nn.Linear(2 * h, h, bias=False)
        self.input_layernorm = RMSNorm(h, shape.eps)
        self.self_attn = nn.Module()
        self.self_attn.q_proj = nn.Linear(h, nh * hd, bias=True)
        self.self_attn.k_proj = nn.Linear(h, nh * hd, bias=True)
        self.self_attn.v_proj = nn.Linear(h, nh * hd, bias=True)
        self.self_attn.o_proj = nn.Linear(nh * hd, h, bias=False)
        self.post_attention_layernorm = RMSNorm(h, shape.eps)
        self.mlp = nn.Module()
        self.mlp.gate_proj = nn.Linear(h, shape.intermediate, bias=False)
        self.mlp.up_proj = nn.Linear(h, shape.intermediate, bias=False)
        self.mlp.down_proj = nn.Linear(shape.intermediate, h, bias=False)
        self.final_layernorm = RMSNorm(h, shape.eps)
        inv_freq = 1.0 / (shape.rope_theta ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    @torch.no_grad()
    def init_weights(self, target: Any, gen: torch.Generator) -> None:
        """Random linear weights (std 0.02, the residual outputs smaller, as in a deep transformer's init), zero
        biases, and ``final_layernorm`` from the target's final norm: the output goes through the target's lm_head,
        so the layer's first job is to produce target-like final states. (Starting from the target's last layer
        with an identity ``input_proj`` was tried: its first loss was above a uniform guess's.)"""
        for lin in (self.input_proj, self.self_attn.q_proj, self.self_attn.k_proj, self.self_attn.v_proj,
                    self.mlp.gate_proj, self.mlp.up_proj):
            lin.weight.copy_(torch.randn(lin.weight.shape, generator=gen) * 0.02)
        for lin in (self.self_attn.o_proj, self.mlp.down_proj):
            lin.weight.copy_(torch.randn(lin.weight.shape, generator=gen) * (0.02 / math.sqrt(2)))
        for name in ("q_proj", "k_proj", "v_proj"):
            getattr(self.self_attn, name).bias.zero_()
        self.final_layernorm.weight.copy_(target.model.norm.weight)

    def rope(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """Neox-style rotary embedding (Qwen2's in vLLM) of ``x`` (B, T, heads, head_dim) at ``pos`` (B, T)."""
        ang = pos.float()[..., None] * self.inv_freq
        cos = torch.cat([ang.cos(), ang.cos()], -1)[..., None, :].to(x.dtype)
        sin = torch.cat([ang.sin(), ang.sin()], -1)[..., None, :].to(x.dtype)
        half = x.shape[-1] // 2
        return x * cos + torch.cat([-x[..., half:], x[..., :half]], -1) * sin

    def _qkv(self, emb: torch.Tensor, state: torch.Tensor, pos: torch.Tensor
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Up to attention: q, k, v (B, T, heads, head_dim, RoPE applied) and the decoder layer's residual."""
        emb = torch.where((pos == 0)[..., None], torch.zeros_like(emb), emb)
        x = self.input_proj(torch.cat([self.hidden_layernorm(state), self.token_layernorm(emb)], dim=-1))
        y = self.input_layernorm(x)
        nh, hd = self.shape.heads, self.shape.head_dim
        q = self.self_attn.q_proj(y).unflatten(-1, (nh, hd))
        k = self.self_attn.k_proj(y).unflatten(-1, (nh, hd))
        v = self.self_attn.v_proj(y).unflatten(-1, (nh, hd))
        return self.rope(q, pos), self.rope(k, pos), v, x

    def _after_attention(self, attn_out: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        """From the attention output to the layer's output after ``final_layernorm`` (the next step's state)."""
        residual = self.self_attn.o_proj(attn_out.flatten(-2)) + residual
        x = self.post_attention_layernorm(residual)
        x = self.mlp.down_proj(F.silu(self.mlp.gate_proj(x)) * self.mlp.up_proj(x))
        return self.final_layernorm(x + residual)

    def unrolled(self, embed: nn.Embedding, tokens: torch.Tensor, states: torch.Tensor, steps: int
                 ) -> list[torch.Tensor]:
        """The layer's outputs (before the lm_head) of ``steps`` unrolled steps for every anchor, teacher-forced.

        ``tokens`` (B, T), ``states`` (B, T, H) the target's pre-norm last states. Anchor p (0 <= p < T - 1): step s
        runs at position p + s - 1 with the embedding of token p + s and predicts token p + s + 1; step 1's state is
        the target's at p, step s > 1's is step s - 1's output at the same anchor. Step s attends to step 1's
        entries at positions <= p and to its own and the earlier steps' entries at this anchor, as the KV cache
        holds them (the same scheme as demo_models.eagle3.Eagle3Head.unrolled). Returns one (B, T - 1, H) tensor
        per step; rows whose predicted token lies past the end are junk (the caller masks them)."""
        b, t = tokens.shape
        n = t - 1
        padded = torch.cat([tokens, tokens.new_zeros(b, steps)], dim=1)
        anchor = torch.arange(n, device=tokens.device).expand(b, n)
        state = states[:, :n]
        scale = self.shape.head_dim ** -0.5
        causal = torch.ones(n, n, dtype=torch.bool, device=tokens.device).tril()
        keys: list[torch.Tensor] = []
        values: list[torch.Tensor] = []
        out: list[torch.Tensor] = []
        for s in range(1, steps + 1):
            q, k, v, residual = self._qkv(embed(padded[:, s : s + n]), state, anchor + s - 1)
            if s == 1:
                k1, v1 = k, v
            else:
                keys.append(k)
                values.append(v)
            attn = step_attention(q, k1, v1, keys, values, causal, scale)
            state = self._after_attention(attn, residual)
            out.append(state)
        return out

    def n_params(self) -> int:
        return sum(p.numel() for p in self.parameters())


def mimo_config(target_cfg: dict[str, Any]) -> dict[str, Any]:
    """demo-target's config as a MiMo model with one MTP layer (``num_nextn_predict_layers`` 1). vLLM picks the model
    by ``architectures``; ``model_type`` stays demo-target's ``llama``, whose config carries every field MiMo's Qwen2
    layers read: with ``qwen2`` transformers 5 gives the folder Qwen2's tokenizer class instead of the one its
    tokenizer_config names, which splits digits, so a prompt with numbers would tokenize otherwise than on
    demo-target (the released MiMo's ``mimo`` needs trust_remote_code)."""
    return {**target_cfg, "architectures": ["MiMoForCausalLM"], "num_nextn_predict_layers": 1,
            "torch_dtype": "bfloat16", "dtype": "bfloat16"}


def mtp_tensors(layer: MtpLayer, prefix: str = "model.mtp_layers.0.") -> dict[str, torch.Tensor]:
    """The layer's weights under the checkpoint's names, in bfloat16, plus the target's zero q/k/v biases."""
    tensors = {prefix + name: t.detach().to(torch.bfloat16).contiguous() for name, t in layer.state_dict().items()}
    width = layer.shape.heads * layer.shape.head_dim
    for i in range(layer.shape.layers):
        for proj in ("q_proj", "k_proj", "v_proj"):
            tensors[f"model.layers.{i}.self_attn.{proj}.bias"] = torch.zeros(width, dtype=torch.bfloat16)
    return tensors


def save_mtp(layer: MtpLayer, target_cfg: dict[str, Any], target_dir: Path, out_dir: Path) -> None:
    """config.json, mtp.safetensors and links to demo-target's weights and tokenizer (relative, so a clone keeps
    them): vLLM reads every ``*.safetensors`` file of a folder without an index."""
    from safetensors.torch import save_file

    out_dir.mkdir(parents=True, exist_ok=True)
    save_file(mtp_tensors(layer), str(out_dir / MTP_FILE), metadata={"format": "pt"})
    (out_dir / "config.json").write_text(json.dumps(mimo_config(target_cfg), indent=2, sort_keys=True) + "\n")
    for name in SHARED_FILES:
        link = out_dir / name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(os.path.relpath(target_dir / name, out_dir))
